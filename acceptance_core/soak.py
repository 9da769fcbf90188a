"""G4 again from the soak's raw outputs: the verifier's side of ``gates.soak_derivations``.

A soak report embeds, per node, the ``--golden`` correctness round (the known-good answers),
every collected range of ``windows.jsonl`` and ``probes.jsonl``; its ``summary.json`` carries
the plan's numbers and the fault windows (``runners.soak.report.soak_basis``). Here every range
is read again (``runners.parsers.soak_windows`` / ``soak_correctness``), mapped to the same
figures the soak stored (compared with the recorded ones, run by run), and the figures G4 is
decided on are derived again with the service's own function,
``gates.soak_derivations.decision_figures``, and compared with the recorded ones, each
difference naming the figure. Fault times are the service's record (no raw output has them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from acceptance_core.compare import CannotCheck, compare
from gates import evaluation
from gates.soak_derivations import (
    Fault,
    FaultOutcome,
    Row,
    answers_of,
    decision_figures,
    windows_of,
)
from runners.parsers import soak_correctness, soak_windows
from runners.parsers.base import MeasurementData, ParseError

GOLDEN_PROBE = "soak_golden"
_READERS = {soak_windows.TOOL: soak_windows, soak_correctness.TOOL: soak_correctness}


def stored_at(epoch: float) -> float:
    """A node time as the service stores it (``sampled_at``: microseconds)."""
    return datetime.fromtimestamp(epoch, tz=UTC).timestamp()


def _golden(gate: str, runs: list[dict[str, Any]], outputs: dict[str, bytes]
            ) -> dict[str, dict[str, str]]:
    """Each node's known-good answers, read from its embedded ``--golden`` round."""
    golden = {}
    for run in runs:
        if run["probe"] != GOLDEN_PROBE:
            continue
        raw = outputs.get(run["sha256"])
        if raw is None:
            raise CannotCheck(f"{gate}: the known-good answers of {run['node']} (sha256 "
                              f"{run['sha256'][:16]}…) are not embedded")
        try:
            rounds = soak_correctness.parse(raw)
        except ParseError as e:
            raise CannotCheck(f"{gate}: the known-good answers of {run['node']} do not "
                              f"parse: {e}") from e
        if len(rounds) != 1:
            raise CannotCheck(f"{gate}: the known-good answers of {run['node']} are "
                              f"{len(rounds)} rounds, not one")
        golden[run["node"]] = soak_correctness.golden_answers(rounds[0])
    return golden


def _figures_of(run: dict[str, Any], raw: bytes, planned: float,
                golden: dict[str, dict[str, str]]) -> list[tuple[float, MeasurementData]]:
    """(stored time, figure) of every record of one collected range, as the soak stored them
    (``runners.soak.collection``). Raises ParseError."""
    if run["parser"] == soak_windows.TOOL:
        return [(stored_at(record.ended), m) for record in soak_windows.parse(raw)
                for m in soak_windows.measurements(record, planned)]
    known = golden.get(run["node"], {})
    return [(stored_at(round_.at), m) for round_ in soak_correctness.parse(raw)
            for m in soak_correctness.mismatches(round_, known)]


def _rows(gate: str, runs: list[dict[str, Any]], outputs: dict[str, bytes], planned: float,
          notes: list[str], differences: list[str]) -> list[Row]:
    golden = _golden(gate, runs, outputs)
    rows: list[Row] = []
    for number, run in enumerate(runs, start=1):
        reader = _READERS.get(run["parser"])
        if run["probe"] == GOLDEN_PROBE:
            continue
        what = f"{gate} run {number} ({run['probe']} on {run['node'] or 'service'})"
        if reader is None:
            raise CannotCheck(f"{what}: parser {run['parser']!r} is not a soak reader")
        recorded = run.get("measurements") or []
        raw = outputs.get(run["sha256"])
        if raw is None:
            if recorded:
                raise CannotCheck(f"{what}: its raw output (sha256 {run['sha256'][:16]}…) is "
                                  f"not embedded")
            continue
        if reader.PARSER_VERSION != run["parser_version"]:
            notes.append(f"{what}: the report's parser {run['parser']} "
                         f"{run['parser_version']}, the installed one is "
                         f"{reader.PARSER_VERSION}: its results are shown against the "
                         f"recorded ones")
        try:
            figures = _figures_of(run, raw, planned, golden)
        except ParseError as e:
            if recorded:
                differences.append(f"{what}: the raw output no longer parses: {e}")
            continue
        differences.extend(compare(what, recorded, [
            (m.metric, run["node"], m.labels, m.value, m.unit) for _, m in figures]))
        rows += [Row(len(rows) + i, run["node"], m.metric, m.value, m.labels, at)
                 for i, (at, m) in enumerate(figures, start=1)]
    return rows


def soak_samples(gate: str, basis: dict[str, Any], outputs: dict[str, bytes],
                 notes: list[str], differences: list[str]) -> list[evaluation.Sample]:
    """G4's figures derived again from the soak's raw outputs (see the module docstring),
    compared with the recorded ones (differences named in ``differences``), as the samples
    the criteria are evaluated on. Raises CannotCheck."""
    soak = basis.get("soak")
    if not isinstance(soak, dict):
        raise CannotCheck(f"{gate}: the report records the soak's figures but not the plan "
                          f"numbers and fault windows they were derived with (issued before "
                          f"reports carried them); it cannot be re-decided")
    rows = _rows(gate, basis["runs"], outputs, float(soak["planned_requests"]), notes,
                 differences)
    faults = [Fault(str(f["name"]), float(f["injected_at"]),
                    None if f["healed_at"] is None else float(f["healed_at"]))
              for f in soak["faults"] if f["injected_at"] is not None]
    outcomes = [FaultOutcome(str(f["name"]), str(f["node"]), str(f["state"]),
                             str(f.get("error") or "")) for f in soak["faults"]]
    figures = decision_figures(
        windows_of(rows), answers_of(rows), faults, outcomes,
        baseline_windows=int(soak["baseline_windows"]), before_s=float(soak["before_s"]),
        after_s=float(soak["after_s"]), time_compression=float(soak["time_compression"]))
    differences.extend(compare(f"{gate} derived", basis.get("derived") or [], [
        (f.metric, f.node, f.labels, f.value, f.unit) for f in figures]))
    notes.append(f"{gate}: {len(figures)} soak figures derived again from "
                 f"{sum(1 for r in basis['runs'] if r['probe'] != GOLDEN_PROBE)} collected "
                 f"raw output(s); fault injection and heal times are as the service recorded "
                 f"them")
    return [evaluation.Sample(i, f.metric, f.value, f.unit, f.labels, f.node)
            for i, f in enumerate(figures, start=1)]
