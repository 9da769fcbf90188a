"""The steady-state figures, a pure function: spans around a fault, pre-fault baselines, gaps,
correctness answers — values worked out by hand."""

from dataclasses import replace

import pytest

from runners.parsers import soak_correctness, soak_windows
from runners.soak.steady import (
    Answer,
    Fault,
    FaultOutcome,
    Row,
    Window,
    answers_of,
    decision_figures,
    derive,
    divergence,
    windows_of,
)


def window(i, start, *, failed=0, ttft=1.0, thr=100.0, gap=0.2, completed=10):
    return Window("n1", i, start, start + 1.0, completed, failed, ttft, thr, gap,
                  start + 0.2 if completed else None, start + 0.9 if completed else None,
                  (i,))


def by(figures, metric, phase, figure=None):
    return next(f for f in figures if f.metric == metric and f.labels["phase"] == phase
                and f.labels.get("figure") == figure)


def test_it_splits_the_soak_into_steady_state_and_before_during_after_a_fault():
    # Windows 1–10 at t = 0, 1, … 9; the fault from 4.5 to 6.5 (windows 5, 6, 7 overlap it).
    windows = [window(i, i - 1.0, failed=3 if i in (6, 7) else 0, ttft=2.0 if i == 6 else 1.0,
                      thr=50.0 if i == 6 else 100.0) for i in range(1, 11)]
    figures = derive(windows, [], [Fault("link-down", 4.5, 6.5)], baseline_windows=3,
                     before_s=2.0, after_s=2.0, now=100.0)
    # during: windows 5, 6, 7 → failed 6 of 36 requests
    assert by(figures, "request_error_rate", "during").value == pytest.approx(6 / 36)
    assert by(figures, "request_error_rate", "during").labels == {
        "scope": "fault", "fault": "link-down", "phase": "during"}
    assert by(figures, "request_error_rate", "before").value == 0  # windows 3, 4
    assert by(figures, "request_error_rate", "after").value == 0  # windows 8, 9 (start ≥ 6.5)
    assert by(figures, "request_error_rate", "steady").value == 0  # the fault's windows excluded
    # TTFT: median of the during windows (1, 2, 1) over the before median (1) → 0
    assert by(figures, "baseline_deviation", "during", "ttft_p99").value == pytest.approx(0.0)
    assert by(figures, "baseline_deviation", "during", "output_throughput").value == 0.0


def test_a_lasting_slowdown_against_the_pre_fault_baseline_counts():
    windows = [window(i, i - 1.0, ttft=1.5 if 5 <= i <= 7 else 1.0,
                      thr=80.0 if 5 <= i <= 7 else 100.0) for i in range(1, 11)]
    figures = derive(windows, [], [Fault("drive-out", 4.5, 6.5)], baseline_windows=3,
                     before_s=2.0, after_s=2.0, now=100.0)
    assert by(figures, "baseline_deviation", "during", "ttft_p99").value == pytest.approx(0.5)
    assert by(figures, "baseline_deviation", "during", "output_throughput").value == \
        pytest.approx(-0.2)


def test_the_completion_gap_spans_windows_that_followed_each_other_only():
    # Windows 1 and 2 back to back; window 3 starts 5 s after window 2 ended (an interruption).
    windows = [window(1, 0.0), window(2, 1.0), window(3, 7.0)]
    figures = derive(windows, [], [], baseline_windows=1, before_s=1, after_s=1, now=10.0)
    # 2's last completion 1.9 → 3's first 7.2
    assert by(figures, "completion_gap_max", "steady").value == pytest.approx(5.3)
    # A fault's windows removed from the steady span do not make a gap there.
    windows = [window(i, i - 1.0) for i in range(1, 8)]
    figures = derive(windows, [], [Fault("f", 2.5, 4.5)], baseline_windows=1, before_s=1,
                     after_s=1, now=10.0)
    # (window 2's last 1.9 → window 6's first 5.2 would be 3.3; adjacent windows give 0.3)
    assert by(figures, "completion_gap_max", "steady").value == pytest.approx(0.3)


def test_a_fault_span_without_load_is_invalid_evidence():
    windows = [window(i, i - 1.0) for i in range(1, 4)]
    figures = derive(windows, [], [Fault("late", 50.0, 55.0)], baseline_windows=1,
                     before_s=1, after_s=1, now=60.0)
    during = by(figures, "request_error_rate", "during")
    assert during.labels["invalid"] == "no load window in during of fault window late"


