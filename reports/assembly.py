"""The context of a report: what a gate report or the final acceptance report says, built from
the decision(s), their evidence and the engagement (queries and arithmetic here, none in the
template). ``reports.services`` renders, signs and stores it.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import PurePosixPath

from django.db.models import Prefetch
from django.utils import translation
from django.utils.translation import gettext as _

from acceptance.models import Engagement
from business.presentation import business_page
from gates.models import Decision, Gate
from gates.presentation import verdict_row
from reports.basis import decision_basis
from reports.context import (
    AuditRow,
    BomRow,
    EvidenceRow,
    GateReportContext,
    GateSection,
    NodeRow,
    ScheduleRow,
    SignOffRow,
)
from reports.evidence import embedded_output
from reports.models import Report
from reports.render import django_language
from runners.charts import gate_run_chart_parts
from runners.models import GateRun, Measurement
from runners.outputs import output_bytes
from runners.probes import PROBES
from runners.soak.report import soak_report_section

logger = logging.getLogger(__name__)


class ReportRefused(Exception):
    """The request cannot be honoured; the message says why. Nothing was stored."""


def _display_command(run) -> str:
    """The command as a person reads it (scripted probes summarised; the full command stays
    stored with the run and is covered by the machine-readable record)."""
    spec = PROBES.get(run.probe)
    return spec.display(run.parameters, run.command) if spec else run.command


#: A chart of more nodes than this draws each series' lowest, median and highest node (its
#: height stays put); every node's figures are one row of the appendix's node table.
CHART_NODE_LIMIT = 16


def _charts(gate_run: GateRun) -> tuple[list, dict[str, str]]:
    """The section's charts and each node's figures in one line."""
    if hasattr(gate_run, "soak"):
        return [], {}  # a soak's time series are drawn by its own section (soak_section)

    try:
        return gate_run_chart_parts(gate_run, node_limit=CHART_NODE_LIMIT)
    except Exception:  # a chart is an illustration: its absence never blocks a report
        logger.exception("charts of gate run %s could not be drawn", gate_run.pk)
        return [], {}


def _bundle(run, soak: bool) -> str:
    """The attachment a soak's collected range of one node's file (``windows.jsonl``,
    ``probes.jsonl``) is embedded in: that node's ranges of that file, one after another, each
    still hashed and listed alone in ``summary.json`` (one attachment per record would be 74 k
    at 128 nodes × 72 h, each costing the PDF writer, the signer and the verifier); "" for a
    run embedded as its own file."""
    file = (run.parameters or {}).get("file") if soak else None
    if not isinstance(file, str) or run.node is None:
        return ""
    return f"soak-{run.node.name}-{PurePosixPath(file).name}"


def _section(decision: Decision) -> GateSection:
    gate = decision.gate
    gate_run: GateRun = decision.gate_run
    # Descriptions and sources of the default criteria in the report's language, edited ones
    # as written; the explanation is quoted as the evaluation recorded it.
    # plain=True: page 1 says what was measured against what (gates.plain)
    soak = hasattr(gate_run, "soak")
    # A soak's figures are derived from every window they span (1.77 M input links at 128
    # nodes × 72 h); its plain sentences never read them (gates.plain: only G2/G3's
    # comparisons and line efficiencies do), so they are not loaded for it.
    inputs = (Prefetch("measurements__inputs", queryset=Measurement.objects.none()) if soak
              else "measurements__inputs__node")
    verdicts = decision.verdicts.prefetch_related("measurements__node", inputs)
    criteria = [verdict_row(v, stored_explanation=True, plain=True) for v in verdicts]
    runs = []
    # A per-node re-run is decided over its own runs plus the other nodes' carried runs.
    for run in (gate_run.evidence_probe_runs().select_related("node")
                .order_by("started_at", "id").iterator(chunk_size=5000)):
        raw: bytes | None = output_bytes(run, "stdout")
        if run.stdout_pruned_at is not None:  # retention: read back from a signed report
            raw = embedded_output(Report.objects.filter(engagement_id=gate.engagement_id)
                                  .order_by("-id").values_list("path", flat=True),
                                  run.stdout_sha256)
        runs.append(EvidenceRow(
            node=run.node.name if run.node else "service", probe=run.probe,
            command=_display_command(run), tool_version=run.tool_version,
            started_at=run.started_at, finished_at=run.finished_at, exit_code=run.exit_code,
            sha256=run.stdout_sha256 or hashlib.sha256(raw or b"").hexdigest(),
            simulated=run.simulated, state=run.state, raw_output=raw,
            bundle=_bundle(run, soak),
        ))
    charts, node_figures = _charts(gate_run)
    return GateSection(
        gate_code=gate.code, gate_name=gate.name, decision_outcome=decision.outcome,
        decision_sentence=decision.sentence, decided_at=decision.decided_at,
        decided_by=decision.decided_by, criteria=criteria, charts=charts, runs=runs,
        basis=decision_basis(decision), node_figures=node_figures)


def _soak_section(decisions: list[Decision]):
    """The G4 soak section (charts, per-fault table, gaps) of the first of ``decisions`` made
    on a soak, in the active language; None when none was. Raises what the soak queries raise:
    a G4 report without its fault table would be misleading, so it is not issued then."""
    for decision in decisions:
        section = soak_report_section(decision)
        if section is not None:
            return section
    return None


def _latest_decision(gate: Gate) -> Decision | None:
    return gate.decisions.reported().order_by("-decided_at", "-id").first()


def _engagement_parts(engagement: Engagement) -> dict:
    schedule = []
    for gate in engagement.gates.order_by("order"):
        latest = _latest_decision(gate)
        schedule.append(ScheduleRow(
            gate_title=f"{gate.code} {_(gate.name)}", due_date=gate.due_date, state=gate.state,
            decided_at=latest.decided_at if latest else None,
            outcome=latest.outcome if latest else ""))
    return {
        "engagement_name": engagement.name, "customer": engagement.customer.name,
        "engagement_start": engagement.start_date,
        "bom": [BomRow(f"{i.quantity} × {i.description}", i.ticked_by, i.ticked_at)
                for i in engagement.bom_items.all()],
        "nodes": [NodeRow(n.name, f"{n.address}:{n.port}", n.get_role_display(),
                          n.host_key_fingerprint) for n in engagement.nodes.order_by("name")],
        "schedule": schedule,
        "audit": [AuditRow(a.at, a.actor, a.action, a.reason) for a in engagement.audit.all()],
        "language": engagement.report_language,
    }


def _signoff_rows(signoffs) -> list[SignOffRow]:
    return [SignOffRow(s.party, s.name, s.role, s.at, s.comment) for s in signoffs]


def report_context(decision: Decision, *, signoffs=(), version: int = 1, replaces: str = "",
                   reason: str = "") -> GateReportContext:
    """The gate report of ``decision`` in the engagement's language."""
    engagement = decision.gate.engagement
    with translation.override(django_language(engagement.report_language)):
        section = _section(decision)
        return GateReportContext(
            **_engagement_parts(engagement),
            gate_code=section.gate_code, gate_name=section.gate_name,
            due_date=decision.gate.due_date, decision_outcome=section.decision_outcome,
            decision_sentence=section.decision_sentence, decided_at=section.decided_at,
            decided_by=section.decided_by, criteria=section.criteria, runs=section.runs,
            charts=section.charts, basis=section.basis, node_figures=section.node_figures,
            simulated=engagement.is_lab or any(r.simulated for r in section.runs),
            imported=decision.gate_run.origin == GateRun.Origin.IMPORTED,
            signoffs=_signoff_rows(signoffs), version=version, replaces=replaces, reason=reason,
            soak_section=_soak_section([decision]),
        )


