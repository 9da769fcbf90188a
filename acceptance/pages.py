"""What the engagement pages show, computed here so the templates only loop and branch.

``dashboard_rows`` (project managers' overview: timeline, next due, overdue, stopped),
``engagement_page`` (one engagement in full) and ``portal_rows`` (a customer's plain-words view)
take querysets from the views and return plain data. The dashboard's queries do not grow with the
number of engagements: engagements and their gates come as plain values in two queries, and
everything else is arithmetic here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache

from django.db.models import Prefetch, QuerySet
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.formats import date_format
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, gettext_lazy, gettext_noop, ngettext
from django.utils.translation import gettext as _

from acceptance.charts import TimelineMark, timeline_svg
from acceptance.data_texts import (
    data_text,
    decision_sentence_text,
    explanation_text,
    stopped_reason_text,
)
from acceptance.models import ENGAGEMENT_WEEKS, BomItem, Engagement, Organisation
from acceptance.units import measurement_text
from gates import evaluation
from gates.models import Criterion, Decision, Gate
from gates.services import EDITABLE_BY_OPERATOR, criterion_spec
from runners.models import GateRun

# The default gates' names (gates.defaults), marked so they are translated where shown.
GATE_NAMES = (gettext_noop("Arrival acceptance"), gettext_noop("Single-node baseline"),
              gettext_noop("Main joint test"), gettext_noop("Stability and acceptance"))

GATE_STATE_WORDS = {
    "pending": gettext_lazy("pending"), "passed": gettext_lazy("passed"),
    "stopped": gettext_lazy("stopped"), "review": gettext_lazy("in review"),
}
ENGAGEMENT_STATE_WORDS = {
    "active": gettext_lazy("active"), "stopped": gettext_lazy("stopped"),
    "accepted": gettext_lazy("accepted"),
}
VERDICT_WORDS = {
    "pass": gettext_lazy("met"), "fail": gettext_lazy("not met"),
    "review": gettext_lazy("outside the reference range: review"),
    "insufficient": gettext_lazy("insufficient data"), "unstable": gettext_lazy("unstable"),
}
RUN_STATE_WORDS = {
    "queued": gettext_lazy("queued"), "running": gettext_lazy("running"),
    "evaluating": gettext_lazy("evaluating"), "done": gettext_lazy("done"),
    "failed": gettext_lazy("failed: no decision"), "cancelled": gettext_lazy("cancelled"),
}
# The audit trail's actions as the services record them (plain English data), in words.
AUDIT_ACTION_WORDS = {
    "criterion threshold changed": gettext_lazy("criterion threshold changed"),
    "engagement re-opened": gettext_lazy("engagement re-opened"),
    "review accepted": gettext_lazy("review accepted"),
    "node enrolled": gettext_lazy("node enrolled"),
    "lab engagement created": gettext_lazy("lab engagement created"),
}
ORIGIN_WORDS = {"ssh": gettext_lazy("collected over SSH"),
                "imported": gettext_lazy("imported evidence bundle")}
RECENT_RUNS = 3


def gate_title(gate: Gate) -> str:
    """``G1 Arrival acceptance`` (the name translated where it is one of the defaults)."""
    return f"{gate.code} {_(gate.name)}"


def gate_phrase(gate: Gate) -> str:
    """``G1 arrival acceptance``: the gate inside a sentence."""
    return f"{gate.code} {_(gate.name).lower()}"


def _day(value: date | datetime | None) -> str:
    if value is None:
        return ""
    # What date_format(…, "Y-m-d") gives, without its per-call formatter (200 rows × 10 dates).
    return (value.date() if isinstance(value, datetime) else value).isoformat()


def _minute(value: datetime | None) -> str:
    return "" if value is None else date_format(value, "Y-m-d H:i") + " UTC"


def run_url(gate_run_id: int) -> str:
    """The page of a gate run (the engineers' pages own it)."""
    return optional_url("run-detail", gate_run_id) or f"/runs/{gate_run_id}/"


def optional_url(name: str, *args) -> str:
    """A link to a page of the engineers' app, or "" where this version has no such page."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


def _days_text(due: date, today: date) -> str:
    days = (due - today).days
    if days == 0:
        return _("due today")
    if days > 0:
        return ngettext("in %(n)d day", "in %(n)d days", days) % {"n": days}
    return ngettext("%(n)d day overdue", "%(n)d days overdue", -days) % {"n": -days}


def _is_overdue(gate: Gate, today: date) -> bool:
    return gate.state != Gate.State.PASSED and gate.due_date < today


# --- the dashboard -------------------------------------------------------------------------


@dataclass
class GateCell:
    code: str
    title: str
    state: str
    state_word: str
    due_date: str
    due_text: str
    overdue: bool
    due_line: str = ""  # "due 2026-12-14 · in 14 days" (no "in …" once passed)


@dataclass
class EngagementRow:
    name: str
    url: str
    customer: str
    state: str
    state_word: str
    is_lab: bool
    start_date: str
    end_date: str
    week_text: str
    timeline: SafeString
    gates: list[GateCell]
    next_due: str
    overdue: list[str]
    stopped: bool
    stopped_reason: str
    rank: tuple = field(repr=False, default=())
    html: SafeString = field(repr=False, default=SafeString(""))  # the rendered section


@dataclass
class DashboardSummary:
    total: int
    stopped: int
    overdue: int
    accepted: int


def _week_text(engagement: Engagement, today: date) -> str:
    days = (today - engagement.start_date).days
    if days < 0:
        return _("starts on %(date)s") % {"date": _day(engagement.start_date)}
    week = days // 7 + 1
    if week > ENGAGEMENT_WEEKS:
        return _("after week %(weeks)d (ended %(date)s)") % {
            "weeks": ENGAGEMENT_WEEKS, "date": _day(engagement.end_date)}
    return _("week %(week)d of %(weeks)d") % {"week": week, "weeks": ENGAGEMENT_WEEKS}


def _next_due(engagement: Engagement, gates: list[Gate], today: date) -> str:
    if engagement.state == Engagement.State.ACCEPTED:
        return _("All gates passed: the engagement is accepted.")
    if engagement.state == Engagement.State.STOPPED:
        return _("Nothing runs until a project manager re-opens the engagement.")
    upcoming = next((g for g in gates if g.state != Gate.State.PASSED), None)
    if upcoming is None:
        return _("Every gate has passed.")
    if upcoming.state == Gate.State.REVIEW:
        return _("%(gate)s awaits a person's review (due %(date)s, %(when)s).") % {
            "gate": gate_title(upcoming), "date": _day(upcoming.due_date),
            "when": _days_text(upcoming.due_date, today)}
    return _("%(gate)s, due %(date)s (%(when)s).") % {
        "gate": gate_title(upcoming), "date": _day(upcoming.due_date),
        "when": _days_text(upcoming.due_date, today)}


class _Words:
    """Translated words of one page build, each worked out once (200 engagements share their
    gate titles, state words and "in N days" texts); the active language cannot change
    within one request."""

    def __init__(self) -> None:
        self._titles: dict[tuple[str, str], str] = {}
        self._states: dict[str, str] = {}
        self._days: dict[tuple[date, date], str] = {}

    def title(self, gate: Gate) -> str:
        key = (gate.code, gate.name)
        if key not in self._titles:
            self._titles[key] = gate_title(gate)
        return self._titles[key]

    def state(self, state: str) -> str:
        if state not in self._states:
            self._states[state] = str(GATE_STATE_WORDS.get(state, state))
        return self._states[state]

    def days(self, due: date, today: date) -> str:
        key = (due, today)
        if key not in self._days:
            self._days[key] = _days_text(due, today)
        return self._days[key]


def timeline(engagement: Engagement, gates: list[Gate], today: date) -> SafeString:
    """The engagement's ten weeks with its gates (``acceptance.charts``)."""
    # Drawn once per distinct input: everything the drawing shows is in the key.
    key = tuple((g.code, g.name, g.due_week, g.state) for g in gates)
    return _timeline(get_language(), engagement.name, engagement.start_date, today, key)


@lru_cache(maxsize=1024)
def _timeline(language: str, name: str, start: date, today: date,
              gates: tuple[tuple[str, str, int, str], ...]) -> SafeString:
    words = _Words()
    return _timeline_drawn(name, start, today, [
        Gate(code=code, name=gate_name, due_week=due_week, state=state,
             engagement=Engagement(start_date=start))
        for code, gate_name, due_week, state in gates], words)


def _timeline_drawn(name: str, start: date, today: date, gates: list[Gate],
                    words: _Words) -> SafeString:
    marks = [
        TimelineMark(
            code=gate.code, due_week=gate.due_week, state=gate.state,
            overdue=_is_overdue(gate, today),
            title=_("%(gate)s: %(state)s, due %(date)s") % {
                "gate": words.title(gate), "state": words.state(gate.state),
                "date": _day(gate.due_date)})
        for gate in gates
    ]
    return timeline_svg(
        start=start, today=today, marks=marks, weeks=ENGAGEMENT_WEEKS,
        label=_("Timeline of %(name)s: ten weeks, gates on their due weeks") % {
            "name": name})


def dashboard_row(engagement: Engagement, today: date, words: _Words | None = None,
                  gates: list[Gate] | None = None) -> EngagementRow:
    """One engagement's dashboard row; ``gates`` in order (default: its prefetched gates)."""
    words = words or _Words()
    gates = list(engagement.gates.all()) if gates is None else gates
    cells, overdue = [], []
    for gate in gates:
        late = _is_overdue(gate, today)
        word = words.state(gate.state)
        due = gate.due_date
        due_text = words.days(due, today)
        due_line = _("due %(date)s") % {"date": _day(due)}
        if gate.state != Gate.State.PASSED:
            due_line += f" · {due_text}"
        cells.append(GateCell(
            code=gate.code, title=words.title(gate), state=gate.state, state_word=word,
            due_date=_day(due), due_text=due_text, overdue=late, due_line=due_line))
        if late:
            overdue.append(_("%(gate)s was due %(date)s (%(when)s); it is %(state)s.") % {
                "gate": words.title(gate), "date": _day(due),
                "when": words.days(due, today), "state": word})
    stopped = engagement.state == Engagement.State.STOPPED
    accepted = engagement.state == Engagement.State.ACCEPTED
    rank = (0 if stopped else 1 if overdue else 3 if accepted else 2,
            min((g.due_date for g in gates if g.state != Gate.State.PASSED), default=date.max),
            engagement.name)
    return EngagementRow(
        name=engagement.name, url=reverse("engagement-detail", args=[engagement.name]),
        customer=engagement.customer.name, state=engagement.state,
        state_word=str(ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state)),
        is_lab=engagement.is_lab, start_date=_day(engagement.start_date),
        end_date=_day(engagement.end_date), week_text=_week_text(engagement, today),
        timeline=timeline(engagement, gates, today), gates=cells,
        next_due=_next_due(engagement, gates, today), overdue=overdue,
        stopped=stopped, stopped_reason=stopped_reason_text(engagement.stopped_reason),
        rank=rank,
    )


