"""The live span figures (``gates.soak_live``: each window and answer folded in once) equal the
from-scratch ones (``gates.soak_derivations.derive``) on the same inputs, whatever order the
windows and answers arrive in and however they are cut into ticks — a property over random
soaks — and the cases that motivated each part, worked by hand."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gates.soak_derivations import Answer, Fault, Window, derive
from gates.soak_live import LiveSpans, live_spans

NODES = ("n1", "n2")


def bare(figures):
    return [replace(f, input_ids=()) for f in figures]


def scratch(windows, answers, faults, now, **spans):
    """``derive`` as the service calls it: windows in (node, index) order, answers by id."""
    return bare(derive(sorted(windows, key=lambda w: (w.node, w.index)),
                       sorted(answers, key=lambda a: a.id), faults, now=now, **spans))


@st.composite
def soaks(draw):
    """Windows (indexes with holes, starts that tie or run out of order, failed windows
    without completions), answers (some before any window, some on a window's start), faults
    (healed or still on), the derivation's spans, the arrival order cut into ticks, and
    ``now`` (sometimes before the last windows: a node clock ahead of the service's)."""
    windows = []
    for node in NODES:
        indexes = draw(st.lists(st.integers(1, 14), max_size=12, unique=True))
        for index in indexes:
            start = index * 2.0 + draw(st.sampled_from([0.0, 0.0, 0.0, 0.5, -1.0, -2.0, 3.0]))
            length = draw(st.sampled_from([1.0, 2.0, 2.5]))
            completed = draw(st.sampled_from([0.0, 3.0, 10.0, 16.0]))
            failed = draw(st.sampled_from([0.0, 0.0, 1.0, 4.0]))
            done = completed > 0
            windows.append(Window(
                node, index, start, start + length, completed, failed,
                draw(st.one_of(st.none(), st.sampled_from([0.3, 0.31, 0.45, 1.2]))),
                draw(st.one_of(st.none(), st.sampled_from([0.0, 48.0, 51.5, 52.0]))),
                draw(st.sampled_from([0.2, 0.5, 3.0])),
                start + draw(st.sampled_from([0.1, 0.4])) if done else None,
                start + length - draw(st.sampled_from([0.05, 0.3])) if done else None))
    answers = [Answer(draw(st.sampled_from(NODES)),
                      draw(st.sampled_from([0.0, 1.0, 2.0])) + draw(st.integers(0, 30)),
                      draw(st.sampled_from([0.0, 0.0, 1.0])), id_)
               for id_ in range(1, draw(st.integers(0, 16)) + 1)]
    faults = []
    for number in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, 30)) + draw(st.sampled_from([0.0, 0.5]))
        end = draw(st.one_of(st.none(), st.sampled_from([0.5, 2.0, 4.0, 9.0])))
        faults.append(Fault(f"f{number}", start, None if end is None else start + end))
    events = [("w", w) for w in windows] + [("a", a) for a in answers]
    events = draw(st.permutations(events))
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=5)))
    spans = {"baseline_windows": draw(st.integers(0, 4)),
             "before_s": draw(st.sampled_from([0.0, 2.0, 3.5])),
             "after_s": draw(st.sampled_from([0.0, 2.0, 5.0]))}
    now = draw(st.sampled_from([10.0, 20.0, 31.0, 100.0]))
    return events, cuts, faults, spans, now


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(soaks())
def test_the_live_figures_equal_the_from_scratch_ones_at_every_tick(soak):
    events, cuts, faults, spans, now = soak
    state = LiveSpans(faults, **spans)
    arrived_windows, arrived_answers = [], []
    for begin, end in zip([0, *cuts], [*cuts, len(events)], strict=True):
        tick = events[begin:end]
        new_windows = [e for kind, e in tick if kind == "w"]
        new_answers = [e for kind, e in tick if kind == "a"]
        assert state.windows_fold(new_windows) == len(new_windows)
        assert state.answers_fold(new_answers) == len(new_answers)
        arrived_windows += new_windows
        arrived_answers += new_answers
        assert state.figures(now) == scratch(arrived_windows, arrived_answers, faults, now,
                                             **spans)
    assert (state.windows, state.answers) == (len(arrived_windows), len(arrived_answers))
    # the full pass (start, resume, recovery, a fault injected or healed) is the same state
    rebuilt = live_spans(arrived_windows, arrived_answers, faults, **spans)
    assert rebuilt.figures(now) == state.figures(now)


SPANS = {"baseline_windows": 2, "before_s": 2.0, "after_s": 2.0}


def w(index, start, *, node="n1", ttft=1.0, thr=100.0, failed=0.0, gap=0.2, completed=10.0):
    return Window(node, index, start, start + 1.0, completed, failed, ttft, thr, gap,
                  start + 0.2, start + 0.9)


def by(figures, metric, phase, figure=None):
    found = [f for f in figures if f.metric == metric and f.labels["phase"] == phase
             and f.labels.get("figure") == figure]
    assert len(found) <= 1
    return found[0] if found else None


