"""The steady-state figures, a pure function: spans around a fault, pre-fault baselines, gaps,
correctness answers — values worked out by hand."""

import pytest

from runners.soak.steady import Answer, Fault, Window, derive, divergence


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


def test_it_says_where_an_answer_diverges():
    assert divergence("the KV cache is read back", "the KV cache is read back") == (0.0, "exact")
    assert divergence("the KV cache is read back", "the KV page is read back") == (
        1.0, "diverges at token 2")
    assert divergence("a b c", "a b") == (1.0, "diverges at token 2")
    assert divergence("a b c", None) == (1.0, "no answer")