# What a dashboard row is made of, read as plain values (no model instances per row).
ENGAGEMENT_VALUES = ("id", "name", "customer__name", "state", "stopped_reason", "is_lab",
                     "start_date")
GATE_VALUES = ("engagement_id", "code", "name", "due_week", "state")

# Built rows with their rendered section, keyed on every stored value the row is made of (the
# engagement's and its gates' fields above), today's date and the language: a changed gate
# state, stop reason or day gives another key, so a row is never served stale. Building and
# rendering 200 rows through the template engine was most of the page's time.
ROW_CACHE_SIZE = 1024  # ~7 KB each: 200 engagements in two languages with room to spare
_row_cache: OrderedDict[tuple, EngagementRow] = OrderedDict()
_row_cache_lock = threading.Lock()


def dashboard_rows(engagements: QuerySet[Engagement],
                   today: date) -> tuple[list[EngagementRow], DashboardSummary]:
    """Rows sorted so what needs a person comes first: stopped, overdue, active, accepted.

    Two queries whatever the number of engagements: their values and their gates' values."""
    words, language = _Words(), get_language()
    gates_of: dict[int, list[tuple]] = {}
    for engagement_id, *values in Gate.objects.filter(
            engagement__in=engagements.values("id")).order_by(
            "engagement_id", "order").values_list(*GATE_VALUES):
        gates_of.setdefault(engagement_id, []).append(tuple(values))
    rows = []
    for values in engagements.values_list(*ENGAGEMENT_VALUES):
        gate_values = tuple(gates_of.get(values[0], ()))
        key = (language, today, values[1:], gate_values)
        with _row_cache_lock:
            row = _row_cache.get(key)
            if row is not None:
                _row_cache.move_to_end(key)
        if row is None:
            row = _row_build(values, gate_values, today, words)
            with _row_cache_lock:
                _row_cache[key] = row
                while len(_row_cache) > ROW_CACHE_SIZE:
                    _row_cache.popitem(last=False)
        rows.append(row)
    rows.sort(key=lambda r: r.rank)
    summary = DashboardSummary(
        total=len(rows), stopped=sum(r.stopped for r in rows),
        overdue=sum(bool(r.overdue) for r in rows),
        accepted=sum(r.state == Engagement.State.ACCEPTED for r in rows))
    return rows, summary