def final_report_decisions(engagement: Engagement) -> list[Decision]:
    """The latest decision of every decided gate, in gate order, when the engagement may have
    its final report: every gate decided, or the engagement stopped at a gate. A gate re-opened
    after its stop (``engagement_reopen``: the gate back to pending) has no decision until it
    is decided again. Raises ReportRefused naming the undecided gates otherwise."""
    decisions, undecided, reopened = [], [], []
    for gate in engagement.gates.order_by("order"):
        latest = _latest_decision(gate)
        if latest is None:
            undecided.append(gate.code)
        elif latest.outcome == Decision.Outcome.STOPPED and gate.state != Gate.State.STOPPED:
            reopened.append(gate.code)
        else:
            decisions.append(latest)
    stopped = any(d.outcome == Decision.Outcome.STOPPED for d in decisions)
    if reopened and not stopped:
        raise ReportRefused(
            f"the final report needs a decision on every gate (or a stopped gate); "
            f"{', '.join(reopened)} {'was' if len(reopened) == 1 else 'were'} re-opened after "
            f"{'its' if len(reopened) == 1 else 'their'} stop and "
            f"{'has' if len(reopened) == 1 else 'have'} no decision since")
    if undecided and not stopped:
        raise ReportRefused(
            f"the final report needs a decision on every gate (or a stopped gate); "
            f"{', '.join(undecided)} {'has' if len(undecided) == 1 else 'have'} none yet")
    return decisions


def final_report_context(engagement: Engagement, *, signoffs=(), version: int = 1,
                         replaces: str = "", reason: str = "") -> GateReportContext:
    """The final acceptance report: every decided gate's section. Raises ReportRefused."""
    decisions = final_report_decisions(engagement)
    with translation.override(django_language(engagement.report_language)):
        sections = [_section(d) for d in decisions]
        stopped = [s for s in sections if s.decision_outcome == "stopped"]
        review = [s for s in sections if s.decision_outcome == "review"]
        if stopped:
            outcome = "stopped"
            gate = f"{stopped[0].gate_code} {_(stopped[0].gate_name)}"
            sentence = _("Not accepted: the engagement stopped at %(gate)s; the array is not "
                         "accepted.") % {"gate": gate}
        elif review:
            outcome = "review"
            sentence = _("Not yet accepted: %(gates)s await review.") % {
                "gates": ", ".join(s.gate_code for s in review)}
        else:
            outcome = "passed"
            sentence = _("Accepted: all %(n)d gates passed; the array is accepted as the KV-cache "
                         "tier.") % {"n": len(sections)}
        last = max(decisions, key=lambda d: d.decided_at)
        runs = [r for s in sections for r in s.runs]
        return GateReportContext(
            **_engagement_parts(engagement), kind="final", sections=sections,
            gate_code="", gate_name="", due_date=engagement.end_date, decision_outcome=outcome,
            decision_sentence=sentence, decided_at=last.decided_at, decided_by=last.decided_by,
            simulated=engagement.is_lab or any(r.simulated for r in runs),
            imported=any(d.gate_run.origin == GateRun.Origin.IMPORTED for d in decisions),
            signoffs=_signoff_rows(signoffs), version=version, replaces=replaces, reason=reason,
            soak_section=_soak_section(decisions),
            business_section=business_page(engagement),
        )
