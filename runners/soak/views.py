"""The G4 soak's pages: the soak page of one run (live by htmx polling, pause / resume / abort
for engineers) and the soak plan page of a soak gate (view; edit by project managers and
engineers; fault targets marked and a soak started by engineers).

Permissions (``acceptance.permissions``): actions need their role — engineers for pause,
resume, abort, marking a fault target and starting; project managers or engineers for editing
the plan — and anyone else gets 403 before any object is looked up. Pages that only show are for
whoever may see the engagement (the customer's own people read-only); for anyone else the
engagement, its gates and soaks do not exist (404).
"""

from __future__ import annotations

import json
import shlex

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.celery import app as celery_app
from acceptance.permissions import Role, engagement_for, has_role
from gates.models import Gate
from gates.services import GateRefused, gate_check_runnable
from runners.doorbell import BrokerUnavailable
from runners.launch import LaunchInvalid, gate_launch
from runners.soak import presentation
from runners.soak.driver import soak_abort, soak_pause, soak_resume
from runners.soak.editing import PlanEditRefused, plan_text_parse, soak_plan_edit
from runners.soak.faults import fault_confirmation_of, fault_node, fault_target_mark
from runners.soak.forms import FaultTargetForm, PlanEditForm, ReasonForm
from runners.soak.models import FaultTarget, Soak
from runners.soak.plan import SoakPlanError, SoakRefused, plan_sha256, soak_plan_of
from runners.soak.rate import g2_rate_basis
from runners.transport import TransportError

ABORT_WAIT_S = 5.0  # the page waits this long for the driver to heal and stop; the rest settles
NO_WORKERS = gettext_lazy(
    "Soaks start from this page only when Celery workers run (CELERY_BROKER_URL set): without "
    "them the soak would run inside this web request. Start it with manage.py run_gate "
    "%(name)s %(code)s instead.")


def _require_engineer(user) -> None:
    if not has_role(user, Role.ENGINEER):
        raise PermissionDenied(_("Only engineers may do this."))


def _require_planner(user) -> None:
    if not has_role(user, Role.PROJECT_MANAGER, Role.ENGINEER):
        raise PermissionDenied(_("Only project managers and engineers may change the plan."))


def _visible_soak(user, soak_id: int) -> Soak:
    """The soak if ``user`` may see its engagement; 404 otherwise (also when absent)."""
    soak = get_object_or_404(Soak.objects.select_related("gate_run__gate__engagement")
                             .defer("figures"), id=soak_id)  # read only before fault_checks
    engagement_for(user, soak.gate_run.gate.engagement.name)
    return soak


def _soak_gate(user, name: str, code: str) -> Gate:
    """The soak gate ``code`` of engagement ``name`` if ``user`` may see it; 404 otherwise
    (also for a gate whose plan is not a soak)."""
    engagement = engagement_for(user, name)
    gate = get_object_or_404(engagement.gates, code=code.upper())
    if not gate.is_soak:
        raise Http404("this gate is not a soak")
    return gate


# --- the soak page ------------------------------------------------------------------------


def _soak_context(request, soak: Soak) -> dict:
    view = presentation.soak_view(soak)
    is_engineer = has_role(request.user, Role.ENGINEER)
    gate = soak.gate_run.gate
    active = soak.state in Soak.ACTIVE and soak.abort_requested_at is None
    # The actions sit outside the polled fragment (a reason being typed must survive a poll);
    # the fragment replaces them only when what they depend on changed since the last poll.
    actions_key = f"{soak.state}-{int(soak.abort_requested_at is not None)}"
    return {
        **view, "gate": gate, "engagement": gate.engagement, "run": soak.gate_run,
        "polling": not view["over"],
        "live_url": reverse("soak-live", args=[soak.id]) + f"?seen={actions_key}",
        "refresh_actions": request.GET.get("seen") != actions_key,
        "plan_url": reverse("soak-plan", args=[gate.engagement.name, gate.code]),
        "can_pause": is_engineer and soak.state == Soak.State.RUNNING and active,
        "can_resume": is_engineer and soak.state == Soak.State.PAUSED and active,
        "can_abort": is_engineer and active,
        "state_text": presentation.state_text(soak.state),
    }


@login_required
@require_GET
def soak_detail(request, soak_id: int):
    soak = _visible_soak(request.user, soak_id)
    return render(request, "soak/detail.html", _soak_context(request, soak))


@login_required
@require_GET
def soak_live(request, soak_id: int):
    """The part of the soak page that changes, for htmx polling (stops when the soak is over)."""
    soak = _visible_soak(request.user, soak_id)
    return render(request, "soak/_live.html", _soak_context(request, soak))


def _action_done(request, soak: Soak):
    if request.htmx:
        return render(request, "soak/_live.html", _soak_context(request, soak))
    return redirect("soak-detail", soak_id=soak.id)


