"""Workflows on engagements and gates: seeding, run order, decisions, re-opening, accepting a
review.

Keyword-only functions named ``<noun>_<verb>``. Evaluation itself is the pure
``gates.evaluation``; this module feeds it from the database and records what it decided.
"""

from __future__ import annotations

import math
from datetime import date

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from acceptance import events
from acceptance.models import (
    DEFAULT_REFERENCE_PROFILE,
    Array,
    AuditEntry,
    Engagement,
    Node,
    Organisation,
)
from acceptance.units import measurement_text
from acceptance_core.profiles import PROFILES, ProfileError, profile_get
from gates import derivations, evaluation
from gates.defaults import DEFAULT_GATES, definition_sha256
from gates.models import OPERATOR_BOUNDS, Criterion, CriterionVerdict, Decision, Gate
from gates.reference import (
    DETACH_FIELDS,
    ProfileRefused,
    bound_edit_detach,
    profile_mismatch,
    seed_plan,
    seed_values,
)

SERVICE_ACTOR = "acceptance service (automatic evaluation)"
CRITERION_FIELDS = (
    "metric", "label_filter", "aggregation", "operator", "threshold", "threshold_high",
    "reference_value", "tolerance", "above_range_verdict", "unit", "min_samples", "blocking",
)
# Kept in a criterion and its verdicts' snapshots, not in the evaluation's spec.
REFERENCE_FIELDS = ("reference_figure", "reference_profile")


class GateRefused(Exception):
    """A gate may not run now; the message says why and what would let it run."""


def gates_seed(*, engagement: Engagement) -> list[Gate]:
    """Copy the default gates G1–G4 and their criteria into ``engagement``, the figures of its
    reference profile in the criteria that compare with one (``gates.reference``; ProfileRefused
    naming profile and figure when the profile lacks one)."""
    gates = []
    profile = engagement.reference_profile
    for order, definition in enumerate(DEFAULT_GATES, start=1):
        gate = Gate.objects.create(
            engagement=engagement, code=definition["code"], name=definition["name"], order=order,
            due_week=definition["due_week"], description=definition["description"],
            probe_plan=seed_plan(definition, profile),
            defaults_sha256=definition_sha256(definition),
        )
        Criterion.objects.bulk_create(
            Criterion(gate=gate, position=position, key=c["key"], description=c["description"],
                      **{**{f: c[f] for f in ("source", *CRITERION_FIELDS, *REFERENCE_FIELDS)
                            if f in c}, **seed_values(definition, c, profile)})
            for position, c in enumerate(definition["criteria"], start=1)
        )
        gates.append(gate)
    return gates


# Names an engagement may not take: the page that creates engagements sits at /engagements/new/.
RESERVED_ENGAGEMENT_NAMES = ("new",)
ARRAY_FIELDS = ("model", "serial", "expected_drive_count", "drive_model", "link_speed_mbps",
                "layout")


def _organisation(customer: str) -> tuple[Organisation, bool]:
    """The organisation named ``customer`` (created if new) and whether it was created."""
    name = (customer or "").strip()
    if not name:
        raise ValidationError({"customer": _("give the customer organisation's name")})
    found = Organisation.objects.filter(name=name).first()
    if found is not None:
        return found, False
    organisation = Organisation(name=name)
    try:
        organisation.full_clean()
    except ValidationError as error:
        raise ValidationError({"customer": error.messages}) from None
    organisation.save()
    return organisation, True


