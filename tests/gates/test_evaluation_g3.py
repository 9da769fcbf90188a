"""The G3 derivations and verdicts: tier comparison per round and mean with its CI, validity of
an arm, repeatability (unstable), the aggregate read-back against the array port."""

import pytest

from gates.derivations import ReadbackPlan, derive_kv_tier, derive_readback, t_interval
from gates.evaluation import (
    CriterionSpec,
    Sample,
    Verdict,
    evaluate_criterion,
    gate_outcome,
    no_decision_reason,
)
from tests.readback.test_overlap_window import samples_of

NODE = "lab-inference-1"


KV_BPT = 253952  # Qwen3-Coder-480B-A35B, bf16 KV cache (RUNBOOK §4.2)
MISSING = object()


def arm_pass(ids, arm, round_, ttft, throughput, hits=1.9e6, working_set=4.9e11,
             host_tier=6.9e10, node=NODE, gpu_kv_tokens=6.0e5, window="evicted→t1", reset=1,
             rdma=MISSING, l2=None, bpt=KV_BPT):
    """The samples one measured arm pass leaves: bench figures, the tier evidence window
    (eviction → end of the measured pass; RDMA bytes = hits × KV bytes per token unless
    given), the flush's reset record, sizing. None leaves a figure out."""
    first = next(ids)
    compare = {"phase": "compare", "arm": arm, "round": str(round_)}
    bench = {**compare, "pass": "measured", "concurrency": "16"}
    windowed = {**compare, "window": window} if window else compare
    if rdma is MISSING:
        rdma = hits * bpt if hits is not None else None
    samples = [Sample(first, "ttft_p50", ttft, "s", bench, node),
               Sample(next(ids), "output_throughput", throughput, "tok/s", bench, node)]
    for metric, value, unit, labels in (
            ("working_set_bytes", working_set, "B", compare),
            ("host_tier_bytes", host_tier, "B", compare),
            ("gpu_kv_tokens", gpu_kv_tokens, "1", compare),
            ("kv_bytes_per_token", bpt, "B", compare),
            ("prefix_cache_reset", reset, "1", compare),
            ("external_prefix_cache_hit_tokens", hits, "1", windowed),
            ("rdma_read_bytes", rdma, "B", windowed),
            ("storage_tier_hit_tokens", l2, "1", windowed)):
        if value is not None:
            samples.append(Sample(next(ids), metric, value, unit, labels, node))
    # A warm-up pass of the same arm never enters the comparison.
    samples.append(Sample(next(ids), "ttft_p50", 149.48, "s", {**bench, "pass": "warmup"}, node))
    return samples


def r2_rounds(**array_changes):
    ids = iter(range(1, 1000))
    return (arm_pass(ids, "local", 1, 17.31, 53.6) + arm_pass(ids, "array", 1, 11.85, 74.9,
                                                             **array_changes)
            + arm_pass(ids, "local", 2, 17.483, 53.06)
            + arm_pass(ids, "array", 2, 12.028, 73.78, **array_changes))


def by(derived, metric, **labels):
    return [d for d in derived
            if d.metric == metric and all(d.labels.get(k) == v for k, v in labels.items())]


def test_it_derives_ttft_reduction_and_throughput_gain_per_round_from_the_measured_passes():
    samples = r2_rounds()
    derived = derive_kv_tier(samples)
    [r1] = by(derived, "ttft_reduction", round="1")
    assert r1.value == pytest.approx(1 - 11.85 / 17.31)  # 0.315 (R2 c16)
    assert r1.labels == {"arm": "array", "baseline": "local", "round": "1", "concurrency": "16"}
    assert r1.node == NODE
    ttft_ids = {s.id for s in samples if s.metric == "ttft_p50" and s.labels["round"] == "1"
                and s.labels["pass"] == "measured"}
    assert ttft_ids <= set(r1.input_ids)  # both arms' TTFT, round 1
    evidence = {s.id for s in samples if s.labels["round"] == "1" and s.metric in (
        "external_prefix_cache_hit_tokens", "working_set_bytes", "host_tier_bytes")}
    assert evidence <= set(r1.input_ids)  # and the tier evidence judged
    [g2] = by(derived, "throughput_gain", round="2")
    assert g2.value == pytest.approx(73.78 / 53.06 - 1)


def test_it_reports_the_mean_of_the_rounds_with_a_t_interval():
    derived = derive_kv_tier(r2_rounds())
    values = [d.value for d in by(derived, "throughput_gain") if d.labels["round"] != "mean"]
    [mean] = by(derived, "throughput_gain", round="mean")
    assert mean.value == pytest.approx(sum(values) / 2)
    assert mean.labels["rounds"] == "2"
    [low] = by(derived, "ci_low", figure="throughput_gain")
    [high] = by(derived, "ci_high", figure="throughput_gain")
    # Two rounds: mean ± t(0.975; 1) · s / √2 = mean ± 12.706 · |r1 − r2| / 2.
    half = 12.706 * abs(values[0] - values[1]) / 2
    assert (low.value, high.value) == (pytest.approx(mean.value - half),
                                       pytest.approx(mean.value + half))
    spec = CriterionSpec("throughput-gain", "throughput_gain", "between", "ratio",
                         threshold=0.29, threshold_high=0.40, above_range_verdict="review",
                         label_filter={"arm": "array", "round": "mean"})
    samples = [Sample(-i, d.metric, d.value, d.unit, d.labels, d.node)
               for i, d in enumerate(derived, start=1)]
    verdict = evaluate_criterion(spec, samples)
    assert verdict.verdict == "pass"
    assert f"95 % CI {low.value:.3g} … {high.value:.3g} over 2 rounds" in verdict.explanation


