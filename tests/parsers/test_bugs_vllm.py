"""BUGS.md #14-#15 (vLLM ``benchmark_serving.py`` / ``vllm bench serve`` saved results).

vLLM is not installed here (no GPU); results are built field by field from the result dict of
``benchmark_serving.py`` (``--save-result --save-detailed``: ``ttfts``, ``itls`` and ``errors``
over *all* requests, ``[output.ttft for output in outputs]``; aggregates over the successful ones,
``np.percentile(ttfts, p) * 1000``), each expected value derived beside it."""

import json
import random
import statistics

import pytest

from runners.parsers import vllm_bench
from runners.parsers.base import ParseError
from runners.parsers.vllm_bench import percentile
from tests.parsers.corpus import by_metric

# Five requests, the third failed (PR #5895: "Never received a valid chunk to calculate TTFT"),
# its ttft left at the default 0.0 and its itl []. Successful TTFTs (s), sorted:
#   [0.377, 0.412, 0.559, 0.801]                                 n = 4
# --metric-percentiles 25,50,75: vLLM saves p25/p50/p75 keys, and mean/median/std always.
#   median = (0.412 + 0.559) / 2 = 0.4855 s → 485.5 ms; mean = 2.149 / 4 = 0.53725 s → 537.25 ms
DETAILED = {
    "date": "20250412-101500", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 5, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 4,
    "duration": 3.2, "completed": 4, "total_input_tokens": 4000, "total_output_tokens": 512,
    "request_throughput": 1.25, "request_goodput:": None, "output_throughput": 160.0,
    "total_token_throughput": 1410.0,
    "input_lens": [1000, 1000, 1000, 1000, 1000], "output_lens": [128, 128, 0, 128, 128],
    "ttfts": [0.377, 0.559, 0.0, 0.412, 0.801],
    "itls": [[0.02, 0.03], [0.025], [], [0.04], [0.01, 0.05]],
    "generated_texts": ["a", "b", "", "c", "d"],
    "errors": ["", "", "Never received a valid chunk to calculate TTFT.", "", ""],
    "mean_ttft_ms": 537.25, "median_ttft_ms": 485.5, "std_ttft_ms": 163.2,
    "p25_ttft_ms": 403.25, "p50_ttft_ms": 485.5, "p75_ttft_ms": 619.5,
    "mean_tpot_ms": 12.0, "median_tpot_ms": 12.0, "p25_tpot_ms": 11.0, "p75_tpot_ms": 13.0,
    "mean_itl_ms": 29.17, "median_itl_ms": 27.5, "p25_itl_ms": 21.25, "p75_itl_ms": 37.5,
}


def parse(doc):
    return by_metric(vllm_bench.parse(json.dumps(doc).encode()))


def refusal(doc):
    with pytest.raises(ParseError) as error:
        vllm_bench.parse(json.dumps(doc).encode())
    return str(error.value)


# --- #14 vllm PR #14879, #15794, #15793 / PR #15795, PR #32667, InferenceX PR #1705 ---------------

def test_p99_missing_from_the_percentiles_is_derived_from_the_lists():
    m = parse(DETAILED)
    # p99: rank (4 − 1) × 0.99 = 2.97 between 0.559 and 0.801, t = 0.97:
    #      0.801 − (0.801 − 0.559) × 0.03 = 0.79374 s
    assert m["ttft_p99"].value == pytest.approx(0.79374, rel=1e-12)
    # p90: rank 2.7, t = 0.7: 0.801 − 0.242 × 0.3 = 0.7284 s
    assert m["ttft_p90"].value == pytest.approx(0.7284, rel=1e-12)
    # the keys that are there win: median 485.5 ms, mean 537.25 ms
    assert m["ttft_p50"].value == pytest.approx(0.4855) and m["ttft_mean"].value == 0.53725
    # ITL: successful gaps [0.02, 0.03, 0.025, 0.04, 0.01, 0.05] sorted
    #      [0.01, 0.02, 0.025, 0.03, 0.04, 0.05], rank 5 × 0.99 = 4.95, t = 0.95:
    #      0.05 − 0.01 × 0.05 = 0.0495 s
    assert m["itl_p99"].value == pytest.approx(0.0495, rel=1e-12)
    assert m["ttft_p99"].unit == "s"
    # completeness: 4 of 5 (no "failed" key in this version: 5 − 4 = 1)
    assert m["completed_requests"].value == 4 and m["failed_requests"].value == 1
    assert "tpot_p99" not in m  # not derivable: per-request latencies are not saved


