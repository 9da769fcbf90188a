"""G4's span figures kept up to date while the soak runs, each window and each correctness
answer folded in once (pure core: ``mypy --strict``, no Django; issue 17, "G4 at site scale").

:class:`LiveSpans` gives, at any ``now``, the figures ``gates.soak_derivations.derive`` gives on
the same windows, answers and faults — without their input ids (the live figures link no
inputs) — but at a cost in proportion to the windows and answers new since the last fold plus
the number of span figures, not to the soak's length:

* the **steady** span of a node keeps running sums (completed, failed requests), a running
  maximum of the completion gaps (inside each window, and with the window before it in start
  order when their indexes follow each other), sorted lists (bisection) of the window TTFT p99
  and throughput for the medians, and the count and sum of the answers placed in it;
* the soak **baseline** of a node is the median of its first ``baseline_windows`` windows with
  completions (in start order): fixed once they exist, unless a window that started earlier
  arrives late;
* the **fault** spans (before / during / after each fault) are short: each keeps its own
  windows and is figured again from them (``span_figures``) when asked;
* each **answer** is placed in the last window of its node started at or before it (the
  highest index among them). An answer can arrive before its window's row: a window arriving
  later places again the answers at or after its start (``max`` of the two indexes) — in
  order, only those of the window still running.

The fault set (each fault's injection and heal) is fixed for the life of a state: when it
changes the caller builds a new state from every window and answer (:func:`live_spans`: one
full pass, a few times per soak). A fault still on ends at ``now``: a window after its
injection is held out of the steady span while it started before ``now`` (so always, unless the
node's clock runs ahead of the service's; then the node's steady span is figured again in full).

The figures equal ``derive``'s exactly when the request counts and mismatches are whole numbers
(they are: counts of requests and of answers), whatever order the windows and answers arrive in
— sums of other values could differ in the last bit with the order of the additions.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from gates.soak_derivations import (
    Answer,
    Fault,
    SpanFigure,
    Window,
    _overlaps,
    baseline,
    span_figures,
)

STEADY_LABELS = {"scope": "steady", "phase": "steady"}


def _median(ordered: list[float]) -> float:
    """``statistics.median`` of a list already sorted (the same arithmetic)."""
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    return (ordered[half - 1] + ordered[half]) / 2


def _pair_gap(prev: Window, nxt: Window) -> float | None:
    """The gap between two windows next to each other in start order, when they followed each
    other on the node (``derive``'s rule)."""
    if (nxt.index == prev.index + 1 and prev.last_completion is not None
            and nxt.first_completion is not None):
        return nxt.first_completion - prev.last_completion
    return None


@dataclass
class _Steady:
    """The running figures of one node's steady span (windows overlapping no fault)."""

    keys: list[tuple[float, int]] = field(default_factory=list)  # (start, index), sorted
    indexes: set[int] = field(default_factory=set)
    completed: float = 0.0
    failed: float = 0.0
    gap: float = 0.0
    gap_stale: bool = False  # a window arrived between two others: gap figured again
    ttfts: list[float] = field(default_factory=list)  # sorted
    throughputs: list[float] = field(default_factory=list)  # sorted
    answers: int = 0
    mismatches: float = 0.0


@dataclass
class _Node:
    """One node's state: its windows, answers (in time order, each with its window index),
    baseline, steady span and fault spans."""

    faults: int
    windows: dict[int, Window] = field(default_factory=dict)
    keys: list[tuple[float, int]] = field(default_factory=list)  # (start, index), sorted
    times: list[float] = field(default_factory=list)  # their starts
    order: list[int] = field(default_factory=list)  # their indexes (ties: by index)
    highest: list[int] = field(default_factory=list)  # prefix maximum of ``order``
    answer_at: list[float] = field(default_factory=list)  # sorted
    answer_value: list[float] = field(default_factory=list)
    answer_window: list[int] = field(default_factory=list)
    placed_count: dict[int, int] = field(default_factory=dict)  # window index → answers
    placed_sum: dict[int, float] = field(default_factory=dict)  # window index → mismatches
    first: list[tuple[float, int]] = field(default_factory=list)  # the baseline's windows
    base: tuple[float | None, float | None] = (None, None)
    steady: _Steady = field(default_factory=_Steady)
    held: list[Window] = field(default_factory=list)  # after a fault still on was injected
    before: list[list[Window]] = field(default_factory=list)
    during: list[list[Window]] = field(default_factory=list)
    after: list[list[Window]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.before = [[] for _ in range(self.faults)]
        self.during = [[] for _ in range(self.faults)]
        self.after = [[] for _ in range(self.faults)]


class LiveSpans:
    """Every span figure of a running soak, folded in as windows and answers arrive (see the
    module doc). ``faults`` as ``derive`` takes them (their order is the figures' order)."""

    def __init__(self, faults: list[Fault], *, baseline_windows: int, before_s: float,
                 after_s: float) -> None:
        self.faults = list(faults)
        self.baseline_windows = baseline_windows
        self.before_s = before_s
        self.after_s = after_s
        self.nodes: dict[str, _Node] = {}
        self.windows = 0  # folded so far
        self.answers = 0

    def _node(self, name: str) -> _Node:
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = _Node(len(self.faults))
        return node

    # --- folding ---------------------------------------------------------------------------

    def windows_fold(self, windows: Iterable[Window]) -> int:
        """Fold new windows in (any order); the number folded. ValueError for a window of a
        node and index already folded (a stored window is never replaced)."""
        count = 0
        for window in windows:
            node = self._node(window.node)
            if window.index in node.windows:
                raise ValueError(f"window {window.index} of {window.node} folded twice")
            node.windows[window.index] = window
            self._place_window(node, window)
            self._baseline_fold(node, window)
            self._spans_fold(node, window)
            count += 1
        self.windows += count
        return count

    def answers_fold(self, answers: Iterable[Answer]) -> int:
        """Fold new correctness answers in (any order); the number folded."""
        count = 0
        for answer in answers:
            node = self._node(answer.node)
            k = bisect_right(node.times, answer.at)
            window = node.highest[k - 1] if k else 0
            at = bisect_right(node.answer_at, answer.at)
            node.answer_at.insert(at, answer.at)
            node.answer_value.insert(at, answer.mismatch)
            node.answer_window.insert(at, window)
            self._answer_add(node, window, answer.mismatch, 1)
            count += 1
        self.answers += count
        return count

    def _answer_add(self, node: _Node, window: int, mismatch: float, sign: int) -> None:
        node.placed_count[window] = node.placed_count.get(window, 0) + sign
        node.placed_sum[window] = node.placed_sum.get(window, 0.0) + sign * mismatch
        if window in node.steady.indexes:
            node.steady.answers += sign
            node.steady.mismatches += sign * mismatch

    def _place_window(self, node: _Node, window: Window) -> None:
        """The window among the node's starts; the answers at or after its start placed again
        (the highest index started at or before each)."""
        at = bisect_right(node.keys, (window.start, window.index))
        node.keys.insert(at, (window.start, window.index))
        node.times.insert(at, window.start)
        node.order.insert(at, window.index)
        node.highest.insert(at, 0)
        for i in range(at, len(node.order)):
            node.highest[i] = max(node.order[i], node.highest[i - 1]) if i else node.order[i]
        for i in range(bisect_left(node.answer_at, window.start), len(node.answer_at)):
            old = node.answer_window[i]
            if old < window.index:
                node.answer_window[i] = window.index
                self._answer_add(node, old, node.answer_value[i], -1)
                self._answer_add(node, window.index, node.answer_value[i], 1)

    def _baseline_fold(self, node: _Node, window: Window) -> None:
        """The soak baseline: the first ``baseline_windows`` windows with completions."""
        if window.completed <= 0 or self.baseline_windows <= 0:
            return
        key = (window.start, window.index)
        if len(node.first) >= self.baseline_windows and key >= node.first[-1]:
            return
        insort(node.first, key)
        del node.first[self.baseline_windows:]
        node.base = baseline([node.windows[i] for _s, i in node.first], self.baseline_windows)

    def _spans_fold(self, node: _Node, window: Window) -> None:
        """The window into the fault spans it falls in, and into the steady span unless it
        overlaps a fault (held while a fault still on may yet take it)."""
        excluded = held = False
        for i, fault in enumerate(self.faults):
            if fault.start - self.before_s < window.end <= fault.start:
                node.before[i].append(window)
            if fault.end is None:
                if window.end > fault.start:
                    node.during[i].append(window)
                    held = True
                continue
            if _overlaps(window, fault.start, fault.end):
                node.during[i].append(window)
                excluded = True
            if fault.end <= window.start < fault.end + self.after_s:
                node.after[i].append(window)
        if excluded:
            return
        if held:
            node.held.append(window)
            return
        self._steady_fold(node, window)

    def _steady_fold(self, node: _Node, window: Window) -> None:
        steady = node.steady
        key = (window.start, window.index)
        at = bisect_right(steady.keys, key)
        if at < len(steady.keys):
            steady.gap_stale = True  # it splits a pair of windows: figured again when asked
        elif steady.keys:
            pair = _pair_gap(node.windows[steady.keys[-1][1]], window)
            if pair is not None:
                steady.gap = max(steady.gap, pair)
        steady.gap = max(steady.gap, window.gap_max) if steady.keys else window.gap_max
        steady.keys.insert(at, key)
        steady.indexes.add(window.index)
        steady.completed += window.completed
        steady.failed += window.failed
        if window.completed > 0 and window.ttft_p99 is not None:
            insort(steady.ttfts, window.ttft_p99)
        if window.output_throughput is not None:
            insort(steady.throughputs, window.output_throughput)
        steady.answers += node.placed_count.get(window.index, 0)
        steady.mismatches += node.placed_sum.get(window.index, 0.0)

    # --- figures ---------------------------------------------------------------------------

    def figures(self, now: float) -> list[SpanFigure]:
        """Every span figure of every node at ``now`` (a fault still on ends there): nodes in
        name order, spans in ``derive``'s order, no input ids."""
        figures: list[SpanFigure] = []
        for name in sorted(self.nodes):
            node = self.nodes[name]
            if not node.windows:
                continue
            figures += self._steady_figures(name, node, now)
            for i, fault in enumerate(self.faults):
                before = sorted(node.before[i], key=lambda w: w.index)
                figures += self._span(name, node, fault.name, "before", before, node.base)
                pre = baseline(before, len(before))
                base = (pre[0] or node.base[0], pre[1] or node.base[1])
                during = sorted((w for w in node.during[i] if fault.end is not None
                                 or w.start < now), key=lambda w: w.index)
                figures += self._span(name, node, fault.name, "during", during, base)
                if fault.end is not None:
                    after = sorted(node.after[i], key=lambda w: w.index)
                    figures += self._span(name, node, fault.name, "after", after, base)
        return figures

    def _span(self, name: str, node: _Node, fault: str, phase: str, span: list[Window],
              base: tuple[float | None, float | None]) -> list[SpanFigure]:
        """``span_figures`` of a span figured in full, its answers from the placed counts."""
        figures = [replace(f, input_ids=()) if f.input_ids else f
                   for f in span_figures(name, fault, phase, span, [], base)]
        if span:
            answers = sum(node.placed_count.get(w.index, 0) for w in span)
            if answers:
                labels = {"scope": "fault", "fault": fault, "phase": phase} if fault else dict(
                    STEADY_LABELS)
                figures.append(SpanFigure(
                    "probe_mismatches", sum(node.placed_sum.get(w.index, 0.0) for w in span),
                    "1", labels, name))
        return figures

    def _steady_figures(self, name: str, node: _Node, now: float) -> list[SpanFigure]:
        steady = node.steady
        late = [w for w in node.held if w.start >= now]
        if late or not steady.keys:  # rare: figured in full
            span = sorted([node.windows[i] for _s, i in steady.keys] + late,
                          key=lambda w: w.index)
            return self._span(name, node, "", "steady", span, node.base)
        if steady.gap_stale:
            ordered = [node.windows[i] for _s, i in steady.keys]
            gap = max(w.gap_max for w in ordered)
            for prev, nxt in zip(ordered, ordered[1:], strict=False):
                pair = _pair_gap(prev, nxt)
                if pair is not None:
                    gap = max(gap, pair)
            steady.gap, steady.gap_stale = gap, False
        total = steady.completed + steady.failed
        figures = [
            SpanFigure("request_error_rate", steady.failed / total if total else 1.0, "ratio",
                       dict(STEADY_LABELS), name),
            SpanFigure("completion_gap_max", steady.gap, "s", dict(STEADY_LABELS), name),
        ]
        ttft_base, thr_base = node.base
        if ttft_base and steady.ttfts:
            figures.append(SpanFigure("baseline_deviation", _median(steady.ttfts) / ttft_base - 1,
                                      "ratio", {**STEADY_LABELS, "figure": "ttft_p99"}, name))
        if thr_base and steady.throughputs:
            figures.append(SpanFigure(
                "baseline_deviation", _median(steady.throughputs) / thr_base - 1, "ratio",
                {**STEADY_LABELS, "figure": "output_throughput"}, name))
        if steady.answers:
            figures.append(SpanFigure("probe_mismatches", steady.mismatches, "1",
                                      dict(STEADY_LABELS), name))
        return figures


def live_spans(windows: Iterable[Window], answers: Iterable[Answer], faults: list[Fault], *,
               baseline_windows: int, before_s: float, after_s: float) -> LiveSpans:
    """A state with every window and answer folded in: the full pass (at start, resume,
    recovery, and when a fault is injected or healed)."""
    state = LiveSpans(faults, baseline_windows=baseline_windows, before_s=before_s,
                      after_s=after_s)
    state.windows_fold(windows)
    state.answers_fold(answers)
    return state