def _row_build(values: tuple, gate_values: tuple, today: date, words: _Words) -> EngagementRow:
    pk, name, customer, state, stopped_reason, is_lab, start_date = values
    engagement = Engagement(id=pk, name=name, customer=Organisation(name=customer), state=state,
                            stopped_reason=stopped_reason, is_lab=is_lab, start_date=start_date)
    gates = [Gate(engagement=engagement, code=code, name=gate_name, due_week=due_week,
                  state=gate_state)
             for code, gate_name, due_week, gate_state in gate_values]
    row = dashboard_row(engagement, today, words, gates=gates)
    row.html = dashboard_row_html(row)
    return row


def dashboard_row_html(row: EngagementRow) -> SafeString:
    """The row's dashboard section (``acceptance/_dashboard_row.html``)."""
    return mark_safe(render_to_string("acceptance/_dashboard_row.html", {"row": row}))  # noqa: S308 (a template's output)


def dashboard_row_cache_clear() -> None:
    """Forget every kept row (benchmarks measure the page without them too)."""
    with _row_cache_lock:
        _row_cache.clear()


# --- gates in plain words --------------------------------------------------------------------


def _failing_text(decision: Decision) -> str:
    parts = [
        _("%(what)s (required %(requirement)s, measured %(measured)s)") % {
            "what": data_text(v.criterion_snapshot.get("description", ""))
            or v.criterion_snapshot["metric"],
            "requirement": v.criterion_snapshot["requirement"],
            "measured": "—" if v.measured_value is None
            else measurement_text(v.measured_value, v.unit)}
        for v in decision.verdicts.all() if v.verdict in ("fail", "review")
    ]
    return "; ".join(parts)


