"""What a criterion measured against what, in plain words (gates.plain): figures worked by hand
from R2's concurrency-16 row (DOMAIN.md), the G2 line efficiency against an array's port, a
reference within ±10 %, a count, and the sources as a reader of the report sees them."""

from __future__ import annotations

import pytest
from django.utils import translation

from gates.defaults import DEFAULT_GATES
from gates.plain import (
    NBSP,
    Figure,
    headline,
    percent,
    plain_sentence,
    reports_named,
    source_words,
)


@pytest.fixture(autouse=True)
def english():
    """English unless a test says otherwise: an earlier test's request may leave another
    language active in this thread."""
    with translation.override("en"):
        yield


CRITERIA = {c["key"]: {**c, "requirement": ""} for g in DEFAULT_GATES for c in g["criteria"]}


def _plain(text: str) -> str:
    return text.replace(NBSP, " ")


def _arms(metric, unit, rounds):
    """The inputs of a G3 mean: each round's figure of both arms (as gates.derivations)."""
    return tuple(Figure(metric, value, unit, {"arm": arm, "round": str(n)}, "lab-inference-1")
                 for n, pair in enumerate(rounds, start=1)
                 for arm, value in zip(("local", "array"), pair, strict=True))


def _mean(metric, value, inputs, rounds=2):
    return Figure(metric, value, "ratio", {"arm": "array", "baseline": "local", "round": "mean",
                                           "rounds": str(rounds), "concurrency": "16"},
                  "lab-inference-1", inputs)


def test_the_ttft_reduction_says_both_arms_in_seconds_beside_the_ratio():
    # R2 c16: 11.85 s vs 17.31 s; round 2 12.028 s vs 17.31 s. Means 11.939 s and 17.31 s;
    # reductions 0.31542 and 0.30514, their mean 0.31028 → −31 %.
    inputs = _arms("ttft_p50", "s", [(17.31, 11.85), (17.31, 12.028)])
    reduction = ((1 - 11.85 / 17.31) + (1 - 12.028 / 17.31)) / 2
    text = plain_sentence(snapshot=CRITERIA["ttft-reduction"], description="…",
                          measured=reduction, unit="ratio",
                          figures=[_mean("ttft_reduction", reduction, inputs)])
    assert _plain(text) == ("TTFT p50 11.9 s with the array vs 17.3 s on local NVMe (−31 %); "
                            "required: at least −25 % (mean of 2 rounds)")
    assert f"11.9{NBSP}s" in text and f"−25{NBSP}%" in text  # a line never ends between them


def test_the_throughput_gain_says_tokens_per_second_and_the_range():
    inputs = _arms("output_throughput", "tok/s", [(53.6, 74.9)])
    gain = 74.9 / 53.6 - 1  # 0.39739: "+40 %" would read as the bound itself, so +39.7 %
    text = plain_sentence(snapshot=CRITERIA["throughput-gain"], description="…", measured=gain,
                          unit="ratio",
                          figures=[_mean("throughput_gain", gain, inputs, rounds=1)])
    assert _plain(text) == ("Output throughput 74.9 tok/s with the array vs 53.6 tok/s on "
                            "local NVMe (+39.7 %); required: +29 % … +40 %")


def test_a_change_that_rounds_onto_its_bound_gets_a_decimal():
    # 0.2496 would print "−25 %" beside "at least −25 %" although it fails: one more digit.
    inputs = _arms("ttft_p50", "s", [(20.0, 15.008)])
    text = plain_sentence(snapshot=CRITERIA["ttft-reduction"], description="…",
                          measured=0.2496, unit="ratio",
                          figures=[_mean("ttft_reduction", 0.2496, inputs, rounds=1)])
    assert _plain(text) == ("TTFT p50 15.0 s with the array vs 20.0 s on local NVMe "
                            "(−24.96 %); required: at least −25 %")


def test_line_efficiency_against_the_array_port_in_gb_per_second():
    read = Figure("read_bandwidth", 10.6e9, "B/s", {}, "lab-inference-1")
    nic = Figure("link_speed", 12.5e9, "B/s", {"interface": "eth0"}, "lab-inference-1")
    figure = Figure("line_efficiency", 10.6e9 / 12.5e9, "ratio",
                    {"link": "array FX-1 port"}, "lab-inference-1", (read, nic))
    text = plain_sentence(snapshot=CRITERIA["line-efficiency"], description="…",
                          measured=figure.value, unit="ratio", figures=[figure])
    assert _plain(text) == ("Sequential read 10.60 GB/s on lab-inference-1 against the array "
                            "port's line rate of 12.50 GB/s (85 %); required: at least 83 %")


def test_the_shared_read_back_sums_the_nodes_against_the_array_port():
    nodes = tuple(Figure("rx_bandwidth", 1.375e9, "B/s", {"phase": "readback"},
                         f"lab-inference-{i}") for i in range(1, 9))
    figure = Figure("line_efficiency", 11.0e9 / 12.5e9, "ratio",
                    {"scope": "aggregate", "array": "FX-1", "nodes": "8",
                     "array_line_rate": "12500000000"}, "", nodes)
    text = plain_sentence(snapshot=CRITERIA["readback-efficiency"], description="…",
                          measured=figure.value, unit="ratio", figures=[figure])
    assert _plain(text) == ("8 nodes together read 11.00 GB/s from array FX-1, against its "
                            "port's line rate of 12.50 GB/s (88 %); required: at least 83 %")


