"""Gate evaluation: a pure function from criteria and measurements to verdicts.

No database, no I/O: ``evaluate_criterion(spec, samples) -> Verdict`` and
``gate_outcome(verdicts) -> str``. Derived figures (line efficiency, the G3 comparison) come from
``gates.derivations`` and are judged here like measured samples. Verdicts: ``pass``,
``fail``, ``review`` (outside the reference range on the good side: a person must accept it or
re-run), ``insufficient`` (not enough samples, or samples marked invalid: the run produced no
evidence to decide on, so it is an error, never a pass or a stop), ``unstable`` (two rounds of
the same figure disagree beyond the tolerance: the measurement must be re-run before it counts,
also an error).

Exact boundaries: every bound is met with a stated relative tolerance, :data:`REL_TOL`
(1e-9 of the larger of the bound and the figure), so a figure computed exactly on a threshold
(75.04 / 53.6 − 1 = 0.40000000000000013 for "at most +40 %") is on it, not beyond it; a figure
one part in a million off is still judged as it is.

A sample whose labels carry ``invalid`` (a reason) is evidence that must not count: a criterion
that selects it is ``insufficient`` with that reason (the G3 derivations mark a comparison so
when the tier under test cannot be shown to have been used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    """A measurement as evaluation sees it. ``id`` links a verdict back to its evidence."""

    id: int
    metric: str
    value: float
    unit: str
    labels: dict[str, str] = field(default_factory=dict)
    node: str = ""


@dataclass(frozen=True)
class CriterionSpec:
    """A criterion's data (see ``gates.models.Criterion`` for the meaning of each field)."""

    key: str
    metric: str
    operator: str
    unit: str
    aggregation: str = "each"
    threshold: float | None = None
    threshold_high: float | None = None
    reference_value: float | None = None
    tolerance: float | None = None
    label_filter: dict[str, str] = field(default_factory=dict)
    above_range_verdict: str = "fail"
    min_samples: int = 1
    blocking: bool = True


@dataclass(frozen=True)
class Verdict:
    """``measured`` is the figure judged (the worst sample for ``each``), ``deviation`` the
    ratio measured ÷ reference − 1 for ``within`` criteria, ``sample_ids`` the evidence used;
    ``absent``: insufficient because nothing of its metric was measured at all (not because
    what was measured cannot count)."""

    key: str
    verdict: str
    measured: float | None
    explanation: str
    sample_ids: tuple[int, ...] = ()
    deviation: float | None = None
    node: str = ""
    absent: bool = False


class CriterionError(ValueError):
    """A criterion's data is inconsistent (e.g. ``between`` without a high threshold)."""


def threshold_text(spec: CriterionSpec) -> str:
    """The requirement in words a person reads: ``>= 24``, ``0.29 … 0.4``, ``17.31 s ± 10 %``."""
    unit = "" if spec.unit in ("1", "ratio") else f" {spec.unit}"
    if spec.operator in (">=", "<="):
        return f"{spec.operator} {spec.threshold:g}{unit}"
    if spec.operator == "between":
        if spec.threshold == spec.threshold_high:
            return f"= {spec.threshold:g}{unit}"
        return f"{spec.threshold:g} … {spec.threshold_high:g}{unit}"
    return f"{spec.reference_value:g}{unit} ± {_needed(spec, spec.tolerance) * 100:g} %"


def _needed(spec: CriterionSpec, bound: float | None) -> float:
    """A bound the criterion's operator needs; ``_check`` refuses a criterion without it before
    any judging, this narrows the type and guards the callers that do not check first."""
    if bound is None:
        raise CriterionError(f"criterion {spec.key}: operator {spec.operator} lacks a bound")
    return bound


def _check(spec: CriterionSpec) -> None:
    needs = {
        ">=": ("threshold",),
        "<=": ("threshold",),
        "between": ("threshold", "threshold_high"),
        "within": ("reference_value", "tolerance"),
    }
    if spec.operator not in needs:
        raise CriterionError(f"criterion {spec.key}: unknown operator {spec.operator!r}")
    missing = [name for name in needs[spec.operator] if getattr(spec, name) is None]
    if missing:
        raise CriterionError(f"criterion {spec.key}: operator {spec.operator} needs {missing}")
    if spec.operator == "within" and not spec.reference_value:
        raise CriterionError(f"criterion {spec.key}: reference value must be non-zero")


