"""The engineer's pages: an engagement's nodes and their registration, launching a gate run and
watching it live (log, cancel, re-run), the lab, and the evidence pages for sites without SSH.

Permissions (``acceptance.permissions``): every action — registering a node, launching,
cancelling, re-running, starting a lab, evidence scripts and uploads — needs an engineer (or a
superuser); anyone else gets 403 before any object is looked up, so nothing is revealed. Pages
that only show — nodes, runs and a run's live fragment — are for whoever may see the engagement
(project managers, engineers, the customer's own people, read-only); for anyone else the
engagement and its runs do not exist (404).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadhandler import TemporaryFileUploadHandler
from django.core.paginator import InvalidPage, Paginator
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.debug import sensitive_post_parameters, sensitive_variables
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.api.throttles import upload_refused
from acceptance.data_texts import data_text
from acceptance.models import Credential, Engagement, Node, host_key_fingerprint
from acceptance.pages.words import ORIGIN_WORDS
from acceptance.permissions import Role, engagement_for, has_role
from acceptance.services import (
    EnrolmentRefused,
    host_key_fetch,
    node_enrol,
    node_fields_check,
    node_host_key_repin,
)
from gates.models import Gate
from gates.presentation import criterion_text
from gates.services import GateRefused, gate_check_runnable
from runners import exports, measurement_pages, pages
from runners.control import gate_run_cancel
from runners.doorbell import BrokerUnavailable
from runners.evidence import EvidenceRefused, collection_script, evidence_import
from runners.filters import GateRunFilter
from runners.forms import (
    ROLE_CHOICES,
    EvidenceUploadForm,
    NodeAddressForm,
    NodeEnrolForm,
    NodeRepinForm,
    RerunForm,
    host_key_token,
    host_key_unsign,
)
from runners.launch import LaunchInvalid, gate_launch
from runners.models import GateRun
from runners.node_section import NodeSection
from runners.transport import TransportError

CANCEL_WAIT_S = 5.0  # a page waits this long for workers to stop; the rest settles on its own


def _require_engineer(user) -> None:
    if not has_role(user, Role.ENGINEER):
        raise PermissionDenied(_("Only engineers may do this."))


def _visible_run(user, run_id: int) -> GateRun:
    """The gate run if ``user`` may see its engagement; 404 otherwise (also when absent)."""
    run = get_object_or_404(GateRun.objects.select_related(
        "gate__engagement", "rerun_of", "rerun_node"), id=run_id)
    engagement_for(user, run.gate.engagement.name)
    return run


def engagement_url(name: str) -> str:
    """The engagement's own page (the project manager's pages), ``/engagements/NAME/``."""
    try:
        return reverse("engagement-detail", args=[name])
    except NoReverseMatch:
        return f"/engagements/{name}/"


# --- nodes ------------------------------------------------------------------------------------


@login_required
@require_GET
def node_list(request, name: str):
    engagement = engagement_for(request.user, name)
    roles = dict(ROLE_CHOICES)
    is_engineer = has_role(request.user, Role.ENGINEER)
    nodes = [
        {"name": n.name, "role": roles.get(n.role, n.role),
         "where": f"{n.address}:{n.port}", "via": n.jump_host.name if n.jump_host else "",
         "user": n.ssh_user, "fingerprint": n.host_key_fingerprint,
         "key_type": n.host_key.split()[0] if n.host_key else "", "interface": n.interface,
         "fio_target": n.fio_target, "sudo": n.use_sudo, "lab": n.is_lab,
         "repin_url": reverse("node-repin", args=[engagement.name, n.name])
         if is_engineer else ""}
        for n in engagement.nodes.select_related("jump_host").order_by("role", "name")
    ]
    gates = []
    for gate in engagement.gates.order_by("order"):
        last = gate.runs.order_by("-attempt").first()
        gates.append({
            "code": gate.code, "name": gate.name, "state": gate.state,
            "state_text": pages.state_label(gate.state),
            "launch_url": reverse("gate-run-start", args=[engagement.name, gate.code])
            if is_engineer and gate.probe_plan else "",
            "last_url": reverse("run-detail", args=[last.id]) if last else "",
            "last_text": _("attempt #%(n)s: %(state)s") % {
                "n": last.attempt, "state": pages.state_label(last.state)} if last else "",
        })
    return render(request, "runners/node_list.html", {
        "engagement": engagement, "engagement_url": engagement_url(engagement.name),
        "nodes": nodes, "gates": gates, "can_register": is_engineer,
    })


def _step_one_facts(engagement: Engagement, data: dict) -> dict:
    jump = engagement.nodes.filter(pk=data["jump_host"]).first() if data["jump_host"] else None
    host_key = data["host_key"]
    return {"address": data["address"], "port": data["port"], "jump_host": jump,
            "jump_missing": bool(data["jump_host"]) and jump is None,
            "fingerprint": host_key_fingerprint(host_key), "key_type": host_key.split()[0],
            "host_key": host_key}


def _model_errors_onto(form, error: ValidationError) -> None:
    fields = set(form.fields)
    for field, problems in error.message_dict.items() if hasattr(error, "error_dict") else [
            (None, error.messages)]:
        for problem in problems:
            form.add_error(field if field in fields else None, problem)


@sensitive_variables("form", "text", "passphrase", "credential")
def _enrol(request, engagement: Engagement, form: NodeEnrolForm, facts: dict) -> Node | None:
    """Enrol from a valid step-two form; None (errors on the form) when refused."""
    data = form.cleaned_data
    text = data.get("private_key_text")
    if text is None:
        return None
    passphrase = data.get("passphrase") or ""
    if facts["jump_missing"]:
        form.add_error(None, _("The jump host chosen in step 1 is gone: start again."))
        return None
    credential_name = f"{engagement.name}-{data['name']}"
    if Credential.objects.filter(name=credential_name).exists():
        form.add_error("name", _("A stored key named %(name)s exists already: choose another "
                                 "node name.") % {"name": credential_name})
        return None
    fields = {"engagement": engagement, "name": data["name"], "role": data["role"],
              "address": facts["address"], "port": facts["port"], "ssh_user": data["ssh_user"],
              "jump_host": facts["jump_host"], "interface": data["interface"],
              "fio_target": data["fio_target"], "use_sudo": data["use_sudo"],
              "array": data["array"]}
    try:
        node_fields_check(**fields)
    except ValidationError as error:
        _model_errors_onto(form, error)
        return None
    credential = Credential.from_secret(credential_name, text, passphrase)
    try:
        return node_enrol(**fields, credential=credential, host_key=facts["host_key"],
                          confirmed_fingerprint=data["fingerprint"],
                          actor=request.user.get_username())
    except EnrolmentRefused as refusal:
        form.add_error(None, _("Refused, nothing was stored: %(reason)s") % {"reason": refusal})
    except ValidationError as error:
        _model_errors_onto(form, error)
    return None


@sensitive_post_parameters("passphrase")
@login_required
@require_http_methods(["GET", "POST"])
def node_register(request, name: str):
    """Two steps: read the host key the node presents and show its fingerprint; then enrol
    when the engineer confirms it as read on the node's console."""
    _require_engineer(request.user)
    engagement = engagement_for(request.user, name)
    context = {"engagement": engagement, "engagement_url": engagement_url(engagement.name)}
    step = request.POST.get("step") if request.method == "POST" else None
    if step == "enrol":
        try:
            facts = _step_one_facts(engagement, host_key_unsign(
                request.POST.get("host_key_token", ""), engagement))
        except ValidationError as error:
            return render(request, "runners/node_register.html", {
                **context, "step": 1, "form": NodeAddressForm(engagement=engagement),
                "step_error": " ".join(error.messages)})
        form = NodeEnrolForm(request.POST, request.FILES, engagement=engagement)
        if form.is_valid():
            node = _enrol(request, engagement, form, facts)
            if node is not None:
                messages.success(request, _(
                    "Enrolled %(node)s at %(where)s as %(user)s: host key %(fp)s pinned; its "
                    "private key is stored encrypted.") % {
                    "node": node.name, "where": f"{node.address}:{node.port}",
                    "user": node.ssh_user, "fp": node.host_key_fingerprint})
                return redirect("node-list", name=engagement.name)
        return render(request, "runners/node_register.html",
                      {**context, "step": 2, "form": form, "facts": facts})
    form = NodeAddressForm(request.POST or None, engagement=engagement)
    if step == "fetch" and form.is_valid():
        data = form.cleaned_data
        try:
            host_key = host_key_fetch(address=data["address"], port=data["port"],
                                      via=data["jump_host"],
                                      timeout=settings.SSH_CONNECT_TIMEOUT)
        except TransportError as error:
            form.add_error(None, _("Cannot read the host key: %(reason)s") % {"reason": error})
        else:
            token = host_key_token(engagement=engagement, address=data["address"],
                                   port=data["port"], jump_host=data["jump_host"],
                                   host_key=host_key)
            facts = _step_one_facts(engagement, host_key_unsign(token, engagement))
            enrol_form = NodeEnrolForm(initial={"host_key_token": token},
                                       engagement=engagement)
            return render(request, "runners/node_register.html",
                          {**context, "step": 2, "form": enrol_form, "facts": facts})
    return render(request, "runners/node_register.html", {**context, "step": 1, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def node_repin(request, name: str, node: str):
    """Re-pin an enrolled node's host key after a legitimate change (re-installed, keys
    rotated), in two steps as registration: read the key the node presents now; then pin it
    when the engineer confirms its fingerprint as read on the node's console and says why."""
    _require_engineer(request.user)
    engagement = engagement_for(request.user, name)
    found = get_object_or_404(engagement.nodes.select_related("jump_host", "engagement"),
                              name=node)
    context = {"engagement": engagement, "engagement_url": engagement_url(engagement.name),
               "node": found, "pinned": found.host_key_fingerprint,
               "pinned_type": found.host_key.split()[0] if found.host_key else ""}
    step = request.POST.get("step") if request.method == "POST" else None
    if step == "repin":
        form = NodeRepinForm(request.POST, node=found)
        if form.is_valid():
            try:
                pinned = node_host_key_repin(
                    node=found, host_key=form.step_one["host_key"],
                    confirmed_fingerprint=form.cleaned_data["fingerprint"],
                    actor=request.user.get_username(), reason=form.cleaned_data["reason"])
            except EnrolmentRefused as refusal:
                form.add_error(None, _("Refused, nothing was changed: %(reason)s")
                               % {"reason": refusal})
            else:
                messages.success(request, _(
                    "Re-pinned %(node)s: host key %(old)s replaced by %(new)s (recorded in the "
                    "audit trail).") % {"node": pinned.name, "old": context["pinned"],
                                        "new": pinned.host_key_fingerprint})
                return redirect("node-list", name=engagement.name)
        if form.step_one is None:  # the token itself was refused: read the key again
            return render(request, "runners/node_repin.html", {
                **context, "step": 1,
                "step_error": " ".join(e for e in form.errors.get("host_key_token", []))})
        return render(request, "runners/node_repin.html", {
            **context, "step": 2, "form": form,
            "facts": _step_one_facts(engagement, form.step_one)})
    if step == "fetch":
        try:
            host_key = host_key_fetch(address=found.address, port=found.port,
                                      via=found.jump_host, timeout=settings.SSH_CONNECT_TIMEOUT)
        except TransportError as error:
            return render(request, "runners/node_repin.html", {
                **context, "step": 1,
                "step_error": _("Cannot read the host key: %(reason)s") % {"reason": error}})
        if host_key_fingerprint(host_key) == found.host_key_fingerprint:
            return render(request, "runners/node_repin.html", {
                **context, "step": 1,
                "step_error": _("%(node)s presents the pinned host key: nothing to re-pin.")
                % {"node": found.name}})
        token = host_key_token(engagement=engagement, address=found.address, port=found.port,
                               jump_host=found.jump_host, host_key=host_key)
        return render(request, "runners/node_repin.html", {
            **context, "step": 2,
            "form": NodeRepinForm(initial={"host_key_token": token}, node=found),
            "facts": _step_one_facts(engagement, host_key_unsign(token, engagement))})
    return render(request, "runners/node_repin.html", {**context, "step": 1})

# --- launching, watching, cancelling, re-running ------------------------------------------------


def _gate_of(engagement: Engagement, code: str) -> Gate:
    return get_object_or_404(engagement.gates, code=code.upper())


@login_required
@require_http_methods(["GET", "POST"])
def gate_run_launch(request, name: str, code: str):
    _require_engineer(request.user)
    engagement = engagement_for(request.user, name)
    gate = _gate_of(engagement, code)
    if gate.is_soak:
        # A soak (G4) starts from its plan page (targets, plan, workers), never as node probes.
        return redirect("soak-plan", name=engagement.name, code=gate.code)
    # A gate that has passed runs again only when confirmed with a reason (audited).
    needs_confirm = gate.state == Gate.State.PASSED
    form = RerunForm(request.POST if request.method == "POST" else None,
                     needs_confirm=needs_confirm, per_node=False)
    if request.method == "POST" and form.is_valid():
        try:
            gate_run = gate_launch(gate=gate, started_by=request.user.get_username(),
                                   reason=form.cleaned_data["reason"], confirmed=needs_confirm)
        except (GateRefused, LaunchInvalid) as refusal:
            messages.error(request, _("Not started, nothing was created: %(reason)s")
                           % {"reason": refusal})
            return redirect("gate-run-start", name=engagement.name, code=gate.code)
        except BrokerUnavailable as refusal:
            messages.error(request, _("Not started: %(reason)s") % {"reason": refusal})
            return redirect("gate-run-start", name=engagement.name, code=gate.code)
        return redirect("run-detail", run_id=gate_run.id)
    try:
        gate_check_runnable(gate=gate)
        refusal = ""
    except GateRefused as error:
        refusal = str(error)
    roles = sorted({s["role"] for s in gate.probe_plan} - {"service"})
    role_names = dict(ROLE_CHOICES)
    nodes = [{"name": n.name, "role": role_names.get(n.role, n.role),
              "where": f"{n.address}:{n.port}", "fingerprint": n.host_key_fingerprint}
             for n in engagement.nodes.filter(role__in=roles).order_by("role", "name")]
    missing = [str(role_names.get(r, r)) for r in roles if not any(
        n.role == r for n in engagement.nodes.all())]
    runs = [{"url": reverse("run-detail", args=[r.id]), "attempt": r.attempt, "state": r.state,
             "state_text": pages.state_label(r.state), "by": r.started_by, "at": r.created_at}
            for r in gate.runs.order_by("-attempt")[:10]]
    criteria = [{"description": criterion_text(c), "metric": c.metric}
                for c in gate.criteria.all()]
    return render(request, "runners/gate_launch.html", {
        "engagement": engagement, "engagement_url": engagement_url(engagement.name),
        "gate": gate, "gate_state_text": pages.state_label(gate.state), "refusal": refusal,
        "nodes": nodes, "missing": missing, "runs": runs, "criteria": criteria,
        "simulated": engagement.is_lab, "form": form, "needs_confirm": needs_confirm,
        "gate_description": data_text(gate.description), "gate_name": _(gate.name),
    })


def _run_context(request, gate_run: GateRun, cursor: pages.LogCursor, budget: int,
                 measurements_cursor: str | None = None) -> dict:
    over = pages.is_over(gate_run)
    pieces, cursor, complete = pages.log_advance(gate_run, cursor, budget)
    include_results = over and not cursor.results_shown
    if include_results:
        cursor = pages.LogCursor(cursor.probe, cursor.out, cursor.err, cursor.pinned, True)
    rows = pages.node_rows(gate_run)
    is_engineer = has_role(request.user, Role.ENGINEER)
    engagement = gate_run.gate.engagement
    return {
        "run": gate_run, "engagement": engagement, "gate": gate_run.gate,
        "engagement_url": engagement_url(engagement.name),
        "state_text": pages.state_label(gate_run.state), "over": over,
        "simulated": pages.run_simulated(gate_run), "lab": engagement.is_lab, "rows": rows,
        "counts": pages.run_counts(rows), "log": pieces, "log_complete": complete,
        "progress": pages.run_progress(rows, gate_run, timezone.now()),
        "polling": not complete,
        "live_url": reverse("run-live", args=[gate_run.id]) + "?" + cursor.query(),
        "include_results": include_results,
        "results": pages.run_results(gate_run, measurements_cursor) if include_results
        else None,
        "nodes": NodeSection(rows, can_rerun=is_engineer and over),  # _run_nodes.html's text
        "can_cancel": is_engineer and not over,
        "can_rerun": is_engineer and over,
        "rerun_nodes": [r for r in rows if r.rerun_url],
        "rerun": {"node": gate_run.rerun_node.name, "attempt": gate_run.rerun_of.attempt,
                  "url": reverse("run-detail", args=[gate_run.rerun_of_id])}
        if gate_run.rerun_of_id and gate_run.rerun_node_id else None,
        "pinned_probe": cursor.probe if cursor.pinned else None,
        "follow_url": reverse("run-detail", args=[gate_run.id]) + "#log",
    }


MEASUREMENTS_PAGE_GONE = ("measurements_page: the measurements are no longer numbered pages: "
                          "open the run page and follow First, Previous, Next or Last")


@login_required
@require_GET
def run_detail(request, run_id: int):
    gate_run = _visible_run(request.user, run_id)
    probe = request.GET.get("probe", "")
    cursor = pages.LogCursor()
    if probe:
        try:
            cursor = pages.cursor_from({"probe": probe, "pin": "1"}, gate_run)
        except pages.BadCursor as error:
            return HttpResponseBadRequest(str(error), content_type="text/plain")
    if "measurements_page" in request.GET:  # the numbered pages before issue 17's keyset
        return HttpResponseBadRequest(MEASUREMENTS_PAGE_GONE, content_type="text/plain")
    try:
        # read even while the run is not over (no results shown yet): a bad link is refused
        measurement_pages.cursor_from(request.GET.get(measurement_pages.PARAMETER))
        context = _run_context(request, gate_run, cursor, pages.LOG_BUDGET_PAGE,
                               request.GET.get(measurement_pages.PARAMETER))
    except measurement_pages.BadCursor as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain")
    return render(request, "runners/run_detail.html", context)


@login_required
@require_GET
def run_live(request, run_id: int):
    """The part of the run page that changes, for htmx polling: status table, new log text
    from the offsets given (appended out of band), and the results once the run is over."""
    gate_run = _visible_run(request.user, run_id)
    try:
        cursor = pages.cursor_from(request.GET, gate_run)
    except pages.BadCursor as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain")
    context = _run_context(request, gate_run, cursor, pages.LOG_BUDGET_POLL)
    return render(request, "runners/_run_live.html", {**context, "fragment": True})


@login_required
@require_POST
def run_cancel(request, run_id: int):
    _require_engineer(request.user)
    gate_run = _visible_run(request.user, run_id)
    if pages.is_over(gate_run):
        report = None
    else:
        report = gate_run_cancel(gate_run=gate_run, cancelled_by=request.user.get_username(),
                                 wait_s=CANCEL_WAIT_S)
    if report is None or report.already_over:
        messages.info(request, _("Attempt #%(n)s was already over (%(state)s): nothing to "
                                 "cancel.") % {"n": gate_run.attempt,
                                               "state": pages.state_label(gate_run.state)})
    else:
        killed = "; ".join(report.killed) or _("nothing was running on a node")
        messages.success(request, _("Cancel requested by %(who)s. Remote commands: %(killed)s")
                         % {"who": request.user.get_username(), "killed": killed})
    return redirect("run-detail", run_id=gate_run.id)


@login_required
@require_http_methods(["GET", "POST"])
def run_rerun(request, run_id: int):
    """Re-run a finished attempt: the whole gate (every node: a new attempt), or with ``node``
    one node alone (a new attempt that runs only there and carries the other nodes' evidence,
    ``gate_run_rerun_node``). GET shows the confirmation form (reason; for a gate that has
    passed, an explicit confirmation); POST starts it. The earlier attempt, its evidence and
    any decision stay as they were."""
    _require_engineer(request.user)
    gate_run = _visible_run(request.user, run_id)
    gate = gate_run.gate
    data = request.POST if request.method == "POST" else None
    node = (request.POST if data is not None else request.GET).get("node", "")
    needs_confirm = gate.state == Gate.State.PASSED
    form = RerunForm(data, initial={"node": node}, needs_confirm=needs_confirm,
                     per_node=bool(node))
    if data is not None and form.is_valid():
        who, reason = request.user.get_username(), form.cleaned_data["reason"]
        try:
            new_run = gate_launch(gate=gate, started_by=who, reason=reason,
                                  confirmed=needs_confirm, node=node, rerun_of=gate_run)
        except (GateRefused, LaunchInvalid) as refusal:
            form.add_error(None, _("Not started, nothing was created: %(reason)s")
                           % {"reason": refusal})
        except BrokerUnavailable as refusal:
            form.add_error(None, _("Not started: %(reason)s") % {"reason": refusal})
        else:
            if node:
                text = _("Attempt #%(new)s of %(gate)s started: %(node)s runs again alone; the "
                         "other nodes' evidence is carried from attempt #%(old)s.") % {
                    "new": new_run.attempt, "gate": gate.code, "node": node,
                    "old": gate_run.attempt}
            else:
                text = _("Attempt #%(new)s of %(gate)s started on every node; attempt #%(old)s "
                         "stays as it was.") % {"new": new_run.attempt, "gate": gate.code,
                                                "old": gate_run.attempt}
            messages.info(request, text)
            return redirect("run-detail", run_id=new_run.id)
    latest = gate.runs.order_by("-attempt").first()
    superseded = node and latest is not None and latest.pk != gate_run.pk
    return render(request, "runners/rerun_confirm.html", {
        "superseded": superseded,
        "latest_url": reverse("run-detail", args=[latest.id]) if superseded else "",
        "latest_attempt": latest.attempt if latest else None,
        "run": gate_run, "gate": gate, "engagement": gate.engagement, "node": node,
        "form": form, "needs_confirm": needs_confirm, "over": pages.is_over(gate_run),
        "gate_state_text": pages.state_label(gate.state),
        "run_url": reverse("run-detail", args=[gate_run.id]),
        "engagement_url": engagement_url(gate.engagement.name),
    })


# --- evidence without SSH ----------------------------------------------------------------------


@csrf_exempt  # checked by _gate_evidence: the upload handlers must be set before the check reads
@login_required  # the body
@require_http_methods(["GET", "POST"])
def gate_evidence(request, name: str, code: str):
    _require_engineer(request.user)
    # Every uploaded bundle goes to a temporary file, none is held in memory (the default keeps
    # files under 2.5 MB in memory: a hundred of them would be 250 MB before any check).
    request.upload_handlers = [TemporaryFileUploadHandler(request)]
    return _gate_evidence(request, name, code)


@csrf_protect
def _gate_evidence(request, name: str, code: str):
    gate = _gate_of(engagement_for(request.user, name), code)
    roles = {s["role"] for s in gate.probe_plan} - {"service"}
    nodes = list(gate.engagement.nodes.filter(role__in=roles).order_by("name"))
    needs_confirm = gate.state == Gate.State.PASSED
    form = EvidenceUploadForm(needs_confirm=needs_confirm)
    if request.method == "POST":
        if refused := upload_refused(request):
            return refused
        form = EvidenceUploadForm(request.POST, request.FILES, needs_confirm=needs_confirm)
        if form.is_valid():
            uploads = form.cleaned_data["bundles"]
            try:
                gate_run = evidence_import(
                    gate=gate, bundles=[(f.name, f) for f in uploads],
                    imported_by=request.user.get_username(),
                    confirmed=bool(form.cleaned_data.get("confirm")),
                    reason=form.cleaned_data.get("reason", ""))
            except (EvidenceRefused, GateRefused) as refusal:
                form.add_error("bundles", _("Refused, nothing was stored: %(reason)s")
                               % {"reason": refusal})
            else:
                decision = getattr(gate_run, "decision", None)
                if decision is not None:
                    messages.success(request, _("Imported run #%(n)s: %(sentence)s") % {
                        "n": gate_run.attempt, "sentence": decision.sentence})
                else:
                    messages.error(request, _("Imported run #%(n)s gave no decision: "
                                              "%(error)s") % {"n": gate_run.attempt,
                                                              "error": gate_run.error})
                return redirect("gate-evidence", name=name, code=gate.code)
            finally:
                for upload in uploads:
                    upload.close()
    runs = [{"url": reverse("run-detail", args=[r.id]), "attempt": r.attempt,
             "origin": str(ORIGIN_WORDS.get(r.origin, r.origin)), "state": r.state,
             "state_text": pages.state_label(r.state),
             "outcome": pages.state_label(r.decision.outcome)
             if hasattr(r, "decision") else "—",
             "by": r.started_by, "at": r.created_at}
            for r in gate.runs.select_related("decision").order_by("-attempt")[:10]]
    return render(request, "runners/gate_evidence.html",
                  {"gate": gate, "nodes": nodes, "form": form, "runs": runs,
                   "needs_confirm": needs_confirm,
                   "engagement_url": engagement_url(gate.engagement.name)})


@login_required
@require_GET
def collection_script_download(request, name: str, code: str, node: str):
    _require_engineer(request.user)
    gate = _gate_of(engagement_for(request.user, name), code)
    target = get_object_or_404(gate.engagement.nodes, name=node)
    try:
        text = collection_script(gate=gate, node=target)
    except EvidenceRefused as error:
        return HttpResponse(str(error), status=404, content_type="text/plain")
    response = HttpResponse(text, content_type="text/x-python")
    filename = f"collect-{gate.engagement.name}-{gate.code}-{target.name}.py"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- CSV exports ------------------------------------------------------------------------------


def _csv_response(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text.encode(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def engagement_export_csv(request, name: str, kind: str):
    """Measurements, decisions (with verdicts) or the audit trail of an engagement as CSV, for
    whoever may see it."""
    engagement = engagement_for(request.user, name)
    if kind not in exports.KINDS:
        raise Http404
    return _csv_response(exports.engagement_export(engagement, kind),
                         f"{engagement.name}-{kind}.csv")


@login_required
@require_GET
def run_export_csv(request, run_id: int, kind: str):
    """The same of one gate run."""
    gate_run = _visible_run(request.user, run_id)
    if kind not in exports.KINDS:
        raise Http404
    return _csv_response(exports.run_export(gate_run, kind),
                         f"{gate_run.gate.engagement.name}-{gate_run.gate.code}-"
                         f"run{gate_run.attempt}-{kind}.csv")


# --- the "Runs" list --------------------------------------------------------------------------

RUNS_PER_PAGE = 25


@login_required
@require_GET
def run_list(request, name: str):
    """An engagement's gate runs, newest first, filtered by gate, state, who started them and
    when, 25 a page; for whoever may see the engagement. A bad filter or page answers 400 with
    the field named."""
    engagement = engagement_for(request.user, name)
    runs_filter = GateRunFilter(request.GET or None, engagement=engagement)
    refusal = ""
    runs = GateRun.objects.none()
    if runs_filter.is_bound and not runs_filter.is_valid():
        refusal = runs_filter.errors_text()
    else:
        runs = runs_filter.qs
    paginator = Paginator(runs.select_related("gate", "decision").order_by("-created_at", "-id"),
                          RUNS_PER_PAGE)
    try:
        page = paginator.page(request.GET.get("page") or 1)
    except InvalidPage as error:
        refusal = refusal or f"page: {error}"
        page = paginator.page(1)
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "runners/run_list.html", {
        "engagement": engagement, "engagement_url": engagement_url(engagement.name),
        "filter": runs_filter, "refusal": refusal, "page": page,
        "rows": pages.run_list_rows(page.object_list, timezone.now()),
        "query": query.urlencode(),
    }, status=400 if refusal else 200)
