"""Derived figures: pure functions from a gate run's samples to the figures computed from them.

No database, no I/O: ``derive_all(samples, …) -> [DerivedSample]``. G1's drives per array; line
efficiency per node (G2); the G3 tier comparison per round and as a mean with its 95 % interval,
its repeatability, the aggregate read-back per array; stored beside the measured samples and
judged by ``gates.evaluation`` like them.

The G3 comparison marks a figure ``invalid`` (evaluation: ``insufficient``) when an arm's tier
evidence does not show the tier under test was used (``_tier_invalid``: window from the eviction,
prefix cache reset, external hits, working set against GPU KV + DRAM tier, storage tier).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from gates.evaluation import Sample, at_least, at_most

# --- G1: the drives of each array and their self-tests ---------------------------------------

#: NVMe self-test result codes (the low nibble of DSTS, NVMe base spec "Device Self-test Log"):
#: 0 completed without error; 1-4, 8, 9 aborted (re-run); 5-7 failed.
SELF_TEST_ABORTED = {1: "aborted by a Device Self-test command", 2: "aborted by a controller "
                     "reset", 3: "aborted by a namespace removal", 4: "aborted by a Format NVM",
                     8: "aborted for an unknown reason", 9: "aborted by a sanitize operation"}
SELF_TEST_FAILED = {5: "fatal or unknown test error", 6: "failed, segment unknown",
                    7: "failed in a segment"}


@dataclass(frozen=True)
class ArrayDrives:
    """What G1 expects on one array controller: the array's name, its drives' model (``""``:
    the model most of the controller's PCIe drives report) and how many there must be."""

    array: str
    drive_model: str
    expected: int


def _listed(problems: list[str], most: int = 6) -> str:
    shown = "; ".join(problems[:most])
    return shown + (f"; and {len(problems) - most} more" if len(problems) > most else "")


def derive_array_drives(samples: list[Sample],
                        plans: Mapping[str, ArrayDrives]) -> list[DerivedSample]:
    """G1 per array controller (``plans``: controller node name → :class:`ArrayDrives`):

    * ``drive_count`` (unit 1, labels ``scope=array``, ``array``, ``expected``): the distinct
      serials of the array's drive model among the controller's ``drive_present``. A boot SSD,
      a fabrics controller (its model is the array's product, not the drive's) and any drive
      of another model are not counted and are named in the ``detail`` label. More than
      ``expected`` (a controller that sees a second array's drives of the same model) cannot
      count: the figure is ``invalid``, naming the counts. Fewer is judged by the criterion.
    * ``self_test_failures`` (labels ``scope=array``): the counted drives whose self-test of
      this run failed (result 5-7). Each counted drive needs exactly one completed result from
      this run's probe (labelled with its ``controller``); a drive with none, with its test
      still running, with an aborted test (1-4, 8, 9) or an unknown code makes the figure
      ``invalid``, naming the drive: the gate cannot decide on it. A controller without a
      drive inventory in the run (G2–G4) gets neither."""
    derived: list[DerivedSample] = []
    for node, plan in sorted(plans.items()):
        mine = [s for s in samples if s.node == node]
        if not any(s.metric in ("drive_present", "namespace_count") for s in mine):
            continue
        present = {s.labels.get("serial", ""): s for s in mine if s.metric == "drive_present"}
        models = [s.labels.get("model", "") for s in present.values()]
        model = plan.drive_model or max(sorted(set(models)), key=models.count, default="")
        ours = {serial: s for serial, s in present.items() if s.labels.get("model") == model}
        others = [s for s in present.values() if s.labels.get("model") != model]
        detail = (f"array {plan.array}: {len(ours)} drive(s) of model {model!r} counted, "
                  f"{plan.expected} expected" + ("" if plan.drive_model else " (model taken "
                                                 "from most drives)") if model else
                  f"array {plan.array}: no drive seen on its controller, {plan.expected} "
                  f"expected (the array names no drive model)")
        if others:
            detail += "; not counted: " + _listed(
                [f"{s.labels.get('model', '?')!r} {s.labels.get('serial', '')} "
                 f"{s.labels.get('controller', '')}".rstrip() for s in others])
        labels = {"scope": "array", "array": plan.array, "model": model,
                  "expected": str(plan.expected), "detail": detail}
        if len(ours) > plan.expected:
            labels["invalid"] = (f"array {plan.array}: its controller {node} shows {len(ours)} "
                                 f"drives of model {model!r}, more than the {plan.expected} "
                                 f"the array has (another array's drives?)")
        derived.append(DerivedSample(
            "drive_count", float(len(ours)), "1", labels, node,
            tuple(s.id for s in present.values())))
        if ours:
            derived.append(_array_self_tests(node, plan, ours, mine))
    return derived


def _array_self_tests(node: str, plan: ArrayDrives, ours: dict[str, Sample],
                      mine: list[Sample]) -> DerivedSample:
    by_controller: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in mine:
        if s.metric in ("self_test_result", "self_test_in_progress") and "controller" in s.labels:
            by_controller[s.labels["controller"]][s.metric].append(s)
    failures, problems, ids = 0, [], []
    for serial, drive in sorted(ours.items()):
        controller = drive.labels.get("controller", "")
        found = by_controller.get(controller, {})
        ids += [s.id for group in found.values() for s in group]
        results, running = found.get("self_test_result", []), found.get("self_test_in_progress")
        where = f"drive {serial} ({controller or 'no controller'})"
        if running and any(s.value for s in running):
            problems.append(f"{where}: its self-test was still running")
        elif not results:
            problems.append(f"{where}: no self-test result from this run")
        elif len(results) > 1:
            problems.append(f"{where}: {len(results)} self-test results in one run")
        elif int(results[0].value) in SELF_TEST_FAILED:
            failures += 1
        elif int(results[0].value) in SELF_TEST_ABORTED:
            code = int(results[0].value)
            problems.append(f"{where}: self-test {SELF_TEST_ABORTED[code]} (result {code}); "
                            f"re-run it")
        elif results[0].value != 0:
            problems.append(f"{where}: unknown self-test result {results[0].value:g}")
    labels = {"scope": "array", "array": plan.array, "drives": str(len(ours))}
    if problems:
        labels["invalid"] = "self-tests of " + plan.array + ": " + _listed(problems)
    return DerivedSample("self_test_failures", float(failures), "1", labels, node,
                         (*(s.id for s in ours.values()), *ids))



@dataclass(frozen=True)
class DerivedSample:
    metric: str
    value: float
    unit: str
    labels: dict[str, str]
    node: str
    input_ids: tuple[int, ...]


EFFICIENCY_MAX = 1.0  # a line efficiency cannot exceed the line rate


def derive_line_efficiency(samples: list[Sample],
                           arrays: Mapping[str, tuple[str, float]] | None = None
                           ) -> list[DerivedSample]:
    """line_efficiency = read_bandwidth ÷ the link line rate per node (METRICS.md), in B/s.

    The link is the **array's port** (``arrays``: node name → (array name, its port's line rate
    in B/s), DOMAIN.md's "link line rate") when the node reads an array, else the node's own
    NIC (its ``link_speed``); the ``link`` label says which, the ``detail`` label gives both
    figures. A node with bandwidth but no link speed (or the reverse) gets nothing, so the
    criterion sees insufficient data rather than a guess. A ratio above 1, or a read faster
    than the node's own NIC, is impossible: a wrong link or a wrong figure. The figure is then
    ``invalid`` (an error, never a pass), naming the fio figure and the link.
    """
    arrays = arrays or {}
    by_node: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if s.metric in ("read_bandwidth", "link_speed"):
            by_node[s.node][s.metric].append(s)
    derived = []
    for node, metrics in sorted(by_node.items()):
        reads, links = metrics.get("read_bandwidth", []), metrics.get("link_speed", [])
        if not reads or not links or len(links) != 1 or links[0].value <= 0:
            continue
        nic = links[0]
        interface = nic.labels.get("interface", "")
        nic_text = (f"the node's NIC{' ' + interface if interface else ''} at "
                    f"{nic.value * 8 / 1e6:.0f} Mb/s ({nic.value / 1e9:.2f} GB/s)")
        if node in arrays and arrays[node][1] > 0:
            array, rate = arrays[node]
            link = f"array {array} port"
            link_text = f"array {array}'s port at {rate * 8 / 1e6:.0f} Mb/s ({rate / 1e9:.2f} GB/s)"
        else:
            rate, link, link_text = nic.value, "node NIC", nic_text
        for read in reads:
            ratio = read.value / rate
            detail = (f"fio read {read.value / 1e9:.2f} GB/s on {node} ÷ {link_text}"
                      + ("" if link == "node NIC" else f"; {nic_text}"))
            labels = {**read.labels, **nic.labels, "link": link, "detail": detail}
            if not at_most(ratio, 1.0) or not at_most(read.value, nic.value):
                labels["invalid"] = (f"impossible: {detail} — a ratio above 1 means a wrong "
                                     f"link or a wrong figure")
            derived.append(DerivedSample("line_efficiency", ratio, "ratio", labels, node,
                                         (read.id, nic.id)))
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
_TIER_EVIDENCE = ("external_prefix_cache_hit_tokens", "working_set_bytes", "host_tier_bytes",
                  "gpu_kv_tokens", "kv_bytes_per_token", "storage_tier_hit_tokens",
                  "rdma_read_bytes", "prefix_cache_reset")
#: RUNBOOK §4.2: the working set must exceed GPU KV capacity + CPU tier by at least this factor.
WORKING_SET_FACTOR = 2.0
#: RUNBOOK §4.4: RDMA bytes read in the window vs external hits × KV bytes per token.
CROSS_CHECK_TOLERANCE = 0.15
#: The scrape the tier evidence window must start from (the flush's, after the warm-up).
WINDOW_START = "evicted"


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
    """Why the arm pass cannot count ("" when it can) and the evidence ids judged.

    An arm with a KV tier counts only when (RUNBOOK §4.2-4.4): its evidence window runs from the
    eviction to the end of the measured pass (label ``window`` ``evicted→…``: hits of the
    warm-up say nothing about the measured pass); the GPU prefix cache was reset before it
    (``prefix_cache_reset`` 1); it has external-tier hits; its working set is at least
    ``WORKING_SET_FACTOR`` × (GPU KV capacity in bytes + the DRAM tier of all TP ranks); and,
    for an arm other than the local-NVMe baseline (the array), the hits came from the storage
    tier, not LMCache's CPU tier: LMCache's L2 hits (MP mode) when present, else the RDMA bytes
    read in the same window within ±15 % of hits × KV bytes per token.
    """
    ids = tuple(s.id for s in evidence.values())
    if arm in TIERLESS_ARMS:
        return "", ids
    where = f"arm {arm}, round {round_}" + (f" on {node}" if node else "")
    hits = evidence.get("external_prefix_cache_hit_tokens")
    if hits is None:
        return (f"no external-tier hit count from the engine's /metrics ({where}): the use of "
                f"the {arm} tier cannot be shown"), ids
    window = hits.labels.get("window", "")
    if not window.startswith(WINDOW_START + "→"):
        return (f"the tier evidence window runs {window or 'from engine start'}, not from the "
                f"eviction to the end of the measured pass ({where}): warm-up hits would "
                f"count for the measured pass"), ids
    if hits.value <= 0:
        return (f"no external-tier hits: the {arm} tier was not used ({where}; window "
                f"{window})"), ids
    reset = evidence.get("prefix_cache_reset")
    if reset is None or reset.value != 1:
        return (f"the GPU prefix cache was not reset between warm-up and measured pass "
                f"({where}): the measured pass may have hit HBM, not the {arm} tier"), ids
    reason = _sizing_invalid(arm, where, evidence)
    if reason or arm == BASELINE_ARM:
        return reason, ids
    return _storage_invalid(arm, where, hits, evidence), ids


def _sizing_invalid(arm: str, where: str, evidence: dict[str, Sample]) -> str:
    working_set, host = evidence.get("working_set_bytes"), evidence.get("host_tier_bytes")
    gpu, per_token = evidence.get("gpu_kv_tokens"), evidence.get("kv_bytes_per_token")
    if working_set is None or host is None or gpu is None or per_token is None:
        missing = [name for name, s in (("working set", working_set), ("DRAM tier", host),
                                         ("GPU KV capacity", gpu),
                                         ("KV bytes per token", per_token)) if s is None]
        return (f"no tier sizing ({', '.join(missing)} missing; {where}): it cannot be shown "
                f"that the working set exceeds what GPU and DRAM hold")
    gpu_bytes = gpu.value * per_token.value
    bound = WORKING_SET_FACTOR * (gpu_bytes + host.value)
    if not at_least(working_set.value, bound):
        return (f"the working set ({working_set.value / 1e9:.1f} GB) is below "
                f"{WORKING_SET_FACTOR:g} × (GPU KV {gpu_bytes / 1e9:.1f} GB + DRAM tier "
                f"{host.value / 1e9:.1f} GB) = {bound / 1e9:.1f} GB ({where}): hits may come "
                f"from HBM or DRAM, not the {arm} tier")
    return ""


def _storage_invalid(arm: str, where: str, hits: Sample, evidence: dict[str, Sample]) -> str:
    l2 = evidence.get("storage_tier_hit_tokens")
    if l2 is not None:
        return "" if l2.value > 0 else (
            f"LMCache counted no storage-tier (L2) hit ({where}): the {hits.value:.0f} "
            f"external hits came from its CPU tier, not the {arm} tier")
    rdma, per_token = evidence.get("rdma_read_bytes"), evidence.get("kv_bytes_per_token")
    if rdma is None or per_token is None:
        return (f"neither LMCache's storage-tier hits nor the RDMA bytes read in the window "
                f"({where}): the external hits may come from LMCache's CPU tier; the {arm} "
                f"tier's use cannot be shown")
    expected = hits.value * per_token.value
    ratio = rdma.value / expected
    if not (at_least(ratio, 1 - CROSS_CHECK_TOLERANCE)
            and at_most(ratio, 1 + CROSS_CHECK_TOLERANCE)):
        return (f"RDMA bytes read in the window {rdma.value / 1e9:.2f} GB vs external hits × KV "
                f"bytes per token {hits.value:.0f} × {per_token.value:.0f} B = "
                f"{expected / 1e9:.2f} GB: ratio {ratio:.3f}, outside "
                f"1 ± {CROSS_CHECK_TOLERANCE:g} ({where}): the hits did not come from the "
                f"{arm} tier (LMCache's CPU tier?)")
    return ""


def derive_kv_tier(samples: list[Sample]) -> list[DerivedSample]:
    """The G3 comparison of the measured passes (labels ``phase=compare``, ``pass=measured``),
    per node and concurrency (METRICS.md):

    * ``ttft_reduction`` = 1 − ttft_p50(arm) ÷ ttft_p50(local) and ``throughput_gain`` =
      output_throughput(arm) ÷ output_throughput(local) − 1 for every other arm, per round
      (label ``round``) and as the mean of the rounds (``round=mean``, ``rounds=N``), with its
      95 % t-interval as ``ci_low`` / ``ci_high`` (``figure`` names the figure) from two rounds
      on. Inputs: both arms' figures and the tier evidence judged.
    * ``round_deviation`` = (largest − smallest round) ÷ their mean, per arm and measured
      figure (``figure`` = ttft_p50 / output_throughput): with two rounds \\|a − b\\| ÷
      ((a + b) / 2), the same whichever round came first (12.00 → 12.62 s and 12.62 → 12.00 s
      are both 5.04 %).

    A comparison round is marked ``invalid`` (with the reason) when either arm's passes of that
    round had failed requests (vLLM's ``median_ttft_ms`` and ``output_throughput`` count
    successful requests only, so an arm with failures can look better), when either arm with a
    KV tier shows no external-tier hit in its /metrics window, or its working set does not
    exceed its host-memory tier; the mean is invalid when any round is.
    """
    # (node, concurrency, arm, round) → measured figure → sample
    passes: dict[tuple[str, str, str, str], dict[str, Sample]] = defaultdict(dict)
    # (node, arm, round) → tier evidence metric → sample
    evidence: dict[tuple[str, str, str], dict[str, Sample]] = defaultdict(dict)
    # (node, concurrency, arm, round) → failed_requests of its passes (warm-up and measured)
    failures: dict[tuple[str, str, str, str], list[Sample]] = defaultdict(list)
    for s in samples:
        labels = s.labels
        if labels.get("phase") != "compare" or "arm" not in labels or "round" not in labels:
            continue
        if s.metric == "failed_requests":
            failures[(s.node, labels.get("concurrency", ""), labels["arm"],
                      labels["round"])].append(s)
        elif s.metric in ("ttft_p50", "output_throughput") and labels.get("pass") == "measured":
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
        failed = [f for a in (arm, BASELINE_ARM)
                  for f in failures.get((node, concurrency, a, round_), []) if f.value > 0]
        arm_ids = (*arm_ids, *(f.id for f in failed))
        if failed:
            reason = "; ".join(
                f"{f.value:g} failed request(s) in arm {f.labels['arm']}, round {round_}"
                + (f", {f.labels['pass']} pass" if f.labels.get("pass") else "")
                for f in failed) + (" (vLLM's TTFT and throughput count successful requests "
                                    "only: an arm with failures cannot be compared)")
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
        values = [s.value for _, s in measured]
        low, high = min(values), max(values)
        if low <= 0:
            continue
        deviation = (high - low) / ((high + low) / 2)  # a symmetric base: no round favoured
        derived.append(DerivedSample(
            "round_deviation", deviation, "ratio",
            {"figure": figure, "arm": arm, "concurrency": concurrency}, node,
            tuple(s.id for _, s in measured),
        ))
    return derived


@dataclass(frozen=True)
class ReadbackPlan:
    """What the plan says of the shared read-back (RUNBOOK §4.5): how many nodes read back
    from one array together (``planned_nodes``: the vendor's "8 nodes sharing one array") and
    the shortest overlap of their windows that counts (``min_overlap_s``)."""

    planned_nodes: int = 8
    min_overlap_s: float = 60.0


@dataclass(frozen=True)
class NodeWindow:
    """One node's read-back as the service's clock sees it: its clock skew (node − service,
    measured at the SSH round trip ``round_trip`` of the sampler's start; None when no
    service stamped it, and ``points`` are on the node's own clock) and its counter series
    ``points`` (service time, bytes received) in time order."""

    node: str
    skew: float | None  # None: unknown (no service clock around the reading: a bundle)
    round_trip: float
    points: tuple[tuple[float, float], ...]
    ids: tuple[int, ...]

    @property
    def start(self) -> float:
        return self.points[0][0]

    @property
    def end(self) -> float:
        return self.points[-1][0]

    def bytes_at(self, when: float) -> float:
        """The counter at ``when`` (inside the window), linear between two samples."""
        for (t0, v0), (t1, v1) in zip(self.points, self.points[1:], strict=False):
            if t0 <= when <= t1:
                return v0 if t1 == t0 else v0 + (v1 - v0) * (when - t0) / (t1 - t0)
        raise ValueError(f"{when} is outside {self.node}'s window")


def readback_windows(samples: list[Sample]) -> tuple[dict[str, NodeWindow], list[str]]:
    """Each node's aligned read-back window from its ``node_clock`` (the node's time printed
    when the sampler started, labels ``service_sent`` / ``service_received``: the service's
    clock around that SSH round trip) and its per-second ``rdma_counter`` samples (bytes, label
    ``time``: the node's clock); and the problems found (a node without its clock reading or
    with fewer than two samples), each naming the node."""
    clocks: dict[str, Sample] = {}
    series: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.labels.get("phase") != "readback":
            continue
        if s.metric == "node_clock":
            clocks.setdefault(s.node, s)
        elif s.metric == "rdma_counter" and (s.labels.get("counter") == "port_rcv_data"
                                             or s.labels.get("counter", "").startswith("rx")):
            series[s.node].append(s)
    windows: dict[str, NodeWindow] = {}
    problems: list[str] = []
    for node in sorted(set(series) | set(clocks)):
        clock, points = clocks.get(node), series.get(node, [])
        if clock is None:
            problems.append(f"{node}: no clock reading at the sampler's start, so its "
                            f"samples cannot be put on the service's clock")
            continue
        if len(points) < 2:
            problems.append(f"{node}: {len(points)} counter sample(s), at least 2 needed")
            continue
        try:
            sent = float(clock.labels["service_sent"])
            received = float(clock.labels["service_received"])
            skew: float | None = clock.value - (sent + received) / 2
        except (KeyError, ValueError):  # collected without the service (a bundle): unknown
            sent = received = 0.0
            skew = None
        aligned = sorted((float(p.labels["time"]) - (skew or 0.0), p.value) for p in points)
        windows[node] = NodeWindow(node, skew, received - sent, tuple(aligned),
                                   (clock.id, *(p.id for p in points)))
    return windows, problems


def _utc(when: float) -> str:
    """An instant on the service's clock as people read it (UTC, milliseconds)."""
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds")


def _skews(windows: list[NodeWindow]) -> str:
    return ", ".join(f"{w.node} unknown" if w.skew is None else
                     f"{w.node} {w.skew:+.3f} s (±{w.round_trip / 2:.3f})" for w in windows)


def derive_readback(samples: list[Sample], arrays: Mapping[str, tuple[str, float]],
                    plan: ReadbackPlan | None = None) -> list[DerivedSample]:
    """The shared read-back (RUNBOOK §4.5; labels ``phase=readback``), per array:

    each node's per-second RDMA counter samples are put on the service's clock (node time −
    the node's skew, measured at the SSH round trip that started its sampler); the **overlap
    window** is from the latest first sample to the earliest last sample of the array's
    nodes; ``rx_bandwidth`` (``scope=aggregate``) = Σ over the nodes of the bytes each
    received inside the window (its counter interpolated at both ends) ÷ the window's
    length, and ``line_efficiency`` = that ÷ the **array port's** line rate.

    ``arrays`` maps a node name to (array name, its port's line rate in B/s); nodes without an
    array are left out. ``plan`` (default :class:`ReadbackPlan`): fewer nodes than planned, a
    node whose samples cannot be aligned, no overlap or an overlap shorter than
    ``min_overlap_s`` make the figures ``invalid`` with a reason naming the counts or the
    length (never a pass). Labels name the window: ``window_start`` / ``window_end`` (on the
    service's clock, UTC), ``window_s``, ``clock_skew`` per node (with ± half its SSH round
    trip), ``nodes``, ``planned_nodes``, and ``detail``, all of it in one sentence that the
    verdict's explanation carries into the report and the run page.
    """
    plan = plan or ReadbackPlan()
    windows, problems = readback_windows(samples)
    groups: dict[tuple[str, float], list[NodeWindow]] = defaultdict(list)
    for node, window in windows.items():
        if node in arrays:
            groups[arrays[node]].append(window)
    broken = [p for p in problems if p.split(":", 1)[0] in arrays]
    derived = []
    for (array, line_rate), chosen in sorted(groups.items()):
        start, end = max(w.start for w in chosen), min(w.end for w in chosen)
        length = end - start
        labels = {"scope": "aggregate", "array": array, "nodes": str(len(chosen)),
                  "planned_nodes": str(plan.planned_nodes),
                  "array_line_rate": f"{line_rate:.0f}", "window_start": _utc(start),
                  "window_end": _utc(end), "window_s": f"{length:.3f}",
                  "clock_skew": _skews(chosen)}
        where = ("over the node's read window, " if len(chosen) == 1 else
                 f"over the window where all {len(chosen)} nodes read, ")
        labels["detail"] = (f"{where}{labels['window_start']} → {labels['window_end']} "
                            f"({length:.1f} s; {plan.planned_nodes} planned); clock skew "
                            f"{labels['clock_skew']}")
        reasons = list(broken)
        unknown = [w.node for w in chosen if w.skew is None]
        if unknown and len(chosen) > 1:
            reasons.append(f"no service clock around the clock reading of "
                           f"{', '.join(unknown)} (evidence not collected over the service's "
                           f"SSH): the nodes' windows cannot be aligned")
        if len(chosen) < plan.planned_nodes:
            reasons.append(f"{len(chosen)} of the {plan.planned_nodes} planned nodes read back "
                           f"from {array} ({', '.join(w.node for w in chosen)})")
        if length <= 0:
            reasons.append(f"the nodes' read-back windows do not overlap (the last start is "
                           f"{-length:.1f} s after the first end)")
            total = 0.0
        else:
            if not at_least(length, plan.min_overlap_s):
                reasons.append(f"the overlap window is {length:.1f} s, shorter than the "
                               f"{plan.min_overlap_s:g} s required")
            total = math.fsum(w.bytes_at(end) - w.bytes_at(start) for w in chosen) / length
        if reasons:
            labels["invalid"] = "; ".join(reasons)
        ids = tuple(i for w in chosen for i in w.ids)
        derived.append(DerivedSample("rx_bandwidth", total, "B/s", labels, "", ids))
        if line_rate > 0:
            ratio = total / line_rate
            eff_labels = dict(labels)
            if not at_most(ratio, EFFICIENCY_MAX):
                eff_labels["invalid"] = "; ".join(
                    [*reasons, f"impossible: {total:.4g} B/s over a port of {line_rate:.4g} "
                               f"B/s — a ratio above 1 means a wrong link or a wrong figure"])
            derived.append(DerivedSample("line_efficiency", ratio, "ratio", eff_labels, "",
                                         ids))
    return derived


def derive_all(samples: list[Sample],
               arrays: Mapping[str, tuple[str, float]] | None = None,
               drives: Mapping[str, ArrayDrives] | None = None,
               readback: ReadbackPlan | None = None) -> list[DerivedSample]:
    """Every derived figure of a gate run's samples (each derivation finds its own inputs):
    G1's drives per array, line efficiency per node, the G3 tier comparison and repeatability,
    the aggregate read-back per array over the nodes' overlap window."""
    return [*derive_array_drives(samples, drives or {}), *derive_line_efficiency(samples, arrays),
            *derive_kv_tier(samples), *derive_readback(samples, arrays or {}, readback)]
