"""Issuing the signed gate report of a decision.

``report_issue`` builds the report context from the decision and its evidence (queries and
arithmetic here, none in the template), renders it with WeasyPrint, signs it with pyHanko and
stores it under REPORTS_DIR, never overwriting an earlier file.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.utils import timezone

from gates.models import Decision
from reports.context import BomRow, CriterionRow, EvidenceRow, GateReportContext, NodeRow
from reports.models import Report
from reports.render import render_gate_report_pdf
from reports.signing import sign_pdf, verify_pdf
from runners.models import GateRun
from runners.probes import PROBES
from runners.templatetags.units import measurement_text


def _display_command(run) -> str:
    """The command as a person reads it (scripted probes summarised; the full command stays
    stored with the run and is covered by the machine-readable record)."""
    spec = PROBES.get(run.probe)
    return spec.display(run.parameters, run.command) if spec else run.command


def report_context(decision: Decision) -> GateReportContext:
    gate = decision.gate
    engagement = gate.engagement
    gate_run: GateRun = decision.gate_run
    criteria = [
        CriterionRow(
            metric=v.criterion_snapshot["metric"],
            description=v.criterion_snapshot["description"],
            operator_text=v.criterion_snapshot["requirement"],
            # measurement_text carries the unit in the form people read (GB/s, %, s).
            measured_text="—" if v.measured_value is None
            else measurement_text(v.measured_value, v.unit),
            unit="", reference_source=v.criterion_snapshot["source"], verdict=v.verdict,
            explanation=v.explanation,
        )
        for v in decision.verdicts.all()
    ]
    runs = [
        EvidenceRow(
            node=run.node.name if run.node else "service", probe=run.probe,
            command=_display_command(run),
            tool_version=run.tool_version, started_at=run.started_at,
            finished_at=run.finished_at, exit_code=run.exit_code, sha256=run.stdout_sha256,
            simulated=run.simulated, state=run.state,
        )
        for run in gate_run.probe_runs.select_related("node").order_by("started_at", "id")
    ]
    bom = [BomRow(f"{i.quantity} × {i.description}", i.ticked_by, i.ticked_at)
           for i in engagement.bom_items.all()]
    nodes = [NodeRow(n.name, f"{n.address}:{n.port}", n.get_role_display(),
                     n.host_key_fingerprint) for n in engagement.nodes.order_by("name")]
    return GateReportContext(
        engagement_name=engagement.name, customer=engagement.customer.name,
        gate_code=gate.code, gate_name=gate.name, due_date=gate.due_date,
        engagement_start=engagement.start_date, decision_outcome=decision.outcome,
        decision_sentence=decision.sentence, decided_at=decision.decided_at,
        decided_by=decision.decided_by, criteria=criteria, runs=runs, bom=bom, nodes=nodes,
        simulated=engagement.is_lab or any(r.simulated for r in runs),
        imported=gate_run.origin == GateRun.Origin.IMPORTED,
        language=engagement.report_language,
    )


def report_issue(*, decision: Decision) -> Report:
    """Render, sign and store the report of ``decision``; returns the Report row."""
    context = report_context(decision)
    signed = sign_pdf(render_gate_report_pdf(context),
                      reason=f"{context.gate_code} decision: {decision.outcome}")
    check = verify_pdf(signed)
    if not check.valid:
        raise RuntimeError(f"the freshly signed report does not verify: {check.summary}")
    gate_run = decision.gate_run
    directory = settings.REPORTS_DIR / context.engagement_name
    directory.mkdir(parents=True, exist_ok=True)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    name = f"{context.engagement_name}-{context.gate_code}-run{gate_run.attempt}-{stamp}.pdf"
    path = directory / name
    with open(path, "xb") as handle:  # never overwrite a signed report
        handle.write(signed)
    return Report.objects.create(
        decision=decision, path=str(path), sha256=hashlib.sha256(signed).hexdigest(),
        size_bytes=len(signed), signer=check.signer, signed_at=check.signed_at or timezone.now(),
        simulated=context.simulated,
    )