def _arrays_build(engagement: Engagement, arrays: list[dict]) -> list[Array]:
    """Unsaved ``Array`` rows of ``engagement``, each checked; errors name ``arrays[i].field``
    (counted from 1, as people count)."""
    rows, errors, serials = [], {}, {}
    for number, fields in enumerate(arrays, start=1):
        unknown = sorted(set(fields) - set(ARRAY_FIELDS))
        if unknown:
            errors[f"arrays[{number}]"] = [_("unknown field(s): %(fields)s (known: %(known)s)")
                                          % {"fields": ", ".join(unknown),
                                             "known": ", ".join(ARRAY_FIELDS)}]
            continue
        array = Array(engagement=engagement, **fields)
        try:
            array.full_clean(exclude=["engagement"], validate_constraints=False)
        except ValidationError as error:
            errors.update({f"arrays[{number}].{field}": messages
                           for field, messages in error.message_dict.items()})
            continue
        if array.serial in serials:
            errors[f"arrays[{number}].serial"] = [
                _("serial %(serial)s is already array %(other)d's") % {
                    "serial": array.serial, "other": serials[array.serial]}]
            continue
        serials[array.serial] = number
        rows.append(array)
    if errors:
        raise ValidationError(errors)
    return rows


@transaction.atomic
def engagement_create(*, name: str, customer: str, start_date: date | str, is_lab: bool = False,
                      report_language: str = "en",
                      reference_profile: str = DEFAULT_REFERENCE_PROFILE,
                      arrays: list[dict] | tuple = (), actor: str = "",
                      via: str = "") -> Engagement:
    """A new active engagement for ``customer`` (the organisation is created if new) with its
    arrays and G1–G4 seeded from the defaults (each with the definition's sha256, due at the end
    of weeks 2, 4, 7, 10 from ``start_date``).

    All or nothing: ValidationError (keyed by field: ``name``, ``customer``, ``start_date``,
    ``report_language``, ``reference_profile``, ``arrays[i].serial`` …) and nothing stored.
    With ``actor``, the creation is recorded in the engagement's audit trail (``via``: the door
    it came through, e.g. "on the engagement page")."""
    if (name or "").strip().lower() in RESERVED_ENGAGEMENT_NAMES:
        raise ValidationError({"name": _("%(name)s is reserved: choose another name") % {
            "name": repr(name)}})
    errors = {}
    engagement = Engagement(name=name, start_date=start_date, is_lab=is_lab,
                            report_language=report_language,
                            reference_profile=reference_profile)
    try:
        engagement.full_clean(exclude=["customer"])
    except ValidationError as error:
        errors.update(error.message_dict)
    if "reference_profile" in errors and reference_profile not in PROFILES:
        # the model's "Value 'R1' is not a valid choice." names no profile the user could use
        try:
            profile_get(reference_profile)
        except ProfileError as error:
            errors["reference_profile"] = [str(error)]
    if "reference_profile" not in errors:
        try:
            for definition in DEFAULT_GATES:
                for criterion in definition["criteria"]:
                    seed_values(definition, criterion, reference_profile)
        except ProfileRefused as error:
            errors["reference_profile"] = [str(error)]
    try:
        rows = _arrays_build(engagement, list(arrays))
    except ValidationError as error:
        errors.update(error.message_dict)
    try:
        organisation, organisation_created = _organisation(customer)
    except ValidationError as error:
        errors.update(error.message_dict)
    if errors:
        raise ValidationError(errors)
    engagement.customer = organisation
    engagement.save()
    for array in rows:
        array.engagement = engagement
    Array.objects.bulk_create(rows)
    engagement_seed(engagement=engagement, actor=actor, via=via,
                    organisation_created=organisation_created)
    return engagement


@transaction.atomic
def engagement_seed(*, engagement: Engagement, actor: str = "", via: str = "",
                    organisation_created: bool = False,
                    action: str = "engagement created") -> list[Gate]:
    """Seed a new engagement's G1–G4 (``gates_seed``) and, with ``actor``, record its creation
    in the audit trail: who, through which door, its customer, arrays and gates' due dates and
    definition sha256s. ValueError when it has gates already."""
    if engagement.gates.exists():
        raise ValueError(_("engagement %(name)s has its gates already") % {
            "name": engagement.name})
    gates = gates_seed(engagement=engagement)
    if actor:
        AuditEntry.objects.create(
            engagement=engagement, actor=actor, action=action,
            reason=f"{action} {via}".strip(),
            details={"customer": engagement.customer.name,
                     "organisation_created": organisation_created,
                     "start_date": engagement.start_date.isoformat(),
                     "report_language": engagement.report_language,
                     "reference_profile": engagement.reference_profile,
                     "arrays": list(engagement.arrays.order_by("serial")
                                    .values_list("serial", flat=True)),
                     "gates": {g.code: {"due_date": g.due_date.isoformat(),
                                        "defaults_sha256": g.defaults_sha256} for g in gates}},
        )
    return gates


