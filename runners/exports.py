"""CSV exports of the ledger: measurements, decisions with every criterion's verdict, and the
audit trail — of one engagement or one gate run — for the download buttons of the engagement
and run pages and ``?format=csv`` on the API lists.

Numbers are written as Python writes a float (``repr``: it reads back to the stored value
exactly) next to their canonical unit and the text people read ("12.50 GB/s"). Text cells that
a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return) get a leading ``'`` (OWASP's CSV-injection advice); numbers are ours and
never are formulas, so a negative value stays a number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from acceptance.models import AuditEntry, Engagement
from acceptance.units import measured_text
from gates.models import CriterionVerdict
from runners.models import GateRun, Measurement, ProbeRun

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
KINDS = ("measurements", "decisions", "audit")


def csv_cell(value: Any) -> str:
    """One cell: numbers as ``repr``, booleans as true/false, datetimes ISO 8601, dicts as
    sorted JSON, None empty; text starting like a formula gets a leading ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    text = json.dumps(value, sort_keys=True, ensure_ascii=False) if isinstance(
        value, dict | list) else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return out.getvalue()


# --- measurements ------------------------------------------------------------------------------

MEASUREMENT_HEADER = ("id", "engagement", "gate", "attempt", "gate_run", "node", "probe",
                      "metric", "value", "unit", "value_text", "labels", "arm", "derived",
                      "simulated", "probe_run", "sampled_at")


def measurement_rows(measurements: QuerySet[Measurement]) -> Iterable[tuple]:
    for m in measurements.select_related("gate_run__gate__engagement", "node",
                                         "probe_run").order_by("gate_run_id", "id"):
        run: ProbeRun | None = m.probe_run
        yield (m.id, m.gate_run.gate.engagement.name, m.gate_run.gate.code, m.gate_run.attempt,
               m.gate_run_id, m.node.name if m.node else "", run.probe if run else "",
               m.metric, m.value, m.unit, measured_text(m.value, m.unit), m.labels, m.arm,
               m.derived, bool(run and run.simulated), m.probe_run_id, m.sampled_at)


# --- decisions and their verdicts ---------------------------------------------------------------

DECISION_HEADER = ("decision", "engagement", "gate", "attempt", "gate_run", "outcome",
                   "decided_at", "decided_by", "position", "criterion", "metric", "requirement",
                   "measured_value", "unit", "measured_text", "verdict", "explanation",
                   "blocking", "sentence")


def decision_rows(verdicts: QuerySet[CriterionVerdict]) -> Iterable[tuple]:
    for v in verdicts.select_related("decision__gate__engagement", "decision__gate_run").order_by(
            "decision__decided_at", "decision_id", "position"):
        d, snap = v.decision, v.criterion_snapshot
        yield (d.id, d.gate.engagement.name, d.gate.code, d.gate_run.attempt, d.gate_run_id,
               d.outcome, d.decided_at, d.decided_by, v.position, snap.get("key", ""),
               snap.get("metric", ""), snap.get("requirement", ""), v.measured_value, v.unit,
               measured_text(v.measured_value, v.unit), v.verdict, v.explanation,
               snap.get("blocking", True), d.sentence)


# --- the audit trail ------------------------------------------------------------------------

AUDIT_HEADER = ("id", "engagement", "at", "actor", "action", "reason", "details")


def audit_rows(entries: QuerySet[AuditEntry]) -> Iterable[tuple]:
    for a in entries.select_related("engagement").order_by("at", "id"):
        yield a.id, a.engagement.name, a.at, a.actor, a.action, a.reason, a.details


# --- what one engagement or one run holds ------------------------------------------------------


def engagement_export(engagement: Engagement, kind: str) -> str:
    """The CSV of ``kind`` (one of :data:`KINDS`) of every run of ``engagement``."""
    if kind == "measurements":
        return csv_text(MEASUREMENT_HEADER, measurement_rows(
            Measurement.objects.filter(gate_run__gate__engagement=engagement)))
    if kind == "decisions":
        return csv_text(DECISION_HEADER, decision_rows(
            CriterionVerdict.objects.filter(decision__gate__engagement=engagement)))
    if kind == "audit":
        return csv_text(AUDIT_HEADER, audit_rows(engagement.audit.all()))
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")


def run_audit(gate_run: GateRun) -> QuerySet[AuditEntry]:
    """The audit entries about ``gate_run``: those whose details name it."""
    return AuditEntry.objects.filter(details__gate_run=gate_run.id,
                                     engagement_id=gate_run.gate.engagement_id)


def run_export(gate_run: GateRun, kind: str) -> str:
    """The CSV of ``kind`` of one gate run: the measurements it is judged on (carried ones of
    a per-node re-run included), its decision's verdicts, the audit entries naming it."""
    if kind == "measurements":
        return csv_text(MEASUREMENT_HEADER, measurement_rows(gate_run.evidence_measurements()))
    if kind == "decisions":
        return csv_text(DECISION_HEADER, decision_rows(
            CriterionVerdict.objects.filter(decision__gate_run=gate_run)))
    if kind == "audit":
        return csv_text(AUDIT_HEADER, audit_rows(run_audit(gate_run)))
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
