"""Issue 16, exact boundaries: every bound is met with a relative tolerance of 1e-9, figures on
either side are judged as they are, and the measured text has the digits to tell them apart."""

from __future__ import annotations

import pytest

from acceptance.units import measurement_text
from gates.derivations import derive_line_efficiency
from gates.evaluation import REL_TOL, CriterionSpec, Sample, evaluate_criterion, figure_text
from tests.decide.standins import FIO_READ, StandinNode, default_spec


def derived(samples):
    return [*samples, *(Sample(100 + i, d.metric, d.value, d.unit, d.labels, d.node)
                        for i, d in enumerate(derive_line_efficiency(samples)))]


@pytest.mark.parametrize(("read_bandwidth", "verdict"), [
    (10.375e9, "pass"),          # 10.375e9 / 12.5e9 = 0.83 exactly: on the bound
    (10.374e9, "fail"),          # 0.82992
    (10.376e9, "pass"),          # 0.83008
    (10.375e9 * (1 - 1e-6), "fail"),  # one part in a million below is below
])
def test_g2_line_efficiency_on_and_around_83_percent_through_the_standins(
        tmp_path, read_bandwidth, verdict):
    node = StandinNode(tmp_path, "healthy", {"fio": {"read_bandwidth": read_bandwidth}})
    samples = [*node.parsed("ethtool", "ethtool", "ens1f0"),
               *node.parsed("fio", "fio", *FIO_READ, first_id=10)]
    judged = evaluate_criterion(default_spec("G2", "line-efficiency"), derived(samples))
    assert judged.verdict == verdict
    assert judged.measured == pytest.approx(read_bandwidth / 12.5e9, rel=1e-12)


@pytest.mark.parametrize(("ttft_ms", "verdict"), [
    (17310.0 * 1.1, "pass"),     # +10 % exactly (19041.000000000004 ms)
    (19042.0, "fail"),           # +10.006 %
    (19040.0, "pass"),
    (17310.0 * 0.9, "pass"),     # −10 % exactly
    (15578.0, "fail"),           # −10.006 %
])
def test_g2_baseline_ttft_on_and_around_ten_percent_through_the_bench_standin(
        tmp_path, ttft_ms, verdict):
    node = StandinNode(tmp_path, "healthy", {"bench": {"median_ttft_ms": ttft_ms}})
    result = tmp_path / "r"
    done = node.run(
        "vllm", "bench", "serve", "--backend", "openai", "--base-url",
        "http://127.0.0.1:8000", "--model", "m", "--num-prompts", "256", "--max-concurrency",
        "16", "--save-result", "--result-dir", str(result), "--result-filename", "b.json",
        "--metadata", "concurrency=16")
    assert done.returncode == 0, done.stderr
    samples = node.parsed_file("vllm_bench", result / "b.json")
    judged = evaluate_criterion(default_spec("G2", "baseline-ttft"), samples)
    assert judged.verdict == verdict, judged.explanation


def ratio(value, **labels):
    return Sample(1, "throughput_gain", value, "ratio", labels, "gpu-1")


@pytest.mark.parametrize(("array_tok_s", "verdict"), [
    (75.04, "pass"),     # 75.04 / 53.6 − 1 = 0.40000000000000013: on +40 %
    (75.05, "review"),   # +40.019 %: above the reference range
    (75.03, "pass"),
    (69.144, "pass"),    # 69.144 / 53.6 − 1 = 0.29 (0.2900000000000000): on +29 %
    (69.14, "fail"),     # +28.99 %
])
def test_g3_throughput_gain_on_both_ends_of_the_reference_range(array_tok_s, verdict):
    spec = default_spec("G3", "throughput-gain")
    gain = array_tok_s / 53.6 - 1
    judged = evaluate_criterion(spec, [ratio(gain, arm="array", round="mean")])
    assert judged.verdict == verdict, judged.explanation


@pytest.mark.parametrize(("reduction", "verdict", "shown"), [
    (1 - 12.9825 / 17.31, "pass", "0.250 (25.0 %)"),   # 0.25 exactly, computed: on the bound
    (0.2499, "fail", "0.2499 (24.99 %)"),               # not "0.250 (25.0 %) FAIL"
    (0.24999, "fail", "0.24999 (24.999 %)"),
    (0.2501, "pass", "0.2501 (25.01 %)"),
])
def test_g3_ttft_reduction_at_25_percent_and_its_measured_text(reduction, verdict, shown):
    spec = default_spec("G3", "ttft-reduction")
    judged = evaluate_criterion(spec, [Sample(1, "ttft_reduction", reduction, "ratio",
                                              {"arm": "array", "round": "mean"}, "gpu-1")])
    assert judged.verdict == verdict
    assert measurement_text(reduction, "ratio", (spec.threshold,)) == shown
    if verdict == "fail":   # the explanation never prints the failing figure as 0.25 either
        assert "0.25;" not in judged.explanation


def test_a_round_deviation_of_exactly_five_percent_is_stable_and_just_above_unstable():
    spec = default_spec("G3", "round-deviation")
    for value, verdict in ((0.63 / 12.6, "pass"), (0.05 * (1 + 1e-6), "unstable"),
                           (0.0499, "pass")):
        judged = evaluate_criterion(spec, [Sample(1, "round_deviation", value, "ratio",
                                                  {"figure": "ttft_p50"}, "gpu-1")])
        assert judged.verdict == verdict, (value, judged.explanation)


def test_the_tolerance_is_relative_and_stated():
    assert REL_TOL == 1e-9
    at_zero = CriterionSpec("e", "job_errors", "<=", "1", aggregation="sum", threshold=0)
    assert evaluate_criterion(at_zero, [Sample(1, "job_errors", 1e-12, "1")]).verdict == "fail"
    big = CriterionSpec("d", "drive_count", ">=", "1", threshold=1e6)
    assert evaluate_criterion(big, [Sample(1, "drive_count", 1e6 - 1e-4, "1")]).verdict == "pass"
    assert evaluate_criterion(big, [Sample(1, "drive_count", 1e6 - 1e-2, "1")]).verdict == "fail"
    assert figure_text(0.2499999, (0.25,)) == "0.2499999"
    assert figure_text(0.25000000000000006, (0.25,)) == "0.25"
