"""The G4 report's soak section: the charts, the per-fault table and the gaps of the soak a
decision was made on, as plain data for ``templates/reports/_soak_section.html`` (WeasyPrint).

:func:`soak_report_section` returns a :class:`SoakReportSection` for a decision whose gate run
is a soak, else None (so the report template shows the section only for G4). Charts are
self-contained SVG strings (``runners.soak.charts``): no stylesheet, no URL, nothing fetched.
:func:`soak_basis` is what the report's ``summary.json`` carries so that the G4 figures can be
derived again from the embedded raw outputs (``acceptance_core.soak``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from gates.models import Decision
from runners.parsers.soak_windows import planned_requests
from runners.soak import presentation, queries
from runners.soak.evaluation import soak_spans
from runners.soak.models import Soak
from runners.soak.plan import real_s

REPORT_CHART_WIDTH = 720  # viewBox width: printed across the A4 text width
#: Points a chart of the report draws at most, all nodes together (each a bucket's worst
#: window): about one per unit of the printed width; WeasyPrint draws every SVG element, and
#: 2400 points took 9 s of a site-scale report.
REPORT_CHART_POINTS = 720
CHART_NODES_NAMED = 8


@dataclass(frozen=True)
class ReportChart:
    """One time series: ``svg`` is a complete ``<svg>`` element."""

    metric: str
    title: str
    unit: str
    svg: str
    points: int
    nodes: tuple[str, ...] = ()

    @property
    def nodes_text(self) -> str:
        """The nodes drawn, by name up to :data:`CHART_NODES_NAMED`, else counted (a title
        line that grew with the nodes would add a line per few nodes to every chart)."""
        if len(self.nodes) > CHART_NODES_NAMED:
            return _("all %(n)s nodes") % {"n": len(self.nodes)}
        return ", ".join(self.nodes)


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
    for chart in presentation.soak_charts(soak, simulated=simulated, width=REPORT_CHART_WIDTH,
                                          max_points=REPORT_CHART_POINTS):
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


def _epoch(at) -> float | None:
    return at.timestamp() if at is not None else None


def soak_basis(gate_run_id: int) -> dict | None:
    """The inputs of G4's figures besides the raw outputs (``gates.soak_derivations``), as plain
    JSON data; None when the gate run is not a soak: the plan's steady-state numbers (real
    seconds), its time compression, the requests a window the client failed counts as failed,
    and every fault window of the plan with its node, state, reason and injection / heal times
    (epoch seconds, as the service recorded them; null when it did not happen)."""
    soak = Soak.objects.filter(gate_run_id=gate_run_id).first()
    if soak is None:
        return None
    plan = soak.plan
    return {
        **soak_spans(soak), "time_compression": soak.time_compression,
        "planned_requests": planned_requests(float(plan["load"]["request_rate"]),
                                             real_s(plan, plan["load"]["window_s"])),
        "faults": [{"name": f.name, "node": f.node.name, "kind": f.kind, "state": f.state,
                    "error": f.error, "injected_at": _epoch(f.injected_at),
                    "healed_at": _epoch(f.healed_at)}
                   for f in soak.faults.select_related("node")],
    }