def test_the_t_interval_uses_student_t_for_small_samples():
    low, high = t_interval([1.0, 2.0, 3.0])  # mean 2, s 1, t(0.975; 2) 4.303
    assert (low, high) == (pytest.approx(2 - 4.303 / 3 ** 0.5),
                           pytest.approx(2 + 4.303 / 3 ** 0.5))
    with pytest.raises(ValueError):
        t_interval([1.0])


def test_an_array_arm_without_external_tier_hits_cannot_count():
    derived = derive_kv_tier(r2_rounds(hits=0))
    [mean] = by(derived, "ttft_reduction", round="mean")
    assert mean.labels["invalid"].startswith("no external-tier hits: the array tier was not used")
    samples = [Sample(-i, d.metric, d.value, d.unit, d.labels, d.node)
               for i, d in enumerate(derived, start=1)]
    spec = CriterionSpec("ttft-reduction", "ttft_reduction", ">=", "ratio", threshold=0.25,
                         label_filter={"arm": "array", "round": "mean"})
    verdict = evaluate_criterion(spec, samples)
    # The figure itself (0.31) would pass: it still cannot count.
    assert verdict.verdict == "insufficient"
    assert "no external-tier hits: the array tier was not used (arm array, round 1 on " \
           "lab-inference-1; window evicted→t1)" in verdict.explanation
    assert gate_outcome([verdict]) == "error"


def test_an_arm_without_a_hit_counter_or_with_a_working_set_inside_dram_cannot_count():
    missing = derive_kv_tier(r2_rounds(hits=None))
    assert "no external-tier hit count" in by(missing, "ttft_reduction", round="1")[0] \
        .labels["invalid"]
    small = derive_kv_tier(r2_rounds(working_set=5.0e10))
    reason = by(small, "throughput_gain", round="mean")[0].labels["invalid"]
    assert ("working set (50.0 GB) is below 2 × (GPU KV 152.4 GB + DRAM tier 69.0 GB) = "
            "442.7 GB") in reason


def test_a_recompute_arm_needs_no_external_hits():
    ids = iter(range(1, 100))
    samples = arm_pass(ids, "local", 1, 17.31, 53.6) + arm_pass(ids, "recompute", 1, 149.48,
                                                                4.1, hits=None)
    [reduction] = by(derive_kv_tier(samples), "ttft_reduction", arm="recompute", round="1")
    assert "invalid" not in reduction.labels
    assert reduction.value == pytest.approx(1 - 149.48 / 17.31)  # 8.6× slower: negative


def test_round_deviation_per_arm_and_figure_and_the_unstable_verdict():
    ids = iter(range(1, 1000))
    samples = (arm_pass(ids, "local", 1, 17.31, 53.6) + arm_pass(ids, "array", 1, 11.85, 74.9)
               + arm_pass(ids, "local", 2, 17.483, 53.06)
               + arm_pass(ids, "array", 2, 12.798, 69.66))
    derived = derive_kv_tier(samples)
    [ttft] = by(derived, "round_deviation", figure="ttft_p50", arm="array")
    # |12.798 − 11.85| ÷ their mean 12.324 (a symmetric base, issue 16)
    assert ttft.value == pytest.approx(0.948 / 12.324)
    assert len(ttft.input_ids) == 2
    spec = CriterionSpec("round-deviation", "round_deviation", "<=", "ratio", threshold=0.05,
                         above_range_verdict="unstable")
    verdict = evaluate_criterion(spec, [Sample(-i, d.metric, d.value, d.unit, d.labels, d.node)
                                        for i, d in enumerate(derived, start=1)])
    assert (verdict.verdict, verdict.measured) == ("unstable", pytest.approx(0.948 / 12.324))
    assert "figure ttft_p50, arm array" in verdict.explanation
    assert gate_outcome([verdict, Verdict("x", "fail", 1.0, "")]) == "error"
    reason = no_decision_reason([verdict])
    assert reason.startswith("unstable: round-deviation:") and "re-run" in reason


def test_an_at_most_criterion_still_fails_by_default():
    spec = CriterionSpec("errors", "job_errors", "<=", "1", threshold=0)
    assert evaluate_criterion(spec, [Sample(1, "job_errors", 2, "1")]).verdict == "fail"


def test_the_aggregate_read_back_is_judged_against_the_array_port_not_the_nodes_nics():
    # Eight planned nodes read 1.375 GB/s each over the same 20 s (per-second RDMA counter
    # series through the real parser); the aggregate is divided by the array's port (12.5 GB/s),
    # never by a node's own NIC.
    nodes = {f"lab-inference-{i}": (1000.0, 20, 1.375e9, 0.0) for i in range(1, 9)}
    samples = samples_of(nodes)
    arrays = {name: ("FX-1", 12.5e9) for name in nodes}
    derived = derive_readback(samples, arrays, ReadbackPlan(8, 10))
    [efficiency] = by(derived, "line_efficiency", scope="aggregate")
    assert efficiency.value == pytest.approx(8 * 1.375e9 / 12.5e9, rel=1e-6)  # 0.88
    assert efficiency.labels["nodes"] == "8" and efficiency.node == ""
    [total] = by(derived, "rx_bandwidth", scope="aggregate")
    assert total.value == pytest.approx(11.0e9, rel=1e-6)
    # A node without an array is left out; no array at all: nothing derived.
    assert derive_readback(samples, {}, ReadbackPlan(8, 10)) == []


def test_no_decision_reason_keeps_the_insufficient_evidence_wording():
    verdicts = [Verdict("a", "insufficient", None, "no measurement of x (needs 1)"),
                Verdict("b", "pass", 1.0, "")]
    assert no_decision_reason(verdicts) == "insufficient evidence: no measurement of x (needs 1)"
