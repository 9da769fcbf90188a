"""One engagement's page in full: the checklist, nodes and arrays, each gate with its
criteria, latest decision (verdict rows), recent runs and actions, and the audit trail.

``engagement_page`` takes the engagement and what the viewer may do and returns plain data;
the template only loops and branches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Prefetch
from django.urls import reverse
from django.utils.translation import gettext as _

from acceptance.data_texts import data_text, decision_sentence_text
from acceptance.models import BomItem, Engagement
from acceptance.pages.sentences import gate_sentence
from acceptance.pages.words import (
    AUDIT_ACTION_WORDS,
    ENGAGEMENT_STATE_WORDS,
    GATE_STATE_WORDS,
    ORIGIN_WORDS,
    RUN_STATE_WORDS,
    VERDICT_WORDS,
    day,
    days_text,
    gate_title,
    is_overdue,
    minute,
    optional_url,
    run_url,
    week_text,
)
from gates import evaluation
from gates.models import Criterion, CriterionVerdict, Decision, Gate
from gates.plain import source_words
from gates.presentation import VerdictRow, criterion_text, verdict_row
from gates.services import EDITABLE_BY_OPERATOR, criterion_spec
from runners.models import GateRun, Measurement

RECENT_RUNS = 3


@dataclass
class BomLine:
    position: int
    text: str
    ticked: bool
    ticked_by: str
    ticked_at: str
    tick_url: str
    part_number: str = ""
    serials: str = ""
    edit_url: str = ""


@dataclass
class CriterionLine:
    key: str
    metric: str
    description: str
    requirement: str
    unit: str
    source: str
    blocking: bool
    edit_url: str


@dataclass
class RunLine:
    attempt: int
    url: str
    state: str
    state_word: str
    origin: str
    started_by: str
    created_at: str
    error: str


@dataclass
class DecisionView:
    outcome: str
    outcome_word: str
    sentence: str
    decided_at: str
    decided_by: str
    verdicts: list[VerdictRow]
    report_url: str
    report_name: str
    report_signed: str
    report_simulated: bool


@dataclass
class GateSection:
    code: str
    title: str
    state: str
    state_word: str
    due_date: str
    due_text: str
    overdue: bool
    description: str
    criteria: list[CriterionLine]
    decision: DecisionView | None
    plain: str
    runs: list[RunLine]
    in_review: bool
    accept_review_url: str
    launch_url: str
    evidence_url: str
    due_date_url: str = ""


@dataclass
class AuditLine:
    at: str
    actor: str
    action: str
    reason: str
    change: str


def bom_line(item: BomItem, *, engagement_name: str, can_tick: bool) -> BomLine:
    """One checklist line; ``tick_url`` only while it is open and the viewer may tick it,
    ``edit_url`` (edit, remove) whenever the viewer may tick."""
    return BomLine(
        position=item.position, text=f"{item.quantity} × {data_text(item.description)}",
        ticked=item.ticked_at is not None, ticked_by=data_text(item.ticked_by),
        ticked_at=minute(item.ticked_at),
        tick_url=reverse("bom-tick", args=[engagement_name, item.position])
        if can_tick and item.ticked_at is None else "",
        part_number=item.part_number, serials=" ".join(item.serials),
        edit_url=reverse("bom-edit", args=[engagement_name, item.position]) if can_tick else "")


def criterion_requirement(criterion: Criterion) -> str:
    """``>= 24``, ``0.29 … 0.4``, ``17.31 s ± 10 %``."""
    return evaluation.threshold_text(criterion_spec(criterion))


def _unit_text(unit: str) -> str:
    return {"1": _("count"), "ratio": _("ratio")}.get(unit, unit)


def latest_verdicts(decisions: list[Decision]) -> dict[int, list[CriterionVerdict]]:
    """The verdicts of ``decisions`` (the gates' latest) with their measurements and those
    measurements' inputs, for the plain words (gates.plain): three queries, however many
    gates, decisions or figures."""
    figures = Measurement.objects.select_related("node")
    verdicts = (CriterionVerdict.objects.filter(decision__in=decisions).order_by("position")
                .prefetch_related(Prefetch("measurements", queryset=figures.prefetch_related(
                    Prefetch("inputs", queryset=Measurement.objects.select_related("node"))))))
    found: dict[int, list[CriterionVerdict]] = {d.id: [] for d in decisions}
    for v in verdicts:
        found[v.decision_id].append(v)
    return found


def _decision_view(decision: Decision, verdicts: list[CriterionVerdict]) -> DecisionView:
    report = decision.report if has_report(decision) else None
    return DecisionView(
        outcome=decision.outcome,
        outcome_word=str(GATE_STATE_WORDS.get(decision.outcome, decision.outcome)),
        sentence=decision_sentence_text(decision.sentence),
        decided_at=minute(decision.decided_at),
        decided_by=data_text(decision.decided_by),
        # plain=True: what was measured against what (gates.plain), as page 1 of the report
        verdicts=[verdict_row(v, words=VERDICT_WORDS, plain=True) for v in verdicts],
        report_url=reverse("report-download", args=[report.id]) if report else "",
        report_name=report.path.rsplit("/", 1)[-1] if report else "",
        report_signed=minute(report.signed_at) if report else "",
        report_simulated=bool(report and report.simulated),
    )


def has_report(decision: Decision) -> bool:
    """Whether ``decision`` has its signed report (read through ``select_related``)."""
    try:
        decision.report  # noqa: B018 (select_related: no query)
    except Decision.report.RelatedObjectDoesNotExist:
        return False
    return True


def _audit_change(action: str, details: dict) -> str:
    if "old_requirement" in details:
        return _("%(gate)s %(criterion)s: %(old)s → %(new)s") % {
            "gate": details.get("gate", ""), "criterion": details.get("criterion", ""),
            "old": details["old_requirement"], "new": details["new_requirement"]}
    if "stopped_gates" in details:
        return _("gates back to pending: %(gates)s") % {
            "gates": ", ".join(details["stopped_gates"]) or "—"}
    if "reviewed" in details:
        return _("%(gate)s accepted after review") % {"gate": details.get("gate", "")}
    if "node" in details and "new_fingerprint" in details:  # a host key re-pinned
        return f"{details['node']} · {details.get('old_fingerprint', '')} → " \
               f"{details['new_fingerprint']}"
    if "node" in details:
        return f"{details['node']} · {details.get('host_key_fingerprint', '')}"
    # Other entries' details carry these keys with other shapes (the lab's "bom" is a sentence).
    if "old_due_date" in details:
        return _("%(gate)s due %(old)s → %(new)s") % {
            "gate": details.get("gate", ""), "old": details["old_due_date"],
            "new": details.get("new_due_date", "")}
    if isinstance(details.get("bom"), dict):
        item = details["bom"]
        return f"#{item.get('position')} {item.get('quantity')} × {item.get('description')}"
    if isinstance(details.get("file"), str) and "sha256" in details:
        return f"{details['file']} · sha256 {str(details['sha256'])[:16]}…"
    if isinstance(details.get("gates"), dict):
        return " · ".join(f"{code} {g.get('due_date', '')}" for code, g in
                          details["gates"].items() if isinstance(g, dict))
    return ""


def engagement_gates(engagement: Engagement) -> list[Gate]:
    """The engagement's gates with criteria, decisions (verdicts, report) and runs prefetched."""
    return list(engagement.gates.order_by("order").prefetch_related(
        Prefetch("criteria", queryset=Criterion.objects.order_by("position")),
        Prefetch("decisions", queryset=Decision.objects.select_related("report")
                 .prefetch_related("verdicts").order_by("-decided_at", "-id")),
        Prefetch("runs", queryset=GateRun.objects.order_by("-attempt")),
    ))


def engagement_page(engagement: Engagement, *, today: date, can_manage: bool,
                    can_run: bool) -> dict:
    """Everything the engagement page shows. ``can_manage``: project manager actions (tick,
    change thresholds, re-open, accept a review); ``can_run``: links to the engineers' pages
    (launch a gate, import evidence, nodes)."""
    name = engagement.name
    gates = engagement_gates(engagement)
    accepted = engagement.state == Engagement.State.ACCEPTED
    sections = []
    latests = {gate.id: next(iter(gate.decisions.all()), None) for gate in gates}
    verdicts = latest_verdicts([d for d in latests.values() if d is not None])
    for gate in gates:
        latest = latests[gate.id]
        criteria = [
            CriterionLine(
                key=c.key, metric=c.metric, description=criterion_text(c),
                requirement=criterion_requirement(c),
                unit=_unit_text(c.unit), source=source_words(data_text(c.source)),
                blocking=c.blocking,
                edit_url=reverse("criterion-edit", args=[name, gate.code, c.key])
                if can_manage and not accepted and c.operator in EDITABLE_BY_OPERATOR else "")
            for c in gate.criteria.all()
        ]
        runs = [
            RunLine(attempt=r.attempt, url=run_url(r.id),
                    state=r.state, state_word=str(RUN_STATE_WORDS.get(r.state, r.state)),
                    origin=str(ORIGIN_WORDS.get(r.origin, r.origin)), started_by=r.started_by,
                    created_at=minute(r.created_at), error=r.error)
            for r in list(gate.runs.all())[:RECENT_RUNS]
        ]
        in_review = gate.state == Gate.State.REVIEW
        sections.append(GateSection(
            code=gate.code, title=gate_title(gate), state=gate.state,
            state_word=str(GATE_STATE_WORDS.get(gate.state, gate.state)),
            due_date=day(gate.due_date), due_text=days_text(gate.due_date, today),
            overdue=is_overdue(gate, today), description=data_text(gate.description),
            criteria=criteria,
            decision=_decision_view(latest, verdicts[latest.id]) if latest else None,
            plain=gate_sentence(gate, latest, today), runs=runs, in_review=in_review,
            accept_review_url=reverse("gate-accept-review", args=[name, gate.code])
            if in_review and can_manage else "",
            launch_url=optional_url("gate-run-start", name, gate.code) if can_run else "",
            evidence_url=optional_url("gate-evidence", name, gate.code) if can_run else "",
            due_date_url=reverse("gate-due-date", args=[name, gate.code])
            if can_manage and not accepted and gate.state != Gate.State.PASSED else ""))
    bom = [bom_line(i, engagement_name=name, can_tick=can_manage and not accepted)
           for i in engagement.bom_items.order_by("position")]
    nodes = [
        {"name": n.name, "role": n.get_role_display(), "address": f"{n.address}:{n.port}",
         "fingerprint": n.host_key_fingerprint, "array": str(n.array) if n.array else "",
         "jump_host": n.jump_host.name if n.jump_host else ""}
        for n in engagement.nodes.select_related("array", "jump_host").order_by("role", "name")
    ]
    arrays = [
        {"model": a.model, "serial": a.serial, "drives": a.expected_drive_count,
         "drive_model": a.drive_model,
         "link": f"{a.link_speed_mbps / 1000:g} Gb/s", "layout": a.get_layout_display(),
         "raid0": a.layout == a.Layout.RAID0}
        for a in engagement.arrays.order_by("serial")
    ]
    audit = [
        AuditLine(at=minute(a.at), actor=a.actor,
                  action=str(AUDIT_ACTION_WORDS.get(a.action, a.action)), reason=a.reason,
                  change=_audit_change(a.action, a.details or {}))
        for a in engagement.audit.order_by("-at", "-id")
    ]
    stopped = engagement.state == Engagement.State.STOPPED
    return {
        "engagement": engagement,
        "state_word": ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state),
        "start_date": day(engagement.start_date), "end_date": day(engagement.end_date),
        "week_text": week_text(engagement, today),
        "bom": bom, "bom_open": sum(not b.ticked for b in bom),
        "bom_add_url": reverse("bom-add", args=[name]) if can_manage and not accepted else "",
        "bom_upload_url": reverse("bom-upload", args=[name])
        if can_manage and not accepted else "",
        "nodes": nodes, "arrays": arrays, "gates": sections, "audit": audit,
        "stopped": stopped,
        "reopen_url": reverse("engagement-reopen", args=[name]) if stopped and can_manage
        else "",
        "can_manage": can_manage,
        "nodes_url": optional_url("node-list", name) if can_run else "",
    }