def test_the_worst_node_is_said_with_how_many_were_judged():
    figures = [Figure("line_efficiency", share, "ratio", {"link": "node NIC"}, node,
                      (Figure("read_bandwidth", share * 12.5e9, "B/s", {}, node),
                       Figure("link_speed", 12.5e9, "B/s", {}, node)))
               for node, share in (("n1", 0.9), ("n2", 0.8))]
    text = plain_sentence(snapshot=CRITERIA["line-efficiency"], description="…", measured=0.8,
                          unit="ratio", figures=figures)
    assert _plain(text) == ("Sequential read 10.00 GB/s on n2 against its network card's line "
                            "rate of 12.50 GB/s (80 %); required: at least 83 % (lowest of 2)")


def test_a_figure_against_its_reference():
    text = plain_sentence(snapshot=CRITERIA["baseline-ttft"], description="…", measured=17.9,
                          unit="s", figures=[Figure("ttft_p50", 17.9, "s")])
    # 17.9 ÷ 17.31 − 1 = +3.4 %
    assert _plain(text) == ("TTFT p50 17.9 s vs the reference 17.3 s (+3.4 %); required: within "
                            "±10 % of 17.3 s")


def test_a_count_says_the_description_and_the_bound():
    text = plain_sentence(snapshot=CRITERIA["drive-count"], description="All drives recognised",
                          measured=23, unit="1")
    assert text == "All drives recognised: 23; required: at least 24"
    nothing = plain_sentence(snapshot=CRITERIA["drive-count"], description="All drives",
                             measured=None, unit="1")
    assert nothing == "All drives: not measured; required: at least 24"


def test_a_count_that_must_be_zero_names_what_is_counted():
    # G1's BOM criterion: its description ("Every … item delivered and ticked") beside "0" read
    # as if no item was delivered; the figure's own name says what the 0 counts
    text = plain_sentence(snapshot=CRITERIA["bom-complete"], description="Every item ticked",
                          measured=0, unit="1")
    assert text == ("Bill-of-materials items not yet delivered and ticked: 0; required: 0 (none "
                    "allowed)")
    two = plain_sentence(snapshot=CRITERIA["self-test"], description="…", measured=2, unit="1")
    assert two == "Drives whose self-test did not complete and pass: 2; required: 0 (none allowed)"
    with translation.override("zh-hans"):
        chinese = plain_sentence(snapshot=CRITERIA["bom-complete"], description="…",
                                 measured=1, unit="1")
    assert chinese == "尚未交付并勾选的物料清单项：1；要求：0（一个也不允许）"
    absent = plain_sentence(snapshot=CRITERIA["self-test"], description="Every drive passed",
                            measured=None, unit="1")
    assert absent == "Every drive passed: not measured; required: 0 (none allowed)"


def test_the_sentence_reads_in_simplified_chinese():
    inputs = _arms("output_throughput", "tok/s", [(53.6, 74.9)])
    gain = 74.9 / 53.6 - 1
    with translation.override("zh-hans"):
        text = plain_sentence(snapshot=CRITERIA["throughput-gain"], description="…",
                              measured=gain, unit="ratio",
                              figures=[_mean("throughput_gain", gain, inputs, rounds=1)])
        named = reports_named(["R2: +29 %"])
    assert _plain(text) == ("输出吞吐量：使用存储阵列 74.9 tok/s，本地 NVMe 53.6 tok/s（+39.7 %）；"
                            "要求：+29 % … +40 %")
    assert named == ["R2：FX100 KV Cache 性能测试报告，480B TP8，2026-07-05"]


def test_page_one_leads_with_comparisons_and_checks_not_met():
    assert headline(CRITERIA["ttft-reduction"], "pass")
    assert headline(CRITERIA["baseline-ttft"], "pass")
    assert not headline(CRITERIA["drive-count"], "pass")
    assert headline(CRITERIA["drive-count"], "fail")
    assert not headline(CRITERIA["round-deviation"], "pass")


@pytest.mark.parametrize("source, shown", [
    ("DOMAIN.md G1: BOM checklist ticked by the PM", "BOM checklist ticked by the PM"),
    ("RUNBOOK §3.2: a failed fio job cannot count", "A failed fio job cannot count"),
    ("fio: a job that reads the array", "fio: a job that reads the array"),
    ("vllm bench serve: its median TTFT", "vllm bench serve: its median TTFT"),
    ("DOMAIN.md G3; R2: −26 % … −32 %", "R2: −26 % … −32 %"),
    ("DOMAIN.md repeatability; R3: two rounds within 5 %", "R3: two rounds within 5 %"),
    ("issue 16: vLLM's TTFT counts successful requests only",
     "vLLM's TTFT counts successful requests only"),
    ("issue 7 §2: TTFT p99 within set bounds (RUNBOOK §5.1 p99_ttft_ms per window)",
     "TTFT p99 within set bounds"),
    ("DOMAIN.md G4: no impact; RUNBOOK §5.1 error rate = failed ÷ all", "No impact"),
    ("R2: FX100 KV Cache performance test report, 480B TP8",
     "R2: FX100 KV Cache performance test report, 480B TP8"),
    ("DOMAIN.md G1：物料清单由项目经理勾选", "物料清单由项目经理勾选"),
])
def test_sources_name_no_internal_document(source, shown):
    assert source_words(source) == shown


def test_every_default_source_reads_without_internal_documents():
    for criterion in CRITERIA.values():
        shown = source_words(criterion["source"])
        assert shown and not any(word in shown for word in ("DOMAIN", "RUNBOOK", "METRICS",
                                                            "issue ")), shown


def test_small_percentages_keep_a_decimal_whole_ones_do_not():
    # G3's round deviation 0.015 was "2 %" on page 1 beside "0.015" in the criteria table
    assert [_plain(percent(v)) for v in (0.015, 0.05, 0.31, -0.034, 0.0)] == [
        "1.5 %", "5 %", "31 %", "−3.4 %", "0 %"]
