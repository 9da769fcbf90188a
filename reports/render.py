"""Turn a GateReportContext into the report's HTML and its PDF (WeasyPrint).

The template only loops and branches on booleans: every word, date and count it shows is
prepared here, from the frozen context alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.template.loader import render_to_string

from reports.context import CriterionRow, EvidenceRow, GateReportContext

TEMPLATE = "reports/gate_report.html"

SIMULATED_MARK = "SIMULATED EVIDENCE — lab stand-in tools, not customer hardware"
IMPORTED_MARK = "IMPORTED EVIDENCE — collected by the customer's script, not by the service"

OUTCOME_WORDS = {"passed": "PASSED", "stopped": "STOPPED", "error": "ERROR", "review": "REVIEW"}
VERDICT_WORDS = {
    "pass": "PASS",
    "fail": "FAIL",
    "insufficient": "INSUFFICIENT DATA",
    "review": "REVIEW",
}


@dataclass(frozen=True)
class _CriterionView:
    metric: str
    description: str
    operator_text: str
    measured_text: str
    unit: str
    reference_source: str
    verdict: str
    verdict_word: str
    explanation: str


@dataclass(frozen=True)
class _RunView:
    number: int
    node: str
    probe: str
    command: str
    tool_version: str
    started: str
    finished: str
    exit_code: str
    exit_ok: bool
    sha256: str
    simulated: bool
    state: str


def _day(value: date | None) -> str:
    return value.isoformat() if value else "—"


def _minute(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _table_minute(value: datetime | None) -> str:
    # table cells name UTC once, in the column header
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _second(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _finish(started: datetime | None, finished: datetime | None) -> str:
    """The finish time, without the date when the run ended on the day it started."""
    if finished is None:
        return "—"
    if started is None:
        return _second(finished)
    a, b = started.astimezone(UTC), finished.astimezone(UTC)
    text = b.strftime("%H:%M:%S") if a.date() == b.date() else _second(b)
    return f"{text} ({round((b - a).total_seconds())} s)"


def _criterion(row: CriterionRow) -> _CriterionView:
    return _CriterionView(
        metric=row.metric,
        description=row.description,
        operator_text=row.operator_text,
        measured_text=row.measured_text,
        unit=row.unit,
        reference_source=row.reference_source,
        verdict=row.verdict,
        verdict_word=VERDICT_WORDS[row.verdict],
        explanation=row.explanation,
    )


def _run(number: int, row: EvidenceRow) -> _RunView:
    return _RunView(
        number=number,
        node=row.node,
        probe=row.probe,
        command=row.command,
        tool_version=row.tool_version or "—",
        started=_second(row.started_at),
        finished=_finish(row.started_at, row.finished_at),
        exit_code="—" if row.exit_code is None else str(row.exit_code),
        exit_ok=row.exit_code == 0,
        sha256=row.sha256 or "—",
        simulated=row.simulated,
        state=row.state,
    )


def _verdict_summary(criteria: list[CriterionRow]) -> str:
    """ "5 criteria: 4 pass, 1 fail" in the fixed verdict order, zero counts left out."""
    counts = {verdict: 0 for verdict in VERDICT_WORDS}
    for row in criteria:
        counts[row.verdict] += 1
    parts = [f"{n} {VERDICT_WORDS[v].lower()}" for v, n in counts.items() if n]
    noun = "criterion" if len(criteria) == 1 else "criteria"
    return f"{len(criteria)} {noun}: " + ", ".join(parts) if parts else "No criteria recorded."


def report_template_context(ctx: GateReportContext) -> dict[str, object]:
    """The plain values the template shows; public so views can render the same page."""
    gate_title = f"{ctx.gate_code} {ctx.gate_name}".strip()
    return {
        "r": ctx,
        "lang": ctx.html_lang,
        "gate_title": gate_title,
        "document_title": f"{ctx.engagement_name} — {gate_title} gate report",
        "outcome": ctx.decision_outcome,
        "outcome_word": OUTCOME_WORDS[ctx.decision_outcome],
        "due_date": _day(ctx.due_date),
        "engagement_start": _day(ctx.engagement_start),
        "decided_at": _minute(ctx.decided_at),
        "decided_at_iso": ctx.decided_at.astimezone(UTC).isoformat(timespec="seconds"),
        "criteria": [_criterion(row) for row in ctx.criteria],
        "verdict_summary": _verdict_summary(ctx.criteria),
        "bom": [
            {
                "item": b.item,
                "ticked_by": b.ticked_by or "—",
                "ticked_at": _table_minute(b.ticked_at),
            }
            for b in ctx.bom
        ],
        "nodes": ctx.nodes,
        "runs": [_run(i, row) for i, row in enumerate(ctx.runs, start=1)],
        "simulated_runs": sum(1 for row in ctx.runs if row.simulated),
        "simulated_mark": SIMULATED_MARK,
        "page_mark": " · ".join(
            mark for mark, present in ((SIMULATED_MARK, ctx.simulated),
                                       (IMPORTED_MARK, ctx.imported)) if present
        ),
    }


def render_gate_report_html(ctx: GateReportContext) -> str:
    """The gate report as one self-contained HTML document (print CSS inline, no URLs)."""
    return render_to_string(TEMPLATE, report_template_context(ctx))


def render_gate_report_pdf(ctx: GateReportContext) -> bytes:
    """The gate report as an A4 PDF, unsigned."""
    # Imported here: WeasyPrint loads Pango and fontconfig, which web requests never need.
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    # The report must never reach the network: only inline data: URIs may be fetched.
    fetcher = URLFetcher(allowed_protocols={"data"})
    return HTML(string=render_gate_report_html(ctx), url_fetcher=fetcher).write_pdf()