def test_correctness_answers_count_in_the_window_they_came_in():
    windows = [window(i, i - 1.0) for i in range(1, 8)]
    answers = [Answer("n1", 0.5, 0.0, 1), Answer("n1", 3.95, 1.0, 2),  # window 4: during
               Answer("n1", 6.5, 0.0, 3)]
    figures = derive(windows, answers, [Fault("f", 3.5, 4.5)], baseline_windows=1,
                     before_s=1, after_s=1, now=10.0)
    assert by(figures, "probe_mismatches", "during").value == 1
    assert by(figures, "probe_mismatches", "steady").value == 0
    assert by(figures, "probe_mismatches", "during").input_ids == (2,)


def linked(i, start, **kw):
    """``window(i, …)`` whose rows are i·100 + 1 … 5 (completed, failed, TTFT, throughput,
    gap)."""
    ids = tuple(100 * i + k for k in range(1, 6))
    return replace(window(i, start, **kw), ids=ids, metric_ids=ids)


def test_each_figure_links_only_the_rows_it_used():
    # Windows 1–10 at t = 0 … 9; the fault from 4.5 to 6.5: before = 3, 4; during = 5, 6, 7.
    windows = [linked(i, i - 1.0) for i in range(1, 11)]
    figures = derive(windows, [Answer("n1", 4.95, 0.0, 7)], [Fault("link-down", 4.5, 6.5)],
                     baseline_windows=3, before_s=2.0, after_s=2.0, now=100.0)
    assert by(figures, "request_error_rate", "during").input_ids == (
        501, 502, 601, 602, 701, 702)
    assert by(figures, "completion_gap_max", "during").input_ids == (505, 605, 705)
    # a deviation: the span's rows of its figure, then its baseline windows' (pre-fault: 3, 4)
    assert by(figures, "baseline_deviation", "during", "ttft_p99").input_ids == (
        503, 603, 703, 303, 403)
    assert by(figures, "baseline_deviation", "during", "output_throughput").input_ids == (
        504, 604, 704, 304, 404)
    # steady: windows 1–4, 8–10; its baseline (the soak's first 3 windows) each row once
    assert by(figures, "baseline_deviation", "steady", "ttft_p99").input_ids == (
        103, 203, 303, 403, 803, 903, 1003)
    assert by(figures, "probe_mismatches", "during").input_ids == (7,)


def test_a_window_without_its_rows_per_metric_links_every_row_it_came_from():
    windows = [window(i, i - 1.0) for i in range(1, 4)]  # ids (i,), per metric unknown
    figures = derive(windows, [], [], baseline_windows=1, before_s=1, after_s=1, now=10.0)
    assert by(figures, "completion_gap_max", "steady").input_ids == (1, 2, 3)
    assert by(figures, "baseline_deviation", "steady", "ttft_p99").input_ids == (1, 2, 3)


def test_it_says_where_an_answer_diverges():
    assert divergence("the KV cache is read back", "the KV cache is read back") == (0.0, "exact")
    assert divergence("the KV cache is read back", "the KV page is read back") == (
        1.0, "diverges at token 2")
    assert divergence("a b c", "a b") == (1.0, "diverges at token 2")
    assert divergence("a b c", None) == (1.0, "no answer")


# --- the figures G4 is decided on (gates.soak_derivations.decision_figures) -----------------


def test_the_rows_become_windows_and_answers_as_stored():
    labels = {"soak_window": "2", "window_start": "10.000", "first_completion": "10.250",
              "last_completion": ""}
    rows = [Row(7, "n1", "completed_requests", 12.0, {"soak_window": "2"}, 11.0),
            Row(8, "n1", "completion_gap_max", 0.75, labels, 11.0),
            Row(9, "n1", "ttft_p99", 0.3, {"soak_window": "2"}, 11.0),
            Row(10, "n1", "completed_requests", 5.0, {"soak_window": "3"}, 12.0),  # no gap row
            Row(11, "n1", "probe_mismatches", 1.0, {"prompt": "p1"}, 10.5)]
    (w,) = windows_of(rows)
    assert (w.node, w.index, w.start, w.end, w.completed, w.failed) == ("n1", 2, 10.0, 11.0,
                                                                         12.0, 0.0)
    assert (w.ttft_p99, w.output_throughput, w.gap_max) == (0.3, None, 0.75)
    assert (w.first_completion, w.last_completion, w.ids) == (10.25, None, (7, 8, 9))
    assert w.metric_ids == (7, 0, 9, 0, 8)  # completed, failed, TTFT, throughput, gap
    assert answers_of(rows) == [Answer("n1", 10.5, 1.0, 11)]


