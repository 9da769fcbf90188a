"""Evidence pages: download a gate's collection scripts, upload the bundles they write.

Every view needs a logged-in user holding ``runners.add_gaterun`` (engineers); object-level
rules for customers arrive with the web application's roles.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from acceptance.models import Engagement
from gates.services import GateRefused
from runners.evidence import EvidenceRefused, collection_script, evidence_import
from runners.forms import EvidenceUploadForm

ENGINEER_PERMISSION = "runners.add_gaterun"


def _gate(name: str, code: str):
    engagement = get_object_or_404(Engagement, name=name)
    return get_object_or_404(engagement.gates, code=code.upper())


@login_required
@permission_required(ENGINEER_PERMISSION, raise_exception=True)
@require_http_methods(["GET", "POST"])
def gate_evidence(request, name: str, code: str):
    gate = _gate(name, code)
    roles = {s["role"] for s in gate.probe_plan} - {"service"}
    nodes = list(gate.engagement.nodes.filter(role__in=roles).order_by("name"))
    form = EvidenceUploadForm()
    if request.method == "POST":
        form = EvidenceUploadForm(request.POST, request.FILES)
        if form.is_valid():
            bundles = [(f.name, f.read()) for f in form.cleaned_data["bundles"]]
            try:
                gate_run = evidence_import(gate=gate, bundles=bundles,
                                           imported_by=request.user.get_username())
            except (EvidenceRefused, GateRefused) as refusal:
                form.add_error("bundles", f"Refused, nothing was stored: {refusal}")
            else:
                decision = getattr(gate_run, "decision", None)
                if decision is not None:
                    messages.success(request, f"Imported run #{gate_run.attempt}: "
                                              f"{decision.sentence}")
                else:
                    messages.error(request, f"Imported run #{gate_run.attempt} gave no "
                                            f"decision: {gate_run.error}")
                return redirect("gate-evidence", name=name, code=gate.code)
    runs = gate.runs.select_related("decision").order_by("-attempt")[:10]
    return render(request, "runners/gate_evidence.html",
                  {"gate": gate, "nodes": nodes, "form": form, "runs": runs})


@login_required
@permission_required(ENGINEER_PERMISSION, raise_exception=True)
@require_http_methods(["GET"])
def collection_script_download(request, name: str, code: str, node: str):
    gate = _gate(name, code)
    target = get_object_or_404(gate.engagement.nodes, name=node)
    try:
        text = collection_script(gate=gate, node=target)
    except EvidenceRefused as error:
        return HttpResponse(str(error), status=404, content_type="text/plain")
    response = HttpResponse(text, content_type="text/x-python")
    filename = f"collect-{gate.engagement.name}-{gate.code}-{target.name}.py"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