def gate_sentence(gate: Gate, decision: Decision | None, today: date) -> str:
    """The gate's standing in one sentence a customer reads."""
    title = gate_phrase(gate)
    if decision is None:
        if gate.state == Gate.State.PASSED:
            return _("%(gate)s passed.") % {"gate": title}
        return _("%(gate)s is due on %(date)s (%(when)s); no decision yet.") % {
            "gate": title, "date": _day(gate.due_date),
            "when": _days_text(gate.due_date, today)}
    when = _day(decision.decided_at)
    if decision.outcome == Decision.Outcome.PASSED:
        count = len(decision.verdicts.all())
        return ngettext("%(gate)s passed on %(date)s: its %(count)d criterion was met.",
                        "%(gate)s passed on %(date)s: all %(count)d criteria met.", count) % {
            "gate": title, "date": when, "count": count}
    failing = _failing_text(decision)
    if decision.outcome == Decision.Outcome.REVIEW:
        if gate.state == Gate.State.PASSED:
            return _("%(gate)s passed: on %(date)s %(failing)s was outside the reference "
                     "range, and a person accepted it with a recorded reason.") % {
                "gate": title, "date": when, "failing": failing}
        return _("%(gate)s needs review since %(date)s: %(failing)s is outside the reference "
                 "range; a person must accept it with a reason or re-run it.") % {
            "gate": title, "date": when, "failing": failing}
    sentence = _("%(gate)s stopped on %(date)s: %(failing)s.") % {
        "gate": title, "date": when, "failing": failing}
    if gate.state == Gate.State.PENDING:
        sentence += " " + _("The engagement was re-opened since; the gate will run again.")
    return sentence


