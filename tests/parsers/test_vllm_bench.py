"""vllm_bench parser: saved results of ``vllm bench serve`` / ``benchmark_serving.py``, one object
or JSON Lines; milliseconds → seconds."""

import json

import pytest

from runners.parsers import vllm_bench
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, needs_corpus

VLLM = CORPUS / "vllm"

NEW = {
    "date": "20260301-101500", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "m", "tokenizer_id": "m", "num_prompts": 256, "request_rate": "inf",
    "burstiness": 1.0, "max_concurrency": 16, "duration": 120.5, "completed": 250, "failed": 6,
    "total_input_tokens": 100, "total_output_tokens": 64000, "request_throughput": 2.07,
    "request_goodput": None, "output_throughput": 531.1, "total_token_throughput": 6000.5,
    "mean_ttft_ms": 812.0, "median_ttft_ms": 700.0, "std_ttft_ms": 10.0, "p50_ttft_ms": 701.0,
    "p90_ttft_ms": 1500.0, "p99_ttft_ms": 2500.0, "mean_tpot_ms": 20.0, "median_tpot_ms": 19.0,
    "p99_tpot_ms": 35.0, "mean_itl_ms": 21.0, "p99_itl_ms": 60.0,
    "gate": "G2", "arm": "local", "concurrency": "16",
}


def values(raw):
    return {(m.metric, m.labels.get("result")): m for m in vllm_bench.parse(raw)}


def single(raw):
    return {metric: m for (metric, _), m in values(raw).items()}


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_saved_result_with_kept_input_lens():
    m = single((VLLM / "benchmark_serving-qwen3.5-397b-mtp-conc64-itl-gt-tpot-input_lens-kept.json")
               .read_bytes())
    assert m["ttft_p50"].value == pytest.approx(398.7352500553243 / 1000)
    assert m["ttft_p90"].value == pytest.approx(1280.1106976694427 / 1000)
    assert m["ttft_p99"].value == pytest.approx(9947.031967156803 / 1000)
    assert m["ttft_mean"].value == pytest.approx(968.4443868594826 / 1000)
    assert m["tpot_mean"].value == pytest.approx(32.20908514635708 / 1000)
    assert m["tpot_p99"].value == pytest.approx(41.355680648257774 / 1000)
    assert m["itl_p99"].value == pytest.approx(564.3211746169254 / 1000)
    assert m["output_throughput"].value == pytest.approx(1865.520522185723)
    assert m["total_token_throughput"].value == pytest.approx(16866.643107207525)
    assert m["request_throughput"].value == pytest.approx(2.030146359303085)
    assert m["completed_requests"].value == 640
    assert m["failed_requests"].value == 0  # no "failed" key: num_prompts 640 − completed 640
    assert m["ttft_p50"].unit == "s"
    assert m["output_throughput"].unit == "tok/s"
    assert m["request_throughput"].unit == "1/s"
    assert m["ttft_p50"].labels == {"concurrency": "64"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_an_indented_fork_result_without_p90():
    m = single((VLLM / "vllm-ascend-fork-benchmark_serving-openai-chat-num_prompts1-indented.json")
               .read_bytes())
    assert m["ttft_p50"].value == pytest.approx(3084.672325756401 / 1000)
    assert m["ttft_p99"].value == pytest.approx(3084.672325756401 / 1000)
    assert "ttft_p90" not in m
    assert m["tpot_mean"].value == pytest.approx(60.41639638903866 / 1000)
    assert m["itl_p99"].value == pytest.approx(79.78791979607195 / 1000)
    assert m["output_throughput"].value == pytest.approx(12.190653028912488)
    assert m["completed_requests"].value == 1
    assert m["failed_requests"].value == 0
    assert m["completed_requests"].labels == {"concurrency": "unbounded"}  # max_concurrency null


@needs_corpus
@pytest.mark.corpus
def test_it_reads_every_line_of_appended_results():
    v = values((VLLM / "vllm-benchmark_serving-0.9-era-append-jsonl-rate-inf-string-goodput-colon"
                ".jsonl").read_bytes())
    assert {index for (_, index) in v} == {str(i) for i in range(9)}
    assert v[("completed_requests", "0")].value == 300
    assert v[("ttft_p50", "0")].value == pytest.approx(52.868896000063614 / 1000)
    assert v[("ttft_p99", "0")].value == pytest.approx(98.69780922984769 / 1000)
    assert v[("output_throughput", "0")].value == pytest.approx(2258.212337970085)
    assert v[("completed_requests", "2")].value == 900  # request_rate "inf"
    assert v[("ttft_p50", "2")].value == pytest.approx(4066.1594384998807 / 1000)
    assert v[("request_throughput", "2")].value == pytest.approx(31.183176225808488)
    assert v[("tpot_p99", "8")].value == pytest.approx(71.62702592521168 / 1000)
    assert v[("itl_p99", "8")].value == pytest.approx(67.51899562010284 / 1000)
    assert v[("failed_requests", "8")].value == 0  # 900 − 900
    assert ("ttft_p90", "0") not in v
    assert v[("ttft_p50", "5")].labels == {"concurrency": "unbounded", "result": "5"}


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", [
    "lmcache-long_doc_qa-async-20260323-summary.json",
    "lmcache-long_doc_qa-layerwise-20260725-summary.json",
    "vllm-nightly-benchmarks-summary-table-json-deepseek-v2.5.json",
])
def test_it_rejects_documents_that_are_not_bench_results(name):
    with pytest.raises(ParseError):
        vllm_bench.parse((VLLM / name).read_bytes())