@transaction.atomic
def gate_due_date_move(*, gate: Gate, due_date: date, actor: str, reason: str) -> Gate:
    """Move ``gate``'s due date, with the reason and the old and new dates in the audit trail.
    ValueError, with nothing changed, when the reason is blank, the date is the current one,
    or the gate has passed (its date is history)."""
    if not reason or not reason.strip():
        raise ValueError(_("moving a due date needs a reason"))
    gate = Gate.objects.select_for_update().select_related("engagement").get(pk=gate.pk)
    if gate.state == Gate.State.PASSED:
        raise ValueError(_("%(gate)s has passed; its due date is history") % {
            "gate": gate.code})
    old = gate.due_date
    if due_date == old:
        raise ValueError(_("%(gate)s is already due on %(date)s") % {
            "gate": gate.code, "date": old.isoformat()})
    gate.rescheduled_due_date = due_date
    gate.save(update_fields=["rescheduled_due_date"])
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=actor, action="due date moved",
        reason=reason.strip(),
        details={"gate": gate.code, "old_due_date": old.isoformat(),
                 "new_due_date": due_date.isoformat(), "due_week": gate.due_week},
    )
    return gate


def gate_get(*, engagement: Engagement, code: str) -> Gate:
    try:
        return engagement.gates.get(code=code.upper())
    except Gate.DoesNotExist:
        known = ", ".join(engagement.gates.values_list("code", flat=True))
        raise GateRefused(_("engagement %(name)s has no gate %(code)s (gates: %(known)s)") % {
            "name": engagement.name, "code": repr(code), "known": known}) from None


def gate_check_runnable(*, gate: Gate) -> None:
    """Raise GateRefused unless ``gate`` may run now: engagement active, earlier gates passed,
    a probe plan exists and no other run of it is in flight."""
    engagement = gate.engagement
    if engagement.state == Engagement.State.STOPPED:
        raise GateRefused(_(
            "%(gate)s: engagement %(name)s is stopped (%(why)s) No gate runs, the stopped one "
            "included, until a person re-opens the engagement with a reason (manage.py "
            "reopen_engagement %(name)s --reason '…').") % {
            "gate": gate.code, "name": engagement.name, "why": engagement.stopped_reason})
    if engagement.state == Engagement.State.ACCEPTED:
        raise GateRefused(_("%(gate)s: engagement %(name)s is already accepted.") % {
            "gate": gate.code, "name": engagement.name})
    for earlier in gate.previous_gates():
        if earlier.state != Gate.State.PASSED:
            raise GateRefused(_(
                "%(gate)s: gates run in order and %(earlier)s (%(name)s) has not passed (its "
                "state: %(state)s).") % {"gate": gate.code, "earlier": earlier.code,
                                         "name": _(earlier.name), "state": _(earlier.state)})
    if not gate.probe_plan:
        raise GateRefused(_("%(gate)s: this version has no probes for %(name)s yet.") % {
            "gate": gate.code, "name": _(gate.name)})
    if gate.runs.filter(state__in=["queued", "running", "evaluating"]).exists():
        raise GateRefused(_("%(gate)s: a run of it is already in progress.") % {
            "gate": gate.code})
    mismatch = profile_mismatch(gate)
    if mismatch:
        raise GateRefused(mismatch)


def criterion_spec(criterion: Criterion) -> evaluation.CriterionSpec:
    return evaluation.CriterionSpec(
        key=criterion.key, **{f: getattr(criterion, f) for f in CRITERION_FIELDS}
    )


