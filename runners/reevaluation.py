"""Re-evaluating a recorded gate run with the current parsers, without touching the record.

``gate_run_reevaluate`` re-parses every stored raw output, compares the measurements with the
ones recorded, judges the criteria *as they were when the decision was taken* (the snapshots in
the decision) on the new figures and reports every difference. Nothing is written: the signed
report and its decision stay as they are.

Each stored run names the ``parser_version`` that read it; where today's ``PARSER_VERSION``
differs, ``parser_changes`` says so (``fio 1 → 2``), so a changed figure can be traced to the
parser change that made it (a run an older parser refused and the new one reads shows as
"new …" measurements, one the new parser refuses as "now unparseable").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gates import derivations, evaluation
from gates.services import array_drive_plans, node_array_line_rates
from runners.models import GateRun
from runners.outputs import output_bytes
from runners.parsers import PARSERS, parse_output
from runners.parsers.base import ParseError


@dataclass
class Reevaluation:
    gate_run: GateRun
    measurement_changes: list[str] = field(default_factory=list)
    parser_changes: list[str] = field(default_factory=list)
    verdict_changes: list[str] = field(default_factory=list)
    recorded_outcome: str = ""
    outcome: str = ""

    @property
    def differs(self) -> bool:
        return bool(self.measurement_changes or self.verdict_changes
                     or self.recorded_outcome != self.outcome)


def _key(metric: str, labels: dict, unit: str) -> tuple:
    return metric, json.dumps(labels, sort_keys=True), unit


def _spec(snapshot: dict) -> evaluation.CriterionSpec:
    fields = {f for f in evaluation.CriterionSpec.__dataclass_fields__}
    return evaluation.CriterionSpec(**{k: v for k, v in snapshot.items() if k in fields})


def gate_run_reevaluate(*, gate_run: GateRun) -> Reevaluation:
    """Compare the recorded measurements and decision of ``gate_run`` with a fresh parse."""
    result = Reevaluation(gate_run)
    samples: list[evaluation.Sample] = []
    next_id = -1
    for run in gate_run.probe_runs.select_related("node").order_by("started_at", "id"):
        where = f"{run.node.name if run.node else 'service'} {run.probe} (run {run.id})"
        recorded = {
            _key(m.metric, m.labels, m.unit): m.value
            for m in run.measurements.filter(derived=False)
        }
        if run.exit_code not in (0, None) and not recorded:
            continue  # never parsed: the command itself failed
        parser = PARSERS.get(run.parser)
        if parser is not None and run.parser_version and \
                run.parser_version != parser.PARSER_VERSION:
            result.parser_changes.append(f"{where}: parser {run.parser} "
                                         f"{run.parser_version} → {parser.PARSER_VERSION}")
        try:
            fresh_list = parse_output(run.parser, output_bytes(run, "stdout"))
        except ParseError as error:
            if recorded:
                result.measurement_changes.append(f"{where}: now unparseable: {error}")
            continue
        fresh_list = [type(m)(m.metric, m.value, m.unit, {**m.labels, **run.labels})
                      for m in fresh_list]
        fresh = {_key(m.metric, m.labels, m.unit): m.value for m in fresh_list}
        for key in sorted(set(recorded) | set(fresh)):
            metric, labels, unit = key
            before, after = recorded.get(key), fresh.get(key)
            if before is None:
                result.measurement_changes.append(
                    f"{where}: new {metric} {labels} = {after:g} {unit}"
                )
            elif after is None:
                result.measurement_changes.append(f"{where}: {metric} {labels} no longer read "
                                                  f"(was {before:g} {unit})")
            elif before != after:
                result.measurement_changes.append(f"{where}: {metric} {labels} {before:g} → "
                                                  f"{after:g} {unit}")
        for m in fresh_list:
            samples.append(evaluation.Sample(next_id, m.metric, m.value, m.unit, m.labels,
                                             run.node.name if run.node else ""))
            next_id -= 1
    arrays = node_array_line_rates(engagement=gate_run.gate.engagement)
    drives = array_drive_plans(engagement=gate_run.gate.engagement)
    for d in derivations.derive_all(samples, arrays, drives):
        samples.append(evaluation.Sample(next_id, d.metric, d.value, d.unit, d.labels, d.node))
        next_id -= 1
    decision = getattr(gate_run, "decision", None)
    if decision is None:
        result.recorded_outcome = f"no decision ({gate_run.state})"
        result.outcome = "not judged (the run has no recorded decision to compare)"
        return result
    result.recorded_outcome = decision.outcome
    verdicts, blocking = [], {}
    for row in decision.verdicts.all():
        spec = _spec({**row.criterion_snapshot, "key": row.criterion_snapshot["key"]})
        verdict = evaluation.evaluate_criterion(spec, samples)
        verdicts.append(verdict)
        blocking[spec.key] = spec.blocking
        if verdict.verdict != row.verdict or verdict.measured != row.measured_value:
            before = "—" if row.measured_value is None else f"{row.measured_value:g}"
            after = "—" if verdict.measured is None else f"{verdict.measured:g}"
            result.verdict_changes.append(
                f"{spec.metric}: {row.verdict} ({before}) → {verdict.verdict} ({after})"
            )
    result.outcome = evaluation.gate_outcome(verdicts, blocking)
    return result
