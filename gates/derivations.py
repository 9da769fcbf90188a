"""Derived figures: pure functions from a gate run's samples to the figures computed from them.

No database, no I/O: ``derive_all(samples, arrays) -> [DerivedSample]``, each derivation finding
its own inputs and yielding nothing without them. Line efficiency per node (G2); the G3 tier
comparison per round and as a mean with its 95 % t-interval, its repeatability, and the aggregate
read-back per array. The derived samples are stored beside the measured ones and judged by
``gates.evaluation`` like any other sample.

The G3 comparison marks a figure ``invalid`` (a label with the reason, which evaluation turns into
``insufficient``) when an arm's engine shows no external-tier hit (the tier under test was not
used) or when the working set does not exceed the host-memory tier (hits may come from DRAM).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gates.evaluation import Sample


@dataclass(frozen=True)
class DerivedSample:
    metric: str
    value: float
    unit: str
    labels: dict[str, str]
    node: str
    input_ids: tuple[int, ...]


EFFICIENCY_MAX = 1.0  # a line efficiency cannot exceed the line rate


def derive_line_efficiency(samples: list[Sample]) -> list[DerivedSample]:
    """line_efficiency = read_bandwidth ÷ link_speed per node (METRICS.md), both in B/s.

    A node with bandwidth but no link speed (or the reverse) gets nothing, so the criterion sees
    insufficient data rather than a guess. An efficiency above 1 (more read than the link can
    carry: a misread unit or a wrong link speed) cannot be true and is never derived, so it is
    never stored nor judged (issue 21; :data:`EFFICIENCY_MAX`).
    """
    by_node: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if s.metric in ("read_bandwidth", "link_speed"):
            by_node[s.node][s.metric].append(s)
    derived = []
    for node, metrics in sorted(by_node.items()):
        reads, links = metrics.get("read_bandwidth", []), metrics.get("link_speed", [])
        if not reads or not links or len(links) != 1 or links[0].value <= 0:
            continue
        for read in reads:
            if read.value / links[0].value > EFFICIENCY_MAX:
                continue
            derived.append(DerivedSample(
                "line_efficiency", read.value / links[0].value, "ratio",
                {**read.labels, **links[0].labels}, node, (read.id, links[0].id),
            ))
    return derived


# --- G3: the tier comparison, its repeatability and the shared read-back ---------------------

BASELINE_ARM = "local"  # METRICS.md: ttft_reduction and throughput_gain against local NVMe
TIERLESS_ARMS = frozenset({"recompute"})  # no KV connector: no external hit is expected
CI_LEVEL = 0.95
# Two-sided 95 % Student t quantiles t(0.975; df) for df = 1 … 30 (standard tables); beyond 30
# rounds the normal quantile (1.96) is within 4 % of t and is used instead. With two rounds
# (df = 1) the interval is mean ± 12.706 × s ÷ √2: two rounds say little, and the CI shows it.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
# derived figure → (measured figure it compares, formula)
COMPARISONS: dict[str, tuple[str, Callable[[float, float], float]]] = {
    "ttft_reduction": ("ttft_p50", lambda arm, base: 1 - arm / base),
    "throughput_gain": ("output_throughput", lambda arm, base: arm / base - 1),
}
_TIER_EVIDENCE = ("external_prefix_cache_hit_tokens", "working_set_bytes", "host_tier_bytes")


def t_interval(values: list[float]) -> tuple[float, float]:
    """The 95 % confidence interval of the mean of ``values`` (Student t; two or more)."""
    n = len(values)
    if n < 2:
        raise ValueError("a confidence interval needs at least two values")
    centre, spread = statistics.fmean(values), statistics.stdev(values)
    q = T_975[n - 2] if n - 1 <= len(T_975) else statistics.NormalDist().inv_cdf(0.975)
    half = q * spread / math.sqrt(n)
    return centre - half, centre + half


def _round_key(label: str) -> tuple[int, str]:
    return (int(label), label) if label.isdigit() else (10**9, label)


def _tier_invalid(node: str, arm: str, round_: str,
                  evidence: dict[str, Sample]) -> tuple[str, tuple[int, ...]]:
    """Why the arm pass cannot count ("" when it can) and the evidence ids judged."""
    ids = tuple(s.id for s in evidence.values())
    if arm in TIERLESS_ARMS:
        return "", ids
    where = f"arm {arm}, round {round_}" + (f" on {node}" if node else "")
    hits = evidence.get("external_prefix_cache_hit_tokens")
    if hits is None:
        return (f"no external-tier hit count from the engine's /metrics ({where}): the use of "
                f"the {arm} tier cannot be shown"), ids
    if hits.value <= 0:
        return f"no external-tier hits: the {arm} tier was not used ({where})", ids
    working_set, host = evidence.get("working_set_bytes"), evidence.get("host_tier_bytes")
    if working_set is None or host is None:
        return (f"no tier sizing ({where}): it cannot be shown that the working set exceeds "
                f"the host-memory tier"), ids
    if working_set.value <= host.value:
        return (f"the working set ({working_set.value / 1e9:.1f} GB) does not exceed the "
                f"host-memory tier ({host.value / 1e9:.1f} GB) ({where}): hits may come from "
                f"DRAM, not the {arm} tier"), ids
    return "", ids


def derive_kv_tier(samples: list[Sample]) -> list[DerivedSample]:
    """The G3 comparison of the measured passes (labels ``phase=compare``, ``pass=measured``),
    per node and concurrency (METRICS.md):

    * ``ttft_reduction`` = 1 − ttft_p50(arm) ÷ ttft_p50(local) and ``throughput_gain`` =
      output_throughput(arm) ÷ output_throughput(local) − 1 for every other arm, per round
      (label ``round``) and as the mean of the rounds (``round=mean``, ``rounds=N``), with its
      95 % t-interval as ``ci_low`` / ``ci_high`` (``figure`` names the figure) from two rounds
      on. Inputs: both arms' figures and the tier evidence judged.
    * ``round_deviation`` = max over later rounds of \\|round i − round 1\\| ÷ round 1, per arm
      and measured figure (``figure`` = ttft_p50 / output_throughput).

    A comparison round is marked ``invalid`` (with the reason) when either arm with a KV tier
    shows no external-tier hit in its /metrics window, or its working set does not exceed its
    host-memory tier; the mean is invalid when any round is.
    """
    # (node, concurrency, arm, round) → measured figure → sample
    passes: dict[tuple[str, str, str, str], dict[str, Sample]] = defaultdict(dict)
    # (node, arm, round) → tier evidence metric → sample
    evidence: dict[tuple[str, str, str], dict[str, Sample]] = defaultdict(dict)
    for s in samples:
        labels = s.labels
        if labels.get("phase") != "compare" or "arm" not in labels or "round" not in labels:
            continue
        if s.metric in ("ttft_p50", "output_throughput") and labels.get("pass") == "measured":
            key = (s.node, labels.get("concurrency", ""), labels["arm"], labels["round"])
            passes[key].setdefault(s.metric, s)
        elif s.metric in _TIER_EVIDENCE:
            evidence[(s.node, labels["arm"], labels["round"])].setdefault(s.metric, s)

    derived: list[DerivedSample] = []
    # (node, concurrency, arm, derived figure) → (round, value, input ids, invalid reason)
    rounds_of: dict[tuple[str, str, str, str], list[tuple[str, float, tuple[int, ...], str]]] = (
        defaultdict(list))
    for (node, concurrency, arm, round_), figures in sorted(
            passes.items(), key=lambda item: (*item[0][:3], _round_key(item[0][3]))):
        base = passes.get((node, concurrency, BASELINE_ARM, round_))
        if arm == BASELINE_ARM or base is None:
            continue
        reason, arm_ids = _tier_invalid(node, arm, round_, evidence[(node, arm, round_)])
        base_reason, base_ids = _tier_invalid(node, BASELINE_ARM, round_,
                                              evidence[(node, BASELINE_ARM, round_)])
        reason = reason or base_reason
        for metric, (figure, formula) in COMPARISONS.items():
            mine, theirs = figures.get(figure), base.get(figure)
            if mine is None or theirs is None or theirs.value <= 0:
                continue
            value = formula(mine.value, theirs.value)
            ids = (mine.id, theirs.id, *arm_ids, *base_ids)
            labels = {"arm": arm, "baseline": BASELINE_ARM, "round": round_,
                      "concurrency": concurrency}
            if reason:
                labels["invalid"] = reason
            derived.append(DerivedSample(metric, value, "ratio", labels, node, ids))
            rounds_of[(node, concurrency, arm, metric)].append((round_, value, ids, reason))

    for (node, concurrency, arm, metric), rounds in rounds_of.items():
        values = [value for _, value, _, _ in rounds]
        ids = tuple(dict.fromkeys(i for _, _, round_ids, _ in rounds for i in round_ids))
        labels = {"arm": arm, "baseline": BASELINE_ARM, "round": "mean",
                  "rounds": str(len(rounds)), "concurrency": concurrency}
        reasons = [reason for _, _, _, reason in rounds if reason]
        if reasons:
            labels["invalid"] = reasons[0]
        derived.append(DerivedSample(metric, statistics.fmean(values), "ratio", labels, node,
                                     ids))
        if len(values) >= 2:
            low, high = t_interval(values)
            ci_labels = {**labels, "figure": metric, "level": f"{CI_LEVEL:g}"}
            derived.append(DerivedSample("ci_low", low, "ratio", ci_labels, node, ids))
            derived.append(DerivedSample("ci_high", high, "ratio", dict(ci_labels), node, ids))

    # (node, concurrency, arm, measured figure) → (round, sample) of every round
    series: dict[tuple[str, str, str, str], list[tuple[str, Sample]]] = defaultdict(list)
    for (node, concurrency, arm, round_), figures in passes.items():
        for figure, s in figures.items():
            series[(node, concurrency, arm, figure)].append((round_, s))
    for (node, concurrency, arm, figure), measured in sorted(series.items()):
        if len(measured) < 2:
            continue
        measured.sort(key=lambda item: _round_key(item[0]))
        first = measured[0][1]
        if first.value <= 0:
            continue
        deviation = max(abs(s.value - first.value) / first.value for _, s in measured[1:])
        derived.append(DerivedSample(
            "round_deviation", deviation, "ratio",
            {"figure": figure, "arm": arm, "concurrency": concurrency}, node,
            tuple(s.id for _, s in measured),
        ))
    return derived


def derive_readback(samples: list[Sample],
                    arrays: Mapping[str, tuple[str, float]]) -> list[DerivedSample]:
    """The shared read-back (RUNBOOK §4.5; labels ``phase=readback``): per array, the sum of its
    nodes' ``rx_bandwidth`` (``scope=aggregate``) and ``line_efficiency`` = that sum ÷ the
    **array port's** line rate, not the sum of the nodes' NICs.

    ``arrays`` maps a node name to (array name, array port line rate in B/s); nodes without an
    array are left out. Each node's rate is its own window's mean (two samples around its
    measured pass), so the sum is the aggregate when the nodes ran together, as the plan
    starts them.
    """
    groups: dict[tuple[str, float], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.metric == "rx_bandwidth" and s.labels.get("phase") == "readback" and s.node in arrays:
            groups[arrays[s.node]].append(s)
    derived = []
    for (array, line_rate), chosen in sorted(groups.items()):
        total = math.fsum(s.value for s in chosen)
        labels = {"scope": "aggregate", "array": array,
                  "nodes": str(len({s.node for s in chosen})),
                  "array_line_rate": f"{line_rate:.0f}"}
        ids = tuple(s.id for s in chosen)
        derived.append(DerivedSample("rx_bandwidth", total, "B/s", labels, "", ids))
        if line_rate > 0 and total / line_rate <= EFFICIENCY_MAX:  # above 1: impossible
            derived.append(DerivedSample("line_efficiency", total / line_rate, "ratio",
                                         dict(labels), "", ids))
    return derived


def derive_all(samples: list[Sample],
               arrays: Mapping[str, tuple[str, float]] | None = None) -> list[DerivedSample]:
    """Every derived figure of a gate run's samples (each derivation finds its own inputs and
    yields nothing without them): line efficiency per node, the G3 tier comparison and
    repeatability, the aggregate read-back per array (``arrays``: see ``derive_readback``)."""
    return [*derive_line_efficiency(samples), *derive_kv_tier(samples),
            *derive_readback(samples, arrays or {})]