def criterion_snapshot(criterion: Criterion) -> dict:
    snapshot = {f: getattr(criterion, f) for f in (*CRITERION_FIELDS, *REFERENCE_FIELDS)}
    snapshot.update(key=criterion.key, description=criterion.description,
                    source=criterion.source,
                    requirement=evaluation.threshold_text(criterion_spec(criterion)))
    return snapshot


def _failing_parts(verdicts: list[evaluation.Verdict],
                   criteria: dict[str, Criterion]) -> list[str]:
    failing = [v for v in verdicts if v.verdict in ("fail", "review")]
    parts = []
    for v in failing:
        spec = criterion_spec(criteria[v.key])
        parts.append(f"{spec.metric} {evaluation.threshold_text(spec)} measured "
                     f"{measurement_text(v.measured, spec.unit, evaluation.bounds(spec))}"
                     + (f" on {v.node}" if v.node else ""))
    return parts


def _sentence(gate: Gate, outcome: str, parts: list[str], count: int) -> str:
    title = f"{gate.code} {gate.name.lower()}"
    if outcome == "passed":
        return f"{title} passed: all {count} criteria met."
    if outcome == "review":
        return (f"{title} needs review: {'; '.join(parts)} is outside the reference range; a "
                f"person must accept it with a reason or re-run.")
    return f"{title} stopped: {'; '.join(parts)}{_STOPPED_TAIL}"


_STOPPED_TAIL = ". The engagement stops here until a person re-opens it with a recorded reason."


def _stopped_parts(decision: Decision) -> str:
    """The failing parts a stop sentence (:func:`_sentence`) names, for the engagement's
    stopped reason."""
    head, _sep, rest = decision.sentence.partition(" stopped: ")
    return rest.removesuffix(_STOPPED_TAIL) if rest else decision.sentence


@transaction.atomic
def decision_record(*, gate_run, verdicts: list[evaluation.Verdict],
                    criteria: list[Criterion], outcome: str) -> Decision:
    """Record the decision with every verdict and its evidence. The gate and engagement do not
    move yet: a decision counts only with its signed report, whose transaction calls
    :func:`decision_settle` (``reports.services.report_issue``)."""
    gate = gate_run.gate
    by_key = {c.key: c for c in criteria}
    parts = _failing_parts(verdicts, by_key)
    decision = Decision.objects.create(
        gate=gate, gate_run=gate_run, outcome=outcome,
        sentence=_sentence(gate, outcome, parts, len(verdicts)),
        decided_by=SERVICE_ACTOR, decided_at=timezone.now(),
    )
    through = CriterionVerdict.measurements.through
    links = []
    for position, verdict in enumerate(verdicts, start=1):
        criterion = by_key[verdict.key]
        row = CriterionVerdict.objects.create(
            decision=decision, criterion=criterion, position=position,
            criterion_snapshot=criterion_snapshot(criterion), measured_value=verdict.measured,
            unit=criterion.unit, verdict=verdict.verdict, explanation=verdict.explanation,
        )
        # the verdict is new: its evidence links inserted, not diffed against none by .set()
        # (which sends every id to the database twice; a G4 verdict has thousands)
        links += [through(criterionverdict_id=row.id, measurement_id=sample_id)
                  for sample_id in dict.fromkeys(verdict.sample_ids)]
    through.objects.bulk_create(links, batch_size=5000)
    return decision


def decision_is_latest(decision: Decision) -> bool:
    """True when no later decision was recorded on ``decision``'s gate."""
    return not decision.gate.decisions.filter(decided_at__gt=decision.decided_at).exists() \
        and not decision.gate.decisions.filter(decided_at=decision.decided_at,
                                               id__gt=decision.id).exists()


