"""Deciding a gate again from what a signed report carries: pure, no PDF, no database.

``redecide(summary, files)`` takes the report's ``summary.json`` (parsed) and its embedded files
by name. It checks every run's attachment (or its ``range`` of one, [start, length] in bytes:
a soak's collected ranges of one node's file share one attachment) against its sha256,
re-parses every raw output with
the parser the report names (``runners.parsers``), re-derives the figures
(``gates.derivations``; G4's from the soak's raw outputs, ``acceptance_core.soak``),
re-evaluates every criterion with the thresholds the report recorded (``gates.evaluation``)
and compares each figure, verdict and gate outcome with the recorded one.
A report it cannot check raises :class:`CannotCheck` with the reason (exit status 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from acceptance_core.compare import CannotCheck as CannotCheck  # the refusal callers catch
from acceptance_core.compare import compare, same
from acceptance_core.soak import soak_samples
from gates import derivations, evaluation
from runners.parsers import PARSERS, ParseError, parse_output

#: summary.json's ``schema_version`` from which every gate carries its basis ("redecide").
SCHEMA_VERSION = 2
BASIS_SCHEMA = "acceptance-redecide/1"
_SPEC_FIELDS = ("key", "metric", "label_filter", "aggregation", "operator", "threshold",
                "threshold_high", "reference_value", "tolerance", "above_range_verdict", "unit",
                "min_samples", "blocking")
# What a summary.json of the wrong shape raises in the code that reads it (an object where a
# list is expected, a number where an object is): each is "summary.json is not well formed"
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError)
# Figures computed after the verdicts (baseline_deviation) are not re-derived (outside G4).
_AFTER_VERDICTS = frozenset({"baseline_deviation"})


@dataclass(frozen=True)
class CriterionRow:
    """One criterion: what the report recorded and what the evidence gives again."""

    gate: str
    key: str
    metric: str
    requirement: str
    recorded_value: float | None
    recorded_verdict: str
    value: float | None
    verdict: str

    @property
    def matches(self) -> bool:
        return self.verdict == self.recorded_verdict and same(self.value, self.recorded_value)


@dataclass
class Redecision:
    rows: list[CriterionRow] = field(default_factory=list)
    # (gate, recorded outcome, recomputed outcome)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.differences else 0


def verified_outputs(summary: dict[str, Any], files: dict[str, bytes],
                     result: Redecision) -> dict[str, bytes]:
    """The embedded raw outputs by sha256, each checked against the sha256 the summary gives."""
    outputs: dict[str, bytes] = {}
    for run in summary.get("runs") or []:
        name = run.get("attachment")
        if not name:
            continue
        content = files.get(name)
        if content is None:
            raise CannotCheck(f"run {run.get('number')}: its raw output {name} is not embedded")
        span = run.get("range")
        if span is not None:  # one range of a file several runs share (a soak's collection)
            if (not isinstance(span, list) or len(span) != 2
                    or not all(isinstance(x, int) and x >= 0 for x in span)
                    or span[0] + span[1] > len(content)):
                raise CannotCheck(f"run {run.get('number')}: range {span!r} is not [start, "
                                  f"length] inside {name} ({len(content)} bytes)")
            content = content[span[0]:span[0] + span[1]]
        digest = hashlib.sha256(content).hexdigest()
        if digest != run.get("sha256"):
            result.differences.append(
                f"run {run.get('number')}: {name} hashes to {digest[:16]}…, the report says "
                f"{str(run.get('sha256'))[:16]}…")
            continue
        outputs[digest] = content
    return outputs


def _samples(gate: str, basis: dict[str, Any], outputs: dict[str, bytes],
             result: Redecision) -> list[evaluation.Sample]:
    """The measured samples: every run's raw output parsed again (and compared with what the
    report recorded from it), plus the measurements that came from no run, as recorded."""
    samples: list[evaluation.Sample] = []
    for number, run in enumerate(basis["runs"], start=1):
        what = f"{gate} run {number} ({run['probe']} on {run['node'] or 'service'})"
        recorded = run.get("measurements") or []
        raw = outputs.get(run["sha256"])
        if raw is None:
            if recorded:
                raise CannotCheck(f"{what}: its raw output (sha256 {run['sha256'][:16]}…) is "
                                  f"not embedded")
            continue
        parser = PARSERS.get(run["parser"])
        if parser is None:
            raise CannotCheck(f"{what}: parser {run['parser']!r} is not installed")
        if parser.PARSER_VERSION != run["parser_version"]:
            result.notes.append(
                f"{what}: the report's parser {run['parser']} {run['parser_version']}, the "
                f"installed one is {parser.PARSER_VERSION}: its results are shown against the "
                f"recorded ones")
        try:
            parsed = parse_output(run["parser"], raw)
        except ParseError as e:
            if recorded:
                result.differences.append(f"{what}: the raw output no longer parses: {e}")
            continue
        mine = [(m.metric, run["node"], {**m.labels, **run.get("labels", {})}, m.value, m.unit)
                for m in parsed]
        result.differences.extend(compare(what, recorded, mine))
        for metric, node, labels, value, unit in mine:
            samples.append(evaluation.Sample(len(samples) + 1, metric, value, unit,
                                             {k: str(v) for k, v in labels.items()}, node))
    for m in basis.get("other_measurements") or []:
        samples.append(_recorded_sample(len(samples) + 1, m))
    return samples


def _recorded_sample(sample_id: int, m: dict[str, Any]) -> evaluation.Sample:
    return evaluation.Sample(sample_id, m["metric"], float(m["value"]), m["unit"],
                             {k: str(v) for k, v in m.get("labels", {}).items()},
                             m.get("node", ""))


def _spec(criterion: dict[str, Any]) -> evaluation.CriterionSpec:
    fields = {name: criterion[name] for name in _SPEC_FIELDS if criterion.get(name) is not None}
    try:
        return evaluation.CriterionSpec(**fields)
    except TypeError as e:
        raise CannotCheck(f"criterion {criterion.get('key')}: {e}") from e


# G1's per-array figures (gates.derivations.derive_array_drives) carry these labels.
_PER_ARRAY_G1 = frozenset({"drive_count", "self_test_failures"})


def _derivation_inputs(gate: str, basis: dict[str, Any]) -> tuple[
        dict[str, tuple[str, float]], dict[str, derivations.ArrayDrives]]:
    """What ``derive_all`` is given, as ``runners.decision`` gives it (``reports.basis``):
    node → (array, its port's line rate in B/s) and array controller node → the array's
    drives (array, drive model, expected count)."""
    arrays = {node: (str(pair[0]), float(pair[1]))
              for node, pair in (basis.get("arrays") or {}).items()}
    if "drives" not in basis and any(
            m["metric"] in _PER_ARRAY_G1 and m.get("labels", {}).get("scope") == "array"
            for m in basis.get("derived") or []):
        raise CannotCheck(f"{gate}: the report records per-array drive figures but not the "
                          f"arrays' drive model and expected drive count they were derived "
                          f"with (issued before reports carried them); it cannot be re-decided")
    drives = {node: derivations.ArrayDrives(str(plan["array"]), str(plan["drive_model"]),
                                            int(plan["expected"]))
              for node, plan in (basis.get("drives") or {}).items()}
    return arrays, drives


def _reference_profile(gate: str, basis: dict[str, Any], result: Redecision) -> None:
    """Name the reference profile the gate's figures were compared with; a criterion holding
    another profile's figure than the gate's is a difference (comparisons never mix
    profiles)."""
    profile = basis.get("reference_profile")
    if not profile:
        return
    result.notes.append(f"{gate}: reference profile {profile.get('key')} — "
                        f"{profile.get('title')}")
    for criterion in basis["criteria"]:
        held = criterion.get("reference_profile")
        if held and held != profile.get("key"):
            result.differences.append(f"{gate} {criterion.get('key')}: holds reference profile "
                                      f"{held}'s figure, the gate's is {profile.get('key')}")


def _gate(entry: dict[str, Any], outputs: dict[str, bytes], result: Redecision) -> None:
    gate, basis = str(entry.get("gate", "?")), entry.get("redecide")
    if not isinstance(basis, dict):
        raise CannotCheck(f"{gate}: the report carries no criteria snapshot or derivation "
                          f"inputs (issued before summary schema {SCHEMA_VERSION})")
    if basis.get("schema") != BASIS_SCHEMA:
        raise CannotCheck(f"{gate}: re-decision data {basis.get('schema')!r} is not "
                          f"{BASIS_SCHEMA!r}, the one this verifier reads")
    _reference_profile(gate, basis, result)
    if basis.get("derivation") == "soak_spans":
        # G4: every figure derived again from the soak's raw outputs (acceptance_core.soak)
        samples = soak_samples(gate, basis, outputs, result.notes, result.differences)
    else:
        samples = _samples(gate, basis, outputs, result)
        arrays, drives = _derivation_inputs(gate, basis)
        plan = basis.get("readback")
        readback = None if not isinstance(plan, dict) else derivations.ReadbackPlan(
            int(plan["planned_nodes"]), float(plan["min_overlap_s"]))
        derived = derivations.derive_all(samples, arrays, drives, readback)
        result.differences.extend(compare(
            f"{gate} derived", [m for m in basis.get("derived") or []
                                if m["metric"] not in _AFTER_VERDICTS],
            [(d.metric, d.node, d.labels, d.value, d.unit) for d in derived]))
        samples += [evaluation.Sample(len(samples) + i, d.metric, d.value, d.unit, d.labels,
                                      d.node) for i, d in enumerate(derived, start=1)]
    verdicts, blocking = [], {}
    for criterion in basis["criteria"]:
        spec = _spec(criterion)
        try:
            verdict = evaluation.evaluate_criterion(spec, samples)
        except evaluation.CriterionError as e:
            raise CannotCheck(f"{gate}: {e}") from e
        verdicts.append(verdict)
        blocking[spec.key] = spec.blocking
        recorded = criterion.get("recorded") or {}
        row = CriterionRow(gate, spec.key, spec.metric, str(criterion.get("requirement", "")),
                           recorded.get("measured"), str(recorded.get("verdict", "")),
                           verdict.measured, verdict.verdict)
        result.rows.append(row)
        if not row.matches:
            result.differences.append(
                f"{gate} {spec.key} ({spec.metric}): recorded {_value(row.recorded_value)} "
                f"{row.recorded_verdict}, the evidence gives {_value(row.value)} {row.verdict}")
    outcome = evaluation.gate_outcome(verdicts, blocking)
    recorded_outcome = str(basis.get("outcome", ""))
    result.outcomes.append((gate, recorded_outcome, outcome))
    if outcome != recorded_outcome:
        result.differences.append(f"{gate} decision: recorded {recorded_outcome}, the evidence "
                                  f"gives {outcome}")


def _value(value: float | None) -> str:
    return "—" if value is None else f"{value:.6g}"


def redecide(summary: dict[str, Any], files: dict[str, bytes]) -> Redecision:
    """Re-decide every gate of a report (see the module docstring). Raises CannotCheck."""
    version = summary.get("schema_version", 1)
    if not isinstance(version, int) or version < SCHEMA_VERSION:
        raise CannotCheck(f"summary.json schema version {version}: this report was issued "
                          f"before reports carried their criteria snapshot and derivation "
                          f"inputs (schema {SCHEMA_VERSION}); it cannot be re-decided")
    gates = summary.get("gates")
    if not isinstance(gates, list) or not gates:
        raise CannotCheck("summary.json lists no gate")
    result = Redecision()
    try:
        outputs = verified_outputs(summary, files, result)
    except _MALFORMED as e:
        raise CannotCheck(f"summary.json is not well formed: its runs: {type(e).__name__}: "
                          f"{e}") from e
    for entry in gates:
        gate = entry.get("gate", "?") if isinstance(entry, dict) else "?"
        try:
            if not isinstance(entry, dict):
                raise TypeError(f"a gate entry is {type(entry).__name__}, not an object")
            _gate(entry, outputs, result)
        except _MALFORMED as e:
            raise CannotCheck(f"{gate}: summary.json is not well formed: "
                              f"{type(e).__name__}: {e}") from e
    return result


def table(result: Redecision) -> str:
    """The per-criterion table and the decision, as printed by the command."""
    lines = [f"{'gate':<4} {'criterion':<28} {'required':<22} {'recorded':>12} {'verdict':<12} "
             f"{'recomputed':>12} {'verdict':<12} match"]
    for row in result.rows:
        lines.append(f"{row.gate:<4} {row.key:<28} {row.requirement:<22} "
                     f"{_value(row.recorded_value):>12} {row.recorded_verdict:<12} "
                     f"{_value(row.value):>12} {row.verdict:<12} "
                     f"{'yes' if row.matches else 'NO'}")
    for gate, recorded, outcome in result.outcomes:
        lines.append(f"decision {gate}: recorded {recorded}, recomputed {outcome}"
                     + ("" if recorded == outcome else "  DIFFERS"))
    return "\n".join(lines)