# --- one engagement ---------------------------------------------------------------------------


@dataclass
class BomLine:
    position: int
    text: str
    ticked: bool
    ticked_by: str
    ticked_at: str
    tick_url: str


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
class VerdictLine:
    metric: str
    description: str
    requirement: str
    measured: str
    verdict: str
    verdict_word: str
    explanation: str


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
    verdicts: list[VerdictLine]
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


@dataclass
class AuditLine:
    at: str
    actor: str
    action: str
    reason: str
    change: str


def bom_line(item: BomItem, *, engagement_name: str, can_tick: bool) -> BomLine:
    """One checklist line; ``tick_url`` only while it is open and the viewer may tick it."""
    return BomLine(
        position=item.position, text=f"{item.quantity} × {data_text(item.description)}",
        ticked=item.ticked_at is not None, ticked_by=data_text(item.ticked_by),
        ticked_at=_minute(item.ticked_at),
        tick_url=reverse("bom-tick", args=[engagement_name, item.position])
        if can_tick and item.ticked_at is None else "")


def criterion_requirement(criterion: Criterion) -> str:
    """``>= 24``, ``0.29 … 0.4``, ``17.31 s ± 10 %``."""
    return evaluation.threshold_text(criterion_spec(criterion))


def _unit_text(unit: str) -> str:
    return {"1": _("count"), "ratio": _("ratio")}.get(unit, unit)


def _decision_view(decision: Decision) -> DecisionView:
    report = decision.report if _has_report(decision) else None
    return DecisionView(
        outcome=decision.outcome,
        outcome_word=str(GATE_STATE_WORDS.get(decision.outcome, decision.outcome)),
        sentence=decision_sentence_text(decision.sentence),
        decided_at=_minute(decision.decided_at),
        decided_by=data_text(decision.decided_by),
        verdicts=[
            VerdictLine(
                metric=v.criterion_snapshot["metric"],
                description=data_text(v.criterion_snapshot.get("description", "")),
                requirement=v.criterion_snapshot["requirement"],
                measured="—" if v.measured_value is None
                else measurement_text(v.measured_value, v.unit),
                verdict=v.verdict, verdict_word=str(VERDICT_WORDS.get(v.verdict, v.verdict)),
                explanation=explanation_text(v.explanation))
            for v in decision.verdicts.all()
        ],
        report_url=reverse("report-download", args=[report.id]) if report else "",
        report_name=report.path.rsplit("/", 1)[-1] if report else "",
        report_signed=_minute(report.signed_at) if report else "",
        report_simulated=bool(report and report.simulated),
    )