def test_duration_and_missed_fault_windows_once_the_load_is_over():
    # two nodes: n1's windows 0-1 and 1-2 (2 s real), n2's 0-1.5; 60 plan seconds per real one
    windows = [window(1, 0.0), window(2, 1.0), Window("n2", 1, 0.0, 1.5, 10, 0, 1.0, 100.0,
                                                         0.2, 0.2, 1.4, (5,))]
    outcomes = [FaultOutcome("drive-out", "ctrl", "healed"),
                FaultOutcome("link-down", "n1", "missed", "the service was not attached " * 9)]
    figures = decision_figures(windows, [], [], outcomes, baseline_windows=1, before_s=1,
                               after_s=1, time_compression=60.0)
    durations = {f.node: f for f in figures if f.metric == "soak_duration"}
    assert durations["n1"].value == pytest.approx(120.0)
    assert durations["n1"].labels == {"time_compression": "60", "real_s": "2.0",
                                      "windows": "2"}
    assert durations["n1"].input_ids == (1, 2) and durations["n2"].value == pytest.approx(90.0)
    missed = [f for f in figures if f.metric == "fault_windows_missed"]
    assert [(f.node, f.value, f.labels["state"]) for f in missed] == [
        ("ctrl", 0.0, "healed"), ("n1", 1.0, "missed")]
    assert "reason" not in missed[0].labels and len(missed[1].labels["reason"]) == 120


def test_a_fault_never_healed_counts_until_the_last_window():
    windows = [window(i, i - 1.0, failed=2 if i >= 4 else 0) for i in range(1, 7)]
    figures = decision_figures(windows, [], [Fault("stuck", 3.5, None)],
                               [FaultOutcome("stuck", "n1", "failed", "heal failed")],
                               baseline_windows=1, before_s=1, after_s=1, time_compression=1.0)
    # during: windows 4, 5, 6 (3.0–6.0) → 6 failed of 36; no "after" span without a heal
    assert by(figures, "request_error_rate", "during").value == pytest.approx(6 / 36)
    assert not [f for f in figures if f.labels.get("phase") == "after"]
    # the same as the live figures with "now" at any time after the load
    live = derive(windows, [], [Fault("stuck", 3.5, None)], baseline_windows=1, before_s=1,
                  after_s=1, now=1e9)
    assert [(f.metric, f.labels, f.value) for f in live] == [
        (f.metric, f.labels, f.value) for f in figures if f.labels.get("phase")]


def test_a_window_the_client_failed_counts_its_planned_requests_as_failed():
    line = (b'{"soak_window": 4, "soak_started": 100.0, "soak_ended": 130.0, '
            b'"soak_first_completion": null, "soak_last_completion": null, '
            b'"soak_completion_gap_max_s": 30.0, "soak_error": "connection refused"}\n')
    (record,) = soak_windows.parse(line)
    planned = soak_windows.planned_requests(16.0, 30.0)
    assert planned == 480.0 and soak_windows.planned_requests(0.01, 1.0) == 1.0
    figures = {m.metric: m for m in soak_windows.measurements(record, planned)}
    assert figures["failed_requests"].value == 480.0 and figures["completed_requests"].value == 0
    assert figures["failed_requests"].labels == {"soak_window": "4",
                                                 "client_error": "connection refused"}
    assert figures["completion_gap_max"].labels == {
        "soak_window": "4", "window_start": "100.000", "first_completion": "",
        "last_completion": ""}


def test_a_round_is_judged_against_the_known_good_answers():
    golden = soak_correctness.golden_answers(soak_correctness.parse(
        b'{"soak_round": 0, "t": 1.0, "answers": [{"id": "p1", "text": "a b c"}, '
        b'{"id": "p2", "text": "x"}]}\n')[0])
    (round_,) = soak_correctness.parse(
        b'{"soak_round": 3, "t": 9.5, "answers": [{"id": "p1", "text": "a b d"}, '
        b'{"id": "p2", "text": null, "error": "timeout"}, {"id": "p3", "text": "new"}]}\n')
    rows = soak_correctness.mismatches(round_, golden)
    assert [(m.value, m.labels["prompt"], m.labels["result"]) for m in rows] == [
        (1.0, "p1", "diverges at token 2"), (1.0, "p2", "error: timeout"),
        (1.0, "p3", "error: no known-good answer")]
    assert rows[0].labels["soak_round"] == "3"