#: The relative tolerance of every comparison with a bound: a figure within 1e-9 of the bound
#: (relative to the larger of the two) is on the bound. Floating point leaves a figure computed
#: from exact inputs a few parts in 1e16 off; a real measurement is never that close by chance.
REL_TOL = 1e-9


def at_least(value: float, bound: float, rel_tol: float = REL_TOL) -> bool:
    """``value >= bound`` with the relative tolerance ``rel_tol``."""
    return value >= bound or bound - value <= rel_tol * max(abs(bound), abs(value))


def at_most(value: float, bound: float, rel_tol: float = REL_TOL) -> bool:
    """``value <= bound`` with the relative tolerance ``rel_tol``."""
    return at_least(-value, -bound, rel_tol)


def _judge(spec: CriterionSpec, value: float) -> tuple[str, float | None, float]:
    """(verdict, deviation, margin) of one value; margin < 0 means beyond the bound, smaller is
    worse (a margin within :data:`REL_TOL` of the bound still passes)."""
    if spec.operator == ">=":
        threshold = _needed(spec, spec.threshold)
        return ("pass" if at_least(value, threshold) else "fail"), None, value - threshold
    if spec.operator == "<=":
        # Above an at-most threshold is above its range: that verdict ("fail" unless the
        # criterion names another, e.g. "unstable" for round_deviation).
        threshold = _needed(spec, spec.threshold)
        verdict = "pass" if at_most(value, threshold) else spec.above_range_verdict
        return verdict, None, threshold - value
    if spec.operator == "between":
        low, high = _needed(spec, spec.threshold), _needed(spec, spec.threshold_high)
        if not at_least(value, low):
            return "fail", None, value - low
        if not at_most(value, high):
            return spec.above_range_verdict, None, high - value
        return "pass", None, min(value - low, high - value)
    deviation = value / _needed(spec, spec.reference_value) - 1
    tolerance = _needed(spec, spec.tolerance)
    margin = tolerance - abs(deviation)
    # A rounding hair beyond the tolerance is still within it (0.1 vs 0.10000000000000009).
    return ("pass" if at_most(abs(deviation), tolerance) else "fail"), deviation, margin


def select(spec: CriterionSpec, samples: list[Sample]) -> list[Sample]:
    """The samples of the criterion's metric whose labels match its label filter."""
    return [
        s for s in samples
        if s.metric == spec.metric
        and all(s.labels.get(k) == str(v) for k, v in spec.label_filter.items())
    ]


_AGGREGATIONS: dict[str, Callable[[list[float]], float]] = {
    "min": min, "max": max, "sum": sum, "mean": lambda v: sum(v) / len(v),
}


def evaluate_criterion(spec: CriterionSpec, samples: list[Sample]) -> Verdict:
    """Judge one criterion on all the samples of a gate run (it selects its own)."""
    _check(spec)
    chosen = select(spec, samples)
    wanted = spec.metric + (" (" + ", ".join(f"{k}={v}" for k, v in sorted(
        spec.label_filter.items())) + ")" if spec.label_filter else "")
    if len(chosen) < spec.min_samples:
        return Verdict(spec.key, "insufficient", None,
                       f"no measurement of {wanted} (needs {spec.min_samples})",
                       absent=not chosen)
    units = {s.unit for s in chosen}
    if units != {spec.unit}:
        return Verdict(spec.key, "insufficient", None,
                       f"{wanted} measured in {sorted(units)}, criterion is in {spec.unit}")
    ids = tuple(s.id for s in chosen)
    invalid = [s for s in chosen if s.labels.get("invalid")]
    if invalid:
        reasons = list(dict.fromkeys(s.labels["invalid"] for s in invalid))
        return Verdict(spec.key, "insufficient", None,
                       f"{wanted} cannot count: {'; '.join(reasons)}", ids)
    if spec.aggregation == "each":
        judged = [(s, *_judge(spec, s.value)) for s in chosen]
        worst = min(judged, key=lambda item: item[3])
        sample, verdict, deviation, _ = worst
        value, node = sample.value, sample.node
        detail = sample.labels.get("detail", "")  # what a derived figure was made of (G1)
        scope = f"worst of {len(chosen)}" if len(chosen) > 1 else "measured"
    else:
        values = [s.value for s in chosen]
        value = _AGGREGATIONS[spec.aggregation](values)
        verdict, deviation, _ = _judge(spec, value)
        node, detail = "", ""
        scope = f"{spec.aggregation} of {len(chosen)}" if len(chosen) > 1 else "measured"
    where = f" on {node}" if node else ""
    if spec.aggregation == "each" and len(chosen) > 1 and verdict != "pass":
        shown = {k: v for k, v in sample.labels.items()
                 if k not in spec.label_filter and k != "detail"}
        if shown:
            where += " (" + ", ".join(f"{k} {v}" for k, v in shown.items()) + ")"
    unit = "" if spec.unit in ("1", "ratio") else f" {spec.unit}"
    explanation = (f"{scope}{where}: {figure_text(value, bounds(spec))}{unit}; "
                   f"required {threshold_text(spec)}")
    if deviation is not None:
        explanation += f"; deviation {deviation * 100:+.1f} %"
    if detail:
        explanation += f"; {detail}"
    if len(chosen) == 1:
        explanation += _interval_note(spec, chosen[0], samples)
    return Verdict(spec.key, verdict, value, explanation, ids, deviation, node)