@login_required
@require_POST
def soak_pause_view(request, soak_id: int):
    _require_engineer(request.user)
    soak = _visible_soak(request.user, soak_id)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Not paused: pausing a soak needs a reason."))
        return _action_done(request, soak)
    try:
        soak_pause(soak=soak, actor=request.user.get_username(),
                   reason=form.cleaned_data["reason"])
    except (ValueError, TransportError) as error:
        messages.error(request, _("Not paused: %(reason)s") % {"reason": error})
    else:
        messages.success(request, _("Paused by %(who)s: no new load window starts; the time "
                                    "paused is excluded from the soak.") % {
            "who": request.user.get_username()})
    return _action_done(request, soak)


@login_required
@require_POST
def soak_resume_view(request, soak_id: int):
    _require_engineer(request.user)
    soak = _visible_soak(request.user, soak_id)
    try:
        soak_resume(soak=soak, actor=request.user.get_username())
    except (ValueError, TransportError) as error:
        messages.error(request, _("Not resumed: %(reason)s") % {"reason": error})
    else:
        messages.success(request, _("Resumed by %(who)s.") % {
            "who": request.user.get_username()})
    return _action_done(request, soak)


@login_required
@require_POST
def soak_abort_view(request, soak_id: int):
    _require_engineer(request.user)
    soak = _visible_soak(request.user, soak_id)
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Not aborted: aborting a soak needs a reason."))
        return _action_done(request, soak)
    try:
        soak_abort(soak=soak, actor=request.user.get_username(),
                   reason=form.cleaned_data["reason"], wait_s=ABORT_WAIT_S)
    except (ValueError, TransportError) as error:
        messages.error(request, _("Not aborted: %(reason)s") % {"reason": error})
    else:
        messages.success(request, _("Abort requested by %(who)s: every fault still on is "
                                    "healed first, then the agents stop; the run ends without "
                                    "a decision.") % {"who": request.user.get_username()})
    return _action_done(request, soak)


def _eager() -> bool:
    """True when Celery runs tasks in the calling process (no broker): a soak's driver would
    then run for the whole soak inside the web request that started it."""
    return bool(celery_app.conf.task_always_eager)


# --- the soak plan page -------------------------------------------------------------------


def _plan_context(request, gate: Gate, *, target_form: FaultTargetForm | None = None) -> dict:
    engagement = gate.engagement
    try:
        plan = soak_plan_of(gate)
        plan_error = ""
    except SoakPlanError as error:
        plan = next(s.get("soak") for s in gate.probe_plan if s.get("expand") == "soak")
        plan_error = str(error)
    is_engineer = has_role(request.user, Role.ENGINEER)
    try:
        gate_check_runnable(gate=gate)
        refusal = ""
    except GateRefused as error:
        refusal = str(error)
    nodes = list(engagement.nodes.order_by("role", "name"))
    current = plan_sha256(plan)
    targets = [{"node": t.node.name, "kind": t.get_kind_display(), "target": t.target,
                "by": t.confirmed_by, "at": t.confirmed_at, "confirmation": t.confirmation,
                "argv": [f"{k}: {shlex.join(v)}" for k, v in (t.argv or {}).items() if v],
                "sha": t.argv_sha256, "void": t.plan_sha256 != current}
               for t in FaultTarget.objects.filter(engagement=engagement).select_related(
                   "node").order_by("node__name", "kind", "target")]
    to_confirm = [] if plan_error else _to_confirm(gate, plan)
    soaks = [{"id": s.id, "url": reverse("soak-detail", args=[s.id]),
              "attempt": s.gate_run.attempt, "state": s.state,
              "state_text": presentation.state_text(s.state), "by": s.gate_run.started_by,
              "at": s.gate_run.created_at, "sha": s.plan_sha256}
             for s in Soak.objects.filter(gate_run__gate=gate).select_related(
                 "gate_run").order_by("-gate_run__attempt")[:20]]
    audit = [{"at": a.at, "actor": a.actor, "action": a.action, "reason": a.reason,
              "details": a.details}
             for a in engagement.audit.filter(action__in=["soak plan changed",
                                                          "fault target confirmed"]
                                              ).order_by("-at", "-id")[:20]]
    return {
        "engagement": engagement, "gate": gate, "plan_json": json.dumps(plan, indent=2,
                                                                        ensure_ascii=False),
        "plan_sha256": plan_sha256(plan), "plan_error": plan_error,
        "plan_summary": presentation.plan_summary(plan, _rate_now(gate, plan))
        if not plan_error else [],
        "targets": targets, "to_confirm": to_confirm, "soaks": soaks, "audit": audit,
        "can_edit": has_role(request.user, Role.PROJECT_MANAGER, Role.ENGINEER),
        "can_mark": is_engineer,
        "can_start": is_engineer and not refusal and not plan_error and not _eager(),
        "no_workers": str(NO_WORKERS) % {"name": engagement.name, "code": gate.code}
        if is_engineer and _eager() else "",
        "refusal": refusal, "simulated": engagement.is_lab,
        "target_form": target_form or FaultTargetForm(nodes=nodes),
        "engagement_url": f"/engagements/{engagement.name}/",
    }


def _rate_now(gate: Gate, plan: dict) -> str:
    """The default request rate G2 gives now, or why there is none (a plan whose rate is
    null; "" otherwise)."""
    if plan["load"].get("request_rate") is not None:
        return ""
    try:
        return g2_rate_basis(gate).text()
    except SoakRefused as error:
        return str(error)