def test_without_lists_a_missing_p99_is_absent_never_0():
    doc = {k: v for k, v in DETAILED.items()
           if k not in ("ttfts", "itls", "errors", "generated_texts", "input_lens", "output_lens")}
    m = parse(doc)
    assert "ttft_p99" not in m and "itl_p99" not in m and "ttft_p90" not in m
    assert m["ttft_p50"].value == pytest.approx(0.4855)


def test_p99_9_keys_are_not_p99():
    # --metric-percentiles 90,99.9: keys "p90_ttft_ms" and "p99.9_ttft_ms" (a dot in the key)
    doc = {"num_prompts": 40, "completed": 40, "mean_ttft_ms": 330.8, "median_ttft_ms": 300.0,
           "p90_ttft_ms": 797.8, "p99.9_ttft_ms": 1082.8}
    m = parse(doc)
    assert m["ttft_p90"].value == pytest.approx(0.7978) and "ttft_p99" not in m


def test_without_errors_the_lists_count_when_they_hold_exactly_the_completed_requests():
    doc = dict(DETAILED, ttfts=[0.377, 0.559, 0.412, 0.801],
               itls=[[0.02, 0.03], [0.025], [0.04], [0.01, 0.05]], num_prompts=4)
    del doc["errors"]
    assert parse(doc)["ttft_p99"].value == pytest.approx(0.79374, rel=1e-12)
    # 5 entries for 4 completed and no errors list: which succeeded is unknown → nothing derived
    doc = dict(DETAILED)
    del doc["errors"]
    assert "ttft_p99" not in parse(doc)


def test_keys_without_a_unit_suffix_are_not_read_as_milliseconds():
    # InferenceX post-processing drops "_ms" and stores seconds: unknown producer, not read
    doc = {"num_prompts": 4, "completed": 4, "mean_ttft": 0.3308, "median_ttft": 0.3,
           "p99_ttft": 1.08}
    m = parse(doc)
    assert set(m) == {"completed_requests", "failed_requests"}


def test_json_lines_of_appended_results_are_each_read():
    line = json.dumps({"num_prompts": 10, "completed": 10, "median_ttft_ms": 52.9,
                       "request_rate": "inf", "request_goodput:": None})
    measurements = vllm_bench.parse((line + "\n" + line + "\n").encode())
    assert [m.labels["result"] for m in measurements if m.metric == "ttft_p50"] == ["0", "1"]


@pytest.mark.parametrize("percent", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_the_percentile_is_numpys_linear_method(percent):
    # numpy.percentile's default ("linear") is the "inclusive" method of statistics.quantiles
    values = [random.Random(seed).lognormvariate(-1, 1) for seed in range(257)]
    if percent in (0, 100):
        assert percentile(values, percent) == (min(values) if percent == 0 else max(values))
    elif percent == 99.9:
        ordered = sorted(values)  # rank 256 × 0.999 = 255.744
        expected = ordered[255] + (ordered[256] - ordered[255]) * 0.744
        assert percentile(values, percent) == pytest.approx(expected, rel=1e-12)
    else:
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        assert percentile(values, percent) == pytest.approx(cuts[int(percent) - 1], rel=1e-12)
    assert percentile([3.0], 99) == 3.0  # num_prompts 1: every percentile is the value


# --- #15 vllm#6064, PR #5895, PR #26478; InferenceX #339, #357 ------------------------------------

def test_a_median_ttft_of_0_with_completed_requests_is_a_broken_run():
    doc = {"request_rate": "inf", "num_prompts": 900, "completed": 900, "request_goodput:": None,
           "median_ttft_ms": 0.0, "mean_ttft_ms": 0.0, "p99_ttft_ms": 0.0}
    message = refusal(doc)
    assert message.startswith("vllm_bench: line 1: expected a possible ")
    assert "ttft_ms = 0" in message and "no valid token" in message


def test_a_successful_request_with_ttft_0_in_the_list_is_a_broken_run():
    doc = dict(DETAILED, ttfts=[0.377, 0.0, 0.0, 0.412, 0.801])  # request 1 succeeded with 0
    message = refusal(doc)
    assert "ttfts = 0" in message and "successful request 1" in message


def test_failed_requests_are_counted_from_failed_or_num_prompts():
    m = parse(dict(DETAILED, failed=1))  # PR #26478 (Oct 2025) saves "failed"
    assert m["failed_requests"].value == 1
    assert "at most num_prompts (5)" in refusal(dict(DETAILED, completed=6))


def test_a_negative_latency_is_refused():
    assert "mean_tpot_ms = -12" in refusal(dict(DETAILED, mean_tpot_ms=-12.0))
