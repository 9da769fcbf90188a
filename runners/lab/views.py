"""The lab page: an engineer starts a lab scenario — local sshd nodes with stand-in tools
(simulated evidence) — from the browser. Part of the lab harness; its URLs are included by
name (``acceptance.urls``), so no production module imports it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from acceptance.data_texts import data_text
from acceptance.permissions import Role, engagements_for, has_role
from runners import pages
from runners.lab.forms import LabForm
from runners.lab.scenarios import SCENARIOS
from runners.lab.server import LabError
from runners.lab.services import lab_up
from runners.views import engagement_url


@login_required
@require_http_methods(["GET", "POST"])
def lab(request):
    """Pick a lab scenario: local sshd nodes with stand-in tools (simulated evidence)."""
    if not has_role(request.user, Role.ENGINEER):
        raise PermissionDenied(_("Only engineers may do this."))
    form = LabForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        scenario, count = form.cleaned_data["scenario"], form.cleaned_data["nodes"]
        try:
            engagement, _server = lab_up(scenario_name=scenario, nodes=count)
        except LabError as error:
            form.add_error(None, _("The lab did not start: %(reason)s") % {"reason": error})
        else:
            messages.success(request, _(
                "Lab engagement %(name)s is up: an array controller and %(n)s inference "
                "node(s) on 127.0.0.1. Its evidence is SIMULATED.") % {
                "name": engagement.name, "n": count})
            return redirect(engagement_url(engagement.name))
    scenarios = [{"name": name, "description": data_text(SCENARIOS[name].get("description", ""))}
                 for name in sorted(SCENARIOS)]
    labs = [{"name": e.name, "url": engagement_url(e.name),
             "nodes_url": reverse("node-list", args=[e.name]), "state": e.state,
             "state_text": pages.state_label(e.state),
             "nodes": e.nodes.count()}
            for e in engagements_for(request.user).filter(is_lab=True).order_by("name")]
    return render(request, "runners/lab.html",
                  {"form": form, "scenarios": scenarios, "labs": labs})