def _has_report(decision: Decision) -> bool:
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
    if "node" in details:
        return f"{details['node']} · {details.get('host_key_fingerprint', '')}"
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
    for gate in gates:
        decisions = list(gate.decisions.all())
        latest = decisions[0] if decisions else None
        criteria = [
            CriterionLine(
                key=c.key, metric=c.metric, description=data_text(c.description),
                requirement=criterion_requirement(c),
                unit=_unit_text(c.unit), source=data_text(c.source), blocking=c.blocking,
                edit_url=reverse("criterion-edit", args=[name, gate.code, c.key])
                if can_manage and not accepted and c.operator in EDITABLE_BY_OPERATOR else "")
            for c in gate.criteria.all()
        ]
        runs = [
            RunLine(attempt=r.attempt, url=run_url(r.id),
                    state=r.state, state_word=str(RUN_STATE_WORDS.get(r.state, r.state)),
                    origin=str(ORIGIN_WORDS.get(r.origin, r.origin)), started_by=r.started_by,
                    created_at=_minute(r.created_at), error=r.error)
            for r in list(gate.runs.all())[:RECENT_RUNS]
        ]
        in_review = gate.state == Gate.State.REVIEW
        sections.append(GateSection(
            code=gate.code, title=gate_title(gate), state=gate.state,
            state_word=str(GATE_STATE_WORDS.get(gate.state, gate.state)),
            due_date=_day(gate.due_date), due_text=_days_text(gate.due_date, today),
            overdue=_is_overdue(gate, today), description=data_text(gate.description),
            criteria=criteria,
            decision=_decision_view(latest) if latest else None,
            plain=gate_sentence(gate, latest, today), runs=runs, in_review=in_review,
            accept_review_url=reverse("gate-accept-review", args=[name, gate.code])
            if in_review and can_manage else "",
            launch_url=optional_url("gate-run-start", name, gate.code) if can_run else "",
            evidence_url=optional_url("gate-evidence", name, gate.code) if can_run else ""))
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
         "link": f"{a.link_speed_mbps / 1000:g} Gb/s", "layout": a.get_layout_display(),
         "raid0": a.layout == a.Layout.RAID0}
        for a in engagement.arrays.order_by("serial")
    ]
    audit = [
        AuditLine(at=_minute(a.at), actor=a.actor,
                  action=str(AUDIT_ACTION_WORDS.get(a.action, a.action)), reason=a.reason,
                  change=_audit_change(a.action, a.details or {}))
        for a in engagement.audit.order_by("-at", "-id")
    ]
    stopped = engagement.state == Engagement.State.STOPPED
    return {
        "engagement": engagement,
        "state_word": ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state),
        "start_date": _day(engagement.start_date), "end_date": _day(engagement.end_date),
        "week_text": _week_text(engagement, today),
        "bom": bom, "bom_open": sum(not b.ticked for b in bom),
        "nodes": nodes, "arrays": arrays, "gates": sections, "audit": audit,
        "stopped": stopped,
        "reopen_url": reverse("engagement-reopen", args=[name]) if stopped and can_manage
        else "",
        "can_manage": can_manage,
        "nodes_url": optional_url("node-list", name) if can_run else "",
    }


# --- the customer portal ----------------------------------------------------------------------


@dataclass
class PortalGate:
    code: str
    state: str
    state_word: str
    sentence: str


@dataclass
class PortalReport:
    title: str
    outcome: str
    outcome_word: str
    signed_at: str
    url: str
    simulated: bool


@dataclass
class PortalEngagement:
    name: str
    url: str
    state: str
    state_word: str
    start_date: str
    end_date: str
    week_text: str
    stopped: bool
    timeline: SafeString
    gates: list[PortalGate]
    reports: list[PortalReport]


def portal_rows(engagements: QuerySet[Engagement], today: date) -> list[PortalEngagement]:
    engagements = engagements.select_related("customer").prefetch_related(
        Prefetch("gates", queryset=Gate.objects.order_by("order").prefetch_related(
            Prefetch("decisions", queryset=Decision.objects.select_related("report")
                     .prefetch_related("verdicts").order_by("-decided_at", "-id")))))
    rows = []
    for engagement in engagements.order_by("name"):
        gates, reports = [], []
        gate_rows = list(engagement.gates.all())
        for gate in gate_rows:
            decisions = list(gate.decisions.all())
            gates.append(PortalGate(
                code=gate.code, state=gate.state,
                state_word=str(GATE_STATE_WORDS.get(gate.state, gate.state)),
                sentence=gate_sentence(gate, decisions[0] if decisions else None, today)))
            for decision in decisions:
                if _has_report(decision):
                    reports.append(PortalReport(
                        title=_("%(gate)s report, decision of %(date)s") % {
                            "gate": gate_title(gate), "date": _day(decision.decided_at)},
                        outcome=decision.outcome,
                        outcome_word=str(GATE_STATE_WORDS.get(decision.outcome,
                                                              decision.outcome)),
                        signed_at=_minute(decision.report.signed_at),
                        url=reverse("report-download", args=[decision.report.id]),
                        simulated=decision.report.simulated))
        rows.append(PortalEngagement(
            name=engagement.name,
            url=reverse("engagement-detail", args=[engagement.name]),
            state=engagement.state,
            state_word=str(ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state)),
            start_date=_day(engagement.start_date), end_date=_day(engagement.end_date),
            week_text=_week_text(engagement, today),
            stopped=engagement.state == Engagement.State.STOPPED,
            timeline=timeline(engagement, gate_rows, today), gates=gates, reports=reports))
    return rows
