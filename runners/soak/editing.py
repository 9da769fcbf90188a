"""Editing an engagement's soak plan from the web page and the API: validated by
``runners.soak.plan.plan_validate``, a reason required, old → new recorded in the audit trail
(the pattern of ``gates.services.criterion_threshold_edit``). Nothing is stored when the edit
is refused."""

from __future__ import annotations

import json

from django.db import transaction

from acceptance.models import AuditEntry, Engagement
from gates.models import Gate
from runners.soak.plan import SoakPlanError, SoakRefused, plan_sha256, plan_validate, soak_plan_of


class PlanEditRefused(ValueError):
    """The plan edit was refused; ``field`` names what was wrong (``plan`` or ``reason`` or a
    dotted path inside the plan), the message says why. Nothing was stored."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _changed_paths(old, new, prefix: str = "") -> list[str]:
    """Dotted paths whose value differs between two plans (lists compared whole)."""
    if isinstance(old, dict) and isinstance(new, dict):
        paths = []
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}.{key}" if prefix else key
            if key not in old or key not in new:
                paths.append(path)
            else:
                paths += _changed_paths(old[key], new[key], path)
        return paths
    return [] if old == new else [prefix or "plan"]


def _plan_field(message: str) -> str:
    """The dotted field a SoakPlanError names (``load.window_s`` from ``load.window_s=…``)."""
    text = message.removeprefix("soak plan: ")
    head = text.split(" ", 1)[0].split("=", 1)[0]
    return head if head and head[0].isalpha() else "plan"


def plan_text_parse(text: str) -> dict:
    """The plan from its JSON text. PlanEditRefused(field="plan") naming the line and column
    when it is not JSON or not an object."""
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanEditRefused("plan", f"the plan is not valid JSON: {error.msg} at line "
                                      f"{error.lineno}, column {error.colno}") from None
    except ValueError:  # Python refuses integers of more than 4300 digits while parsing
        raise PlanEditRefused("plan", "the plan is not valid JSON: a number in it has more "
                                      "than 4300 digits") from None
    except RecursionError:
        raise PlanEditRefused("plan", "the plan is not valid JSON: it is nested too "
                                      "deeply") from None
    if not isinstance(plan, dict):
        raise PlanEditRefused("plan", "the plan must be a JSON object")
    return plan


@transaction.atomic
def soak_plan_edit(*, gate: Gate, actor: str, reason: str, plan: dict) -> dict:
    """Replace ``gate``'s soak plan with ``plan`` (validated) and record old → new (sha256 and
    the changed fields) with the reason in the audit trail. Returns the plan as stored.

    Raises PlanEditRefused, nothing changed, when: the reason is blank; the gate has no soak
    step; ``plan`` is malformed (``field`` = the dotted path plan_validate names); nothing
    would change; the engagement is accepted; a run of the gate is in progress."""
    if not reason or not reason.strip():
        raise PlanEditRefused("reason", "changing the soak plan needs a reason")
    gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
    if gate.engagement.state == Engagement.State.ACCEPTED:
        raise PlanEditRefused("plan", f"engagement {gate.engagement.name} is accepted; its "
                                      f"soak plan is final")
    if gate.runs.filter(state__in=["queued", "running", "evaluating"]).exists():
        raise PlanEditRefused("plan", f"{gate.code}: a soak is in progress; change the plan "
                                      f"after it")
    try:
        old = soak_plan_of(gate)
    except SoakRefused as error:
        raise PlanEditRefused("plan", str(error)) from None
    except SoakPlanError:
        old = next(s.get("soak") for s in gate.probe_plan if s.get("expand") == "soak")
    try:
        new = plan_validate(plan, lab=gate.engagement.is_lab)
    except SoakPlanError as error:
        raise PlanEditRefused(_plan_field(str(error)), str(error)) from None
    changed = _changed_paths(old, new)
    if not changed:
        raise PlanEditRefused("plan", "nothing changed: the plan is the current one")
    steps = [dict(step, soak=new) if step.get("expand") == "soak" else step
             for step in gate.probe_plan]
    gate.probe_plan = steps
    gate.save(update_fields=["probe_plan"])
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=actor, action="soak plan changed",
        reason=reason.strip(),
        details={"gate": gate.code, "old_sha256": plan_sha256(old),
                 "new_sha256": plan_sha256(new), "changed": changed[:50]})
    return new