def bounds(spec: CriterionSpec) -> tuple[float, ...]:
    """The figures a measured value is judged against (for ``within``: reference × (1 ± tol))."""
    if spec.operator == "within":
        if spec.reference_value is None or spec.tolerance is None:
            return ()
        return (spec.reference_value * (1 - spec.tolerance),
                spec.reference_value * (1 + spec.tolerance))
    return tuple(b for b in (spec.threshold, spec.threshold_high) if b is not None)


def figure_text(value: float, against: tuple[float, ...] = ()) -> str:
    """``value`` with 6 significant digits (``%g``), or more where that would print it equal to
    one of the bounds it is judged against while it is not on it (0.2499999 vs 0.25)."""
    for digits in range(6, 16):
        text = f"{value:.{digits}g}"
        if not any(float(text) == b and not (at_least(value, b) and at_most(value, b))
                   for b in against):
            return text
    return repr(value)


def _interval_note(spec: CriterionSpec, chosen: Sample, samples: list[Sample]) -> str:
    """``; 95 % CI a … b over n rounds`` when the derivations stored one for this figure."""
    bounds = {}
    for s in samples:
        if s.metric in ("ci_low", "ci_high") and s.labels.get("figure") == spec.metric and all(
            s.labels.get(k) == v for k, v in chosen.labels.items()
        ):
            bounds[s.metric] = s
    if len(bounds) != 2:
        return ""
    low = bounds["ci_low"]
    level = float(low.labels.get("level", "0.95")) * 100
    rounds = chosen.labels.get("rounds", "?")
    return (f"; {level:g} % CI {low.value:.3g} … {bounds['ci_high'].value:.3g} over "
            f"{rounds} rounds (information, not a criterion)")


def gate_outcome(verdicts: list[Verdict], blocking: dict[str, bool] | None = None) -> str:
    """``passed`` when every blocking criterion passed; ``error`` when any lacks evidence or is
    unstable (no decision: evidence that cannot count is never a pass or a stop) — except that a
    failure stops the gate when the others lack evidence only because nothing of theirs was
    measured at all (an array with 0 of 24 drives has no self-test to read: it stops on its
    drive count); ``stopped`` when any failed; else ``review``."""
    blocking = blocking or {}
    counted = [v for v in verdicts if blocking.get(v.key, True)]
    kinds = {v.verdict for v in counted}
    absent_only = all(v.absent for v in counted if v.verdict == "insufficient")
    if "unstable" in kinds or ("insufficient" in kinds and not ("fail" in kinds and absent_only)):
        return "error"
    if "fail" in kinds:
        return "stopped"
    if "review" in kinds:
        return "review"
    return "passed"


NO_DECISION = frozenset({"insufficient", "unstable"})


def no_decision_reason(verdicts: list[Verdict], blocking: dict[str, bool] | None = None) -> str:
    """Why an ``error`` outcome decided nothing, in one text: unstable figures first (they ask
    for a re-run), then missing or invalid evidence."""
    blocking = blocking or {}
    counted = [v for v in verdicts if blocking.get(v.key, True)]
    parts = []
    unstable = [v for v in counted if v.verdict == "unstable"]
    if unstable:
        parts.append("unstable: " + "; ".join(f"{v.key}: {v.explanation}" for v in unstable)
                     + " — the rounds disagree beyond the tolerance; re-run the gate "
                       "(an unstable measurement cannot count)")
    missing = [v.explanation for v in counted if v.verdict == "insufficient"]
    if missing:
        parts.append("insufficient evidence: " + "; ".join(missing))
    return "\n".join(parts)