def _to_confirm(gate: Gate, plan: dict) -> list[dict]:
    """Each planned fault's node, target, the exact argv it would run, its sha256 and the
    words that confirm it (or why it cannot be confirmed), for the engineer to read first."""
    rows = []
    for fault in plan["faults"]:
        try:
            node = fault_node(gate, fault)
            target = (str(fault["target"]["drive"]) if fault["kind"] == "drive_out" else
                      "/".join(p for p in (fault["target"].get("netns"),
                                           fault["target"].get("interface") or node.interface)
                               if p))
            bound = fault_confirmation_of(node, fault["kind"], target)
        except (GateRefused, ValueError) as error:
            rows.append({"fault": fault["name"], "error": str(error)})
            continue
        rows.append({"fault": fault["name"], "node": node.name, "target": target,
                     "argv": [f"{k}: {shlex.join(v)}" for k, v in bound["argv"].items() if v],
                     "sha": bound["argv_sha256"], "words": bound["words"], "error": ""})
    return rows


@login_required
@require_GET
def soak_plan(request, name: str, code: str):
    gate = _soak_gate(request.user, name, code)
    return render(request, "soak/plan.html", _plan_context(request, gate))


@login_required
@require_http_methods(["GET", "POST"])
def soak_plan_edit_view(request, name: str, code: str):
    """Edit the plan as JSON with a reason; a refused edit names the field and stores
    nothing."""
    _require_planner(request.user)
    gate = _soak_gate(request.user, name, code)
    if request.method == "POST":
        form = PlanEditForm(request.POST)
        if form.is_valid():
            try:
                plan = plan_text_parse(form.cleaned_data["plan"])
                soak_plan_edit(gate=gate, actor=request.user.get_username(),
                               reason=form.cleaned_data["reason"], plan=plan)
            except PlanEditRefused as refusal:
                field = "reason" if refusal.field == "reason" else "plan"
                form.add_error(field, _("Not saved, nothing changed — %(field)s: %(reason)s")
                               % {"field": refusal.field, "reason": refusal})
            else:
                messages.success(request, _("Soak plan of %(code)s changed by %(who)s; "
                                            "recorded in the audit trail.") % {
                    "code": gate.code, "who": request.user.get_username()})
                return redirect("soak-plan", name=gate.engagement.name, code=gate.code)
    else:
        context = _plan_context(request, gate)
        form = PlanEditForm(initial={"plan": context["plan_json"]})
    return render(request, "soak/plan_edit.html", {
        "engagement": gate.engagement, "gate": gate, "form": form,
        "plan_url": reverse("soak-plan", args=[gate.engagement.name, gate.code])})


@login_required
@require_POST
def soak_target_mark(request, name: str, code: str):
    """Allow fault injection on a node interface or array drive with a typed confirmation."""
    _require_engineer(request.user)
    gate = _soak_gate(request.user, name, code)
    nodes = list(gate.engagement.nodes.order_by("role", "name"))
    form = FaultTargetForm(request.POST, nodes=nodes)
    if form.is_valid():
        data = form.cleaned_data
        node = next(n for n in nodes if n.name == data["node"])
        try:
            fault_target_mark(node=node, kind=data["kind"], target=data["target"].strip(),
                              actor=request.user.get_username(),
                              confirmation=data["confirmation"])
        except ValueError as error:
            form.add_error("confirmation" if "confirmation" in str(error) else "target",
                           _("Not marked, nothing stored: %(reason)s") % {"reason": error})
        else:
            messages.success(request, _("%(kind)s of %(target)s on %(node)s is allowed for "
                                        "fault injection (confirmed by %(who)s).") % {
                "kind": data["kind"], "target": data["target"], "node": node.name,
                "who": request.user.get_username()})
            return redirect("soak-plan", name=gate.engagement.name, code=gate.code)
    return render(request, "soak/plan.html", _plan_context(request, gate, target_form=form))


@login_required
@require_POST
def soak_start_view(request, name: str, code: str):
    _require_engineer(request.user)
    gate = _soak_gate(request.user, name, code)
    if _eager():
        messages.error(request, _("Not started, nothing was created: %(reason)s") % {
            "reason": str(NO_WORKERS) % {"name": gate.engagement.name, "code": gate.code}})
        return redirect("soak-plan", name=gate.engagement.name, code=gate.code)
    try:
        gate_run = gate_launch(gate=gate, started_by=request.user.get_username(),
                               reason=request.POST.get("reason", ""),
                               confirmed=request.POST.get("confirm") == "on")
    except (GateRefused, LaunchInvalid) as refusal:
        messages.error(request, _("Not started, nothing was created: %(reason)s")
                       % {"reason": refusal})
        return redirect("soak-plan", name=gate.engagement.name, code=gate.code)
    except BrokerUnavailable as refusal:
        messages.error(request, _("Not started: %(reason)s") % {"reason": refusal})
        return redirect("soak-plan", name=gate.engagement.name, code=gate.code)
    return redirect("soak-detail", soak_id=gate_run.soak.id)