@transaction.atomic
def decision_settle(*, decision: Decision) -> bool:
    """Move gate and engagement by ``decision`` once its signed report exists (called inside the
    report's transaction); a decision superseded meanwhile by a later one moves nothing.
    Returns True when the gate moved."""
    gate = Gate.objects.select_for_update().get(pk=decision.gate_id)
    if not decision_is_latest(decision):
        return False
    outcome = decision.outcome
    gate.state = {"passed": Gate.State.PASSED, "stopped": Gate.State.STOPPED,
                  "review": Gate.State.REVIEW}[outcome]
    gate.save(update_fields=["state"])
    decision.gate = gate
    engagement = gate.engagement
    if outcome == "stopped":
        engagement.state = Engagement.State.STOPPED
        engagement.stopped_reason = (
            f"{gate.code} stopped on {decision.decided_at:%Y-%m-%d}: {_stopped_parts(decision)}")
        engagement.save(update_fields=["state", "stopped_reason"])
    elif outcome == "passed" and not engagement.gates.filter(order__gt=gate.order).exists():
        engagement.state = Engagement.State.ACCEPTED
        engagement.save(update_fields=["state"])
    events.announce(events.gate_decided, decision_id=decision.id)  # notifications
    return True


@transaction.atomic
def gate_review_accept(*, gate: Gate, actor: str, reason: str) -> Gate:
    """A person accepts a gate in review (a figure outside the reference range on the good side,
    DOMAIN.md G3) with a reason: the gate passes, and the acceptance — who, why, which decision
    and figures — goes into the audit trail. The signed report of the review decision stays as
    it was. ValueError when the gate is not in review or the reason is blank."""
    if not reason or not reason.strip():
        raise ValueError(_("accepting a review needs a reason"))
    gate = Gate.objects.select_for_update().get(pk=gate.pk)
    if gate.state != Gate.State.REVIEW:
        raise ValueError(_("%(gate)s of %(name)s is %(state)s, not in review") % {
            "gate": gate.code, "name": gate.engagement.name, "state": _(gate.state)})
    decision = gate.decisions.reported().filter(outcome=Decision.Outcome.REVIEW).order_by(
        "-decided_at", "-id").first()
    reviewed = [] if decision is None else [
        {"criterion": v.criterion_snapshot["key"], "metric": v.criterion_snapshot["metric"],
         "requirement": v.criterion_snapshot["requirement"], "measured": v.measured_value,
         "explanation": v.explanation}
        for v in decision.verdicts.filter(verdict="review")
    ]
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=actor, action="review accepted",
        reason=reason.strip(),
        details={"gate": gate.code, "decision": decision.id if decision else None,
                 "gate_run": decision.gate_run_id if decision else None,
                 "sentence": decision.sentence if decision else "", "reviewed": reviewed},
    )
    gate.state = Gate.State.PASSED
    gate.save(update_fields=["state"])
    engagement = gate.engagement
    if not engagement.gates.filter(order__gt=gate.order).exists():
        engagement.state = Engagement.State.ACCEPTED
        engagement.save(update_fields=["state"])
    return gate


def node_array_line_rates(*, engagement: Engagement) -> dict[str, tuple[str, float]]:
    """Node name → (array serial, the array port's line rate in B/s) for every node that reads
    an array: the denominator of the aggregate read-back (``derivations.derive_readback``)."""
    return {
        node.name: (node.array.serial, node.array.link_speed_mbps * 1e6 / 8)
        for node in engagement.nodes.select_related("array").filter(array__isnull=False)
    }


def readback_plan(*, gate) -> derivations.ReadbackPlan | None:
    """What ``gate``'s plan says of its shared read-back (``derivations.derive_readback``): the
    planned node count per array (``planned_nodes``, default 8) and the shortest overlap
    window that counts (``min_overlap_s``, default 60 s); None when the plan has none."""
    for step in gate.probe_plan or []:
        if step.get("expand") == "shared_readback":
            default = derivations.ReadbackPlan()
            return derivations.ReadbackPlan(
                int(step.get("planned_nodes", default.planned_nodes)),
                float(step.get("min_overlap_s", default.min_overlap_s)))
    return None


