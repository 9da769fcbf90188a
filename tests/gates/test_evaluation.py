"""The pure evaluation: criteria as data judged on samples."""

import pytest

from gates.derivations import ArrayDrives, derive_array_drives, derive_line_efficiency
from gates.evaluation import (
    CriterionError,
    CriterionSpec,
    Sample,
    evaluate_criterion,
    gate_outcome,
    threshold_text,
)


def sample(i, metric, value, unit="1", node="n1", **labels):
    return Sample(i, metric, value, unit, labels, node)


def test_it_passes_at_least_on_the_threshold_and_fails_below():
    spec = CriterionSpec("drives", "drive_count", ">=", "1", threshold=24)
    assert evaluate_criterion(spec, [sample(1, "drive_count", 24)]).verdict == "pass"
    verdict = evaluate_criterion(spec, [sample(1, "drive_count", 23)])
    assert (verdict.verdict, verdict.measured, verdict.sample_ids) == ("fail", 23, (1,))
    assert verdict.explanation == "measured on n1: 23; required >= 24"


def test_it_judges_each_sample_and_reports_the_worst_node():
    spec = CriterionSpec("eff", "line_efficiency", ">=", "ratio", threshold=0.83)
    samples = [sample(1, "line_efficiency", 0.9, "ratio", "a"),
               sample(2, "line_efficiency", 0.76, "ratio", "b"),
               sample(3, "line_efficiency", 0.85, "ratio", "c")]
    verdict = evaluate_criterion(spec, samples)
    assert (verdict.verdict, verdict.measured, verdict.node) == ("fail", 0.76, "b")
    assert verdict.sample_ids == (1, 2, 3)


def test_it_sums_and_takes_max_as_the_criterion_says():
    failures = CriterionSpec("st", "self_test_failures", "<=", "1", aggregation="sum", threshold=0)
    samples = [sample(i, "self_test_failures", v) for i, v in enumerate([0, 1, 0, 1])]
    assert evaluate_criterion(failures, samples).measured == 2
    warn = CriterionSpec("cw", "critical_warning", "<=", "1", aggregation="max", threshold=0)
    assert evaluate_criterion(warn, [sample(1, "critical_warning", 0),
                                     sample(2, "critical_warning", 4)]).measured == 4


def test_it_computes_the_deviation_from_the_reference_for_within():
    spec = CriterionSpec("ttft", "ttft_p50", "within", "s", reference_value=17.31, tolerance=0.10,
                         label_filter={"concurrency": "16"})
    ok = evaluate_criterion(spec, [sample(1, "ttft_p50", 17.5, "s", concurrency="16")])
    assert ok.verdict == "pass"
    assert ok.deviation == pytest.approx(17.5 / 17.31 - 1)
    off = evaluate_criterion(spec, [sample(1, "ttft_p50", 19.906, "s", concurrency="16")])
    assert off.verdict == "fail"
    assert off.deviation == pytest.approx(0.15, abs=1e-3)
    # The label filter keeps other concurrencies out: none left means no evidence.
    none = evaluate_criterion(spec, [sample(1, "ttft_p50", 17.5, "s", concurrency="8")])
    assert none.verdict == "insufficient" and none.absent
    # the filter in words a reader knows, not a Python dict
    assert none.explanation == "no measurement of ttft_p50 (concurrency=16) (needs 1)"


def test_it_gives_review_above_a_between_range_when_the_criterion_says_so():
    spec = CriterionSpec("gain", "throughput_gain", "between", "ratio", aggregation="min",
                         threshold=0.29, threshold_high=0.40, above_range_verdict="review")
    assert evaluate_criterion(spec, [sample(1, "throughput_gain", 0.35, "ratio")]).verdict == "pass"
    above = evaluate_criterion(spec, [sample(1, "throughput_gain", 0.45, "ratio")])
    assert above.verdict == "review"
    assert evaluate_criterion(spec, [sample(1, "throughput_gain", 0.2, "ratio")]).verdict == "fail"
    assert threshold_text(spec) == "0.29 … 0.4"