def test_an_answer_that_arrives_before_its_window_is_placed_again_when_the_window_arrives():
    state = live_spans([w(1, 0.0), w(2, 1.0)], [], [], **SPANS)
    # window 3 runs 2.0–3.0; its wrong answer at 2.5 is collected before its row
    state.answers_fold([Answer("n1", 2.5, 1.0, 7)])
    assert state.nodes["n1"].answer_window == [2]  # tentative: the last window started
    assert by(state.figures(10.0), "probe_mismatches", "steady").value == 1.0
    state.windows_fold([w(3, 2.0)])
    assert state.nodes["n1"].answer_window == [3]
    assert state.nodes["n1"].placed_count == {2: 0, 3: 1}
    assert by(state.figures(10.0), "probe_mismatches", "steady").value == 1.0


def test_an_answer_placed_again_moves_into_a_fault_span():
    # the fault 2.0–3.0 takes window 3 out of the steady span; its answer arrived first
    state = live_spans([w(1, 0.0), w(2, 1.0)], [Answer("n1", 2.5, 1.0, 7)],
                       [Fault("link-down", 2.0, 3.0)], **SPANS)
    assert by(state.figures(10.0), "probe_mismatches", "steady").value == 1.0
    assert by(state.figures(10.0), "probe_mismatches", "during") is None  # no window there
    state.windows_fold([w(3, 2.0, failed=5.0)])
    figures = state.figures(10.0)
    assert by(figures, "probe_mismatches", "steady") is None  # no answer left in it
    assert by(figures, "probe_mismatches", "during").value == 1.0
    assert by(figures, "request_error_rate", "during").value == pytest.approx(5 / 15)
    assert by(figures, "request_error_rate", "steady").value == 0.0


def test_a_late_window_between_two_others_splits_their_completion_gap():
    # windows 1 and 3 arrive first: not consecutive indexes, so only the in-window gaps count
    state = live_spans([w(1, 0.0), w(3, 2.0)], [], [], **SPANS)
    assert by(state.figures(10.0), "completion_gap_max", "steady").value == 0.2
    # window 2 arrives late, with its first completion late: gap 1.9 − 0.9 = 1.0 from window 1
    state.windows_fold([replace(w(2, 1.0), first_completion=1.9, last_completion=1.95)])
    assert by(state.figures(10.0), "completion_gap_max", "steady").value == pytest.approx(1.0)
    # in order, the pair with the window before is folded in as it arrives
    state.windows_fold([replace(w(4, 3.0), first_completion=3.9)])
    assert state.nodes["n1"].steady.gap == pytest.approx(3.9 - 2.9)


def test_the_soak_baseline_is_fixed_by_its_first_windows_unless_an_earlier_one_arrives():
    state = live_spans([w(2, 1.0, ttft=2.0), w(3, 2.0, ttft=4.0)], [], [], **SPANS)
    assert state.nodes["n1"].base == (3.0, 100.0)
    state.windows_fold([w(4, 3.0, ttft=8.0)])  # after the first two: the baseline stays
    assert state.nodes["n1"].base == (3.0, 100.0)
    state.windows_fold([w(1, 0.0, ttft=1.0)])  # earlier than both: it takes window 3's place
    assert state.nodes["n1"].base == (1.5, 100.0)
    # steady TTFT p99 median of 1, 2, 4, 8 = 3 over the baseline 1.5 → +100 %
    assert by(state.figures(10.0), "baseline_deviation", "steady", "ttft_p99").value == \
        pytest.approx(1.0)


def test_a_fault_still_on_holds_the_windows_after_its_injection_out_of_the_steady_span():
    state = live_spans([w(i, i - 1.0, failed=4.0 if i >= 3 else 0.0) for i in range(1, 5)],
                       [], [Fault("drive-out", 2.5, None)], **SPANS)
    figures = state.figures(10.0)
    # windows 3 (2.0–3.0) and 4 overlap 2.5 … now: during; the steady span keeps 1, 2
    assert by(figures, "request_error_rate", "steady").value == 0.0
    assert by(figures, "request_error_rate", "during").value == pytest.approx(8 / 28)
    assert by(figures, "request_error_rate", "after") is None  # not healed: no after span
    # a node clock ahead of the service's: window 4 (3.0–4.0) has not started at now = 2.9
    ahead = state.figures(2.9)
    assert by(ahead, "request_error_rate", "steady").value == pytest.approx(4 / 34)
    assert ahead == scratch([w(i, i - 1.0, failed=4.0 if i >= 3 else 0.0)
                             for i in range(1, 5)], [], [Fault("drive-out", 2.5, None)],
                            2.9, **SPANS)


def test_a_window_is_folded_once():
    state = live_spans([w(1, 0.0)], [], [], **SPANS)
    with pytest.raises(ValueError, match="window 1 of n1 folded twice"):
        state.windows_fold([w(1, 0.0)])


def test_a_node_without_windows_has_no_figures_and_a_span_without_windows_is_invalid():
    state = live_spans([w(1, 0.0)], [Answer("n2", 1.0, 1.0, 1)],
                       [Fault("link-down", 5.0, 6.0)], **SPANS)
    figures = state.figures(10.0)
    assert {f.node for f in figures} == {"n1"}
    during = [f for f in figures if f.labels["phase"] == "during"]
    assert [(f.metric, f.labels["invalid"]) for f in during] == [
        ("request_error_rate", "no load window in during of fault window link-down"),
        ("completion_gap_max", "no load window in during of fault window link-down")]