# --- quirks -------------------------------------------------------------------------------------


def test_it_reads_the_new_client_with_failed_and_metadata():
    m = single(json.dumps(NEW).encode())
    assert m["failed_requests"].value == 6
    assert m["completed_requests"].value == 250
    assert m["ttft_p50"].value == pytest.approx(0.7)  # median_ttft_ms preferred to p50_ttft_ms
    assert m["ttft_p90"].value == pytest.approx(1.5)
    assert m["ttft_p50"].labels == {"concurrency": "16", "arm": "local"}


def test_it_falls_back_to_p50_when_median_is_absent():
    doc = {k: v for k, v in NEW.items() if k != "median_ttft_ms"}
    assert single(json.dumps(doc).encode())["ttft_p50"].value == pytest.approx(0.701)


def test_it_skips_missing_ttft_keys_instead_of_reporting_zero():
    doc = {k: v for k, v in NEW.items() if "ttft" not in k}
    m = single(json.dumps(doc).encode())
    assert not {"ttft_p50", "ttft_p90", "ttft_p99", "ttft_mean"} & set(m)
    assert m["tpot_mean"].value == pytest.approx(0.02)


def test_it_skips_nan_null_and_inf_figures():
    doc = {**NEW, "p99_ttft_ms": float("nan"), "p90_ttft_ms": None, "p99_itl_ms": "inf",
           "request_rate": "inf", "request_goodput:": None}
    m = single(json.dumps(doc).encode())  # json.dumps writes a bare NaN
    assert not {"ttft_p99", "ttft_p90", "itl_p99"} & set(m)
    assert m["ttft_p50"].value == pytest.approx(0.7)


def test_it_accepts_numeric_strings_and_names_garbage():
    m = single(json.dumps({**NEW, "output_throughput": "531.1"}).encode())
    assert m["output_throughput"].value == pytest.approx(531.1)
    with pytest.raises(ParseError) as error:
        vllm_bench.parse(json.dumps({**NEW, "mean_tpot_ms": "fast"}).encode())
    assert "mean_tpot_ms" in str(error.value)


def test_it_labels_fractional_and_missing_concurrency():
    assert single(json.dumps({**NEW, "max_concurrency": 32.0}).encode())[
        "completed_requests"].labels["concurrency"] == "32"
    doc = {k: v for k, v in NEW.items() if k not in ("max_concurrency", "arm")}
    assert single(json.dumps(doc).encode())["completed_requests"].labels == {
        "concurrency": "unbounded"}


def test_it_reports_the_line_of_a_truncated_last_result():
    lines = [json.dumps(NEW), json.dumps(NEW), json.dumps(NEW)[:200]]
    with pytest.raises(ParseError) as error:
        vllm_bench.parse("\n".join(lines).encode())
    assert error.value.line == 3


def test_it_requires_completed():
    doc = {k: v for k, v in NEW.items() if k != "completed"}
    with pytest.raises(ParseError) as error:
        vllm_bench.parse(json.dumps(doc).encode())
    assert "completed" in str(error.value)


@pytest.mark.parametrize("raw", [b"", b"\n \n", b"============ Serving Benchmark Result ====\n"])
def test_it_rejects_empty_or_text_output(raw):
    with pytest.raises(ParseError):
        vllm_bench.parse(raw)