def test_it_refuses_a_unit_mismatch_rather_than_compare_apples_and_pears():
    spec = CriterionSpec("ttft", "ttft_p50", "<=", "s", threshold=20)
    verdict = evaluate_criterion(spec, [sample(1, "ttft_p50", 17500, "ms")])
    assert verdict.verdict == "insufficient"
    assert "['ms']" in verdict.explanation


def test_it_rejects_inconsistent_criterion_data():
    with pytest.raises(CriterionError, match="needs"):
        evaluate_criterion(CriterionSpec("x", "m", "between", "1", threshold=1), [])
    with pytest.raises(CriterionError, match="unknown operator"):
        evaluate_criterion(CriterionSpec("x", "m", "==", "1", threshold=1), [])


def test_it_decides_the_gate_from_the_verdicts():
    from gates.evaluation import Verdict

    def v(kind):
        return Verdict("k", kind, 1.0, "")

    assert gate_outcome([v("pass"), v("pass")]) == "passed"
    assert gate_outcome([v("pass"), v("fail")]) == "stopped"
    # Evidence that cannot count (invalid, wrong unit) beside a failure: no decision.
    assert gate_outcome([v("fail"), v("insufficient")]) == "error"
    # A failure stops the gate where other criteria have nothing measured at all (0 of 24
    # drives: no self-test to read); what is missing is recorded as insufficient data.
    absent = Verdict("k", "insufficient", None, "no measurement", absent=True)
    assert gate_outcome([v("fail"), absent]) == "stopped"
    assert gate_outcome([v("pass"), absent]) == "error"
    assert gate_outcome([v("fail"), absent, v("insufficient")]) == "error"
    assert gate_outcome([Verdict("u", "unstable", 1.0, ""), v("fail"), absent]) == "error"
    assert gate_outcome([v("pass"), v("review")]) == "review"
    # An advisory (non-blocking) criterion never stops the gate.
    assert gate_outcome([Verdict("a", "fail", 1.0, "")], {"a": False}) == "passed"


def test_it_derives_line_efficiency_per_node_from_bandwidth_and_link_speed():
    samples = [sample(1, "read_bandwidth", 11.0e9, "B/s", "a", job="seqread"),
               sample(2, "link_speed", 12.5e9, "B/s", "a", interface="ens1f0"),
               sample(3, "read_bandwidth", 9.0e9, "B/s", "b", job="seqread")]
    derived = derive_line_efficiency(samples)
    assert len(derived) == 1  # node b has no link speed: nothing guessed
    assert derived[0].value == pytest.approx(0.88)
    assert derived[0].input_ids == (1, 2)
    # No array named: the node's own NIC is the link, and the labels say so.
    assert derived[0].labels == {
        "job": "seqread", "interface": "ens1f0", "link": "node NIC",
        "detail": "fio read 11.00 GB/s on a ÷ the node's NIC ens1f0 at 100000 Mb/s (12.50 GB/s)"}


def test_a_controller_without_drives_says_so_not_model_quote_quote():
    plans = {"ctl-1": ArrayDrives("fx100-a", "", 24)}
    # a run without the controller's drive inventory (G2's fio run) counts nothing
    assert derive_array_drives([sample(1, "line_efficiency", 0.9, "ratio", "ctl-1")], plans) == []
    # the inventory ran and listed no drive: 0 counted
    listed = [sample(2, "drive_count", 0, node="ctl-1"), sample(3, "namespace_count", 0,
                                                                node="ctl-1")]
    derived = derive_array_drives(listed, plans)
    assert [(d.metric, d.value) for d in derived] == [("drive_count", 0.0)]
    assert derived[0].labels["detail"] == ("array fx100-a: no drive seen on its controller, 24 "
                                           "expected (the array names no drive model)")
