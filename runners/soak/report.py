"""The G4 report's soak section: the charts, the per-fault table and the gaps of the soak a
decision was made on, as plain data for ``templates/reports/_soak_section.html`` (WeasyPrint).

:func:`soak_report_section` returns a :class:`SoakReportSection` for a decision whose gate run
is a soak, else None (so the report template shows the section only for G4). Charts are
self-contained SVG strings (``runners.soak.charts``): no stylesheet, no URL, nothing fetched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from gates.models import Decision
from runners.soak import presentation, queries
from runners.soak.models import Soak

REPORT_CHART_WIDTH = 720  # viewBox width: printed across the A4 text width


@dataclass(frozen=True)
class ReportChart:
    """One time series: ``svg`` is a complete ``<svg>`` element."""

    metric: str
    title: str
    unit: str
    svg: str
    points: int
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PhaseCheck:
    """One check in one phase of a fault: value as text, verdict (pass | fail | insufficient)."""

    check: str
    value_text: str
    verdict: str
    explanation: str


@dataclass(frozen=True)
class FaultRow:
    """One fault of the plan: where, when (UTC), how its heal was armed and fired, the checks
    before / during / after it, and its verdict (``pass`` | ``fail`` | ``insufficient`` |
    ``not injected (…)`` | ``not yet``)."""

    name: str
    kind: str
    node: str
    target: str
    injected_at: str
    healed_at: str
    length_s: float | None
    heal: str
    before: tuple[PhaseCheck, ...]
    during: tuple[PhaseCheck, ...]
    after: tuple[PhaseCheck, ...]
    verdict: str
    matrix: tuple[dict, ...] = ()  # checks as rows, phases as columns (presentation._matrix)


@dataclass(frozen=True)
class GapRow:
    node: str
    started_at: str
    ended_at: str
    seconds: float | None
    reason: str


@dataclass(frozen=True)
class CheckRow:
    key: str
    label: str
    requirement: str
    state: str
    value_text: str


@dataclass(frozen=True)
class SoakReportSection:
    """The soak behind a G4 decision, for the report.

    ``plan_summary``: ``[(label, text)]``; ``plan_sha256``: the canonical hash of the plan as
    run; ``held_text`` the plan time of load held (e.g. ``72 h``); ``compression`` plan seconds
    per real second (1 on customer nodes); ``simulated`` True for lab evidence."""

    engagement: str
    gate: str
    attempt: int
    state: str
    simulated: bool
    plan_sha256: str
    plan_summary: tuple[tuple[str, str], ...]
    held_text: str
    planned_text: str
    compression: float
    started_at: str
    finished_at: str
    checks: tuple[CheckRow, ...]
    charts: tuple[ReportChart, ...]
    faults: tuple[FaultRow, ...]
    gaps: tuple[GapRow, ...]
    stop_reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def _phase(checks: list[dict]) -> tuple[PhaseCheck, ...]:
    return tuple(PhaseCheck(c["check"], c["value_text"], c["verdict"], c["explanation"])
                 for c in checks)


def soak_report_section(decision: Decision) -> SoakReportSection | None:
    """The soak section of ``decision``'s report, or None when its gate run is not a soak.
    Texts are in the active language: build it under ``translation.override`` for a zh
    report (criterion descriptions are data and stay as recorded)."""
    soak = Soak.objects.filter(gate_run_id=decision.gate_run_id).select_related(
        "gate_run__gate__engagement").first()
    if soak is None:
        return None
    simulated = presentation.is_simulated(soak)
    progress = queries.soak_progress(soak)
    charts = []
    for chart in presentation.soak_charts(soak, simulated=simulated,
                                          width=REPORT_CHART_WIDTH):
        charts.append(ReportChart(chart["metric"], chart["title"], chart["unit"], chart["svg"],
                                  chart["points"], tuple(x["node"] for x in chart["legend"])))
    faults = []
    for row in presentation.fault_table(soak):
        heal = "—"
        if row["heal_armed_at"]:
            heal = _("armed %(at)s UTC on %(node)s (%(method)s)") % {
                "at": f"{row['heal_armed_at']:%H:%M:%S}", "node": row["node"],
                "method": row["heal_method"]}
            if row["heal_how"]:
                heal += "; " + _("healed by %(how)s") % {"how": row["heal_how"]}
        faults.append(FaultRow(
            name=row["name"], kind=row["kind"], node=row["node"], target=row["target_text"],
            injected_at=presentation.when_text(row["injected_at"]),
            healed_at=presentation.when_text(row["healed_at"]), length_s=row["length_s"],
            heal=heal, before=_phase(row["checks"]["before"]),
            during=_phase(row["checks"]["during"]), after=_phase(row["checks"]["after"]),
            verdict=row["verdict"], matrix=tuple(row["matrix"])))
    gaps = tuple(GapRow(g["node"] or _("every node"), presentation.when_text(g["started_at"]),
                        presentation.when_text(g["ended_at"]), g["seconds"], g["reason"])
                 for g in queries.soak_gaps(soak))
    checks = tuple(CheckRow(c.key, c.description, c.requirement, c.verdict, c.measured_text)
                   for c in presentation.check_rows(soak))
    notes = []
    if soak.time_compression > 1:
        notes.append(_("Time compressed ×%(f)s: the plan's %(plan)s ran in %(real)s of real "
                       "time; chart axes show plan time.") % {
            "f": f"{soak.time_compression:g}",
            "plan": presentation.duration_text(progress["plan_duration_s"]),
            "real": presentation.duration_text(progress["duration_s"])})
    return SoakReportSection(
        engagement=soak.gate_run.gate.engagement.name, gate=soak.gate_run.gate.code,
        attempt=soak.gate_run.attempt, state=soak.state, simulated=simulated,
        plan_sha256=soak.plan_sha256,
        plan_summary=tuple(presentation.plan_summary(soak.plan)),
        held_text=presentation.duration_text(progress["plan_elapsed_s"]),
        planned_text=presentation.duration_text(progress["plan_duration_s"]),
        compression=soak.time_compression,
        started_at=presentation.when_text(soak.load_started_at or soak.started_at),
        finished_at=presentation.when_text(soak.finished_at),
        checks=checks, charts=tuple(charts), faults=tuple(faults), gaps=gaps,
        stop_reason=soak.stop_reason, notes=tuple(notes))