def array_drive_plans(*, engagement: Engagement) -> dict[str, derivations.ArrayDrives]:
    """Array controller node name → what G1 expects there (``derivations.derive_array_drives``):
    the array's serial, its drive model and its expected drive count."""
    return {
        node.name: derivations.ArrayDrives(node.array.serial, node.array.drive_model,
                                           node.array.expected_drive_count)
        for node in engagement.nodes.select_related("array").filter(
            array__isnull=False, role=Node.Role.ARRAY)
    }


# Which fields a person may edit per operator (the rest of a criterion is its definition).
EDITABLE_BY_OPERATOR = OPERATOR_BOUNDS


class ThresholdInvalid(ValueError):
    """A threshold edit refused because of one input: ``field`` names it (``reason``,
    ``threshold``, ``threshold_high``, ``reference_value``, ``tolerance``); the message
    starts with the field and says the rule."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@transaction.atomic
def criterion_threshold_edit(*, criterion: Criterion, actor: str, reason: str,
                             values: dict[str, float]) -> Criterion:
    """Change a criterion's threshold(s) for its engagement and record old → new with the reason
    in the audit trail. Only the fields of its operator (``EDITABLE_BY_OPERATOR``) may change.

    ThresholdInvalid (naming the field), with nothing changed, when the reason is blank, a
    value is missing or not a finite number, or the model's rule refuses it
    (:meth:`gates.models.Criterion.clean`: a ratio 0 … 1, a time above 0, a drive count ≥ 1,
    ``between`` low ≤ high, a ``within`` tolerance 0 < t ≤ 1 around a non-zero reference).
    ValueError when nothing would change, the engagement is accepted, or a run of the gate is
    in progress (it would be judged against a threshold that moved under it).
    """
    if not reason or not reason.strip():
        raise ThresholdInvalid("reason", _("changing a threshold needs a reason"))
    criterion = Criterion.objects.select_for_update().select_related("gate__engagement").get(
        pk=criterion.pk)
    gate = criterion.gate
    if gate.engagement.state == Engagement.State.ACCEPTED:
        raise ValueError(_("engagement %(name)s is accepted; its criteria are final") % {
            "name": gate.engagement.name})
    if gate.runs.filter(state__in=["queued", "running", "evaluating"]).exists():
        raise ValueError(_("%(gate)s: a run is in progress; change the threshold after it") % {
            "gate": gate.code})
    fields = EDITABLE_BY_OPERATOR[criterion.operator]
    unknown = set(values) - set(fields)
    if unknown:
        raise ThresholdInvalid(sorted(unknown)[0], _(
            "%(key)s (%(operator)s) has no editable %(fields)s") % {
            "key": criterion.key, "operator": criterion.operator,
            "fields": ", ".join(sorted(unknown))})
    new = {}
    for name in fields:
        value = values.get(name)
        if value is None or isinstance(value, bool) or not math.isfinite(float(value)):
            raise ThresholdInvalid(name, _("%(field)s must be a finite number") % {
                "field": name})
        new[name] = float(value)
    old = {name: getattr(criterion, name) for name in fields}
    if old == new:
        raise ValueError(_("nothing changed: the new values are the current ones"))
    old_requirement = evaluation.threshold_text(criterion_spec(criterion))
    for name, value in new.items():
        setattr(criterion, name, value)
    try:
        criterion.clean()
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        raise ThresholdInvalid(field, messages[0]) from None
    left = bound_edit_detach(old, new, criterion, reason)
    criterion.save(update_fields=list(fields) + (list(DETACH_FIELDS) if left else []))
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=actor, action="criterion threshold changed",
        reason=reason.strip(),
        details={"gate": gate.code, "criterion": criterion.key, "metric": criterion.metric,
                 "old": old, "new": new, "old_requirement": old_requirement,
                 "new_requirement": evaluation.threshold_text(criterion_spec(criterion)),
                 **({"left_reference_profile": left} if left else {})},
    )
    return criterion
