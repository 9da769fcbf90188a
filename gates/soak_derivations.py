"""G4's soak figures, a pure function (pure core: ``mypy --strict``, no Django): from the load
windows, the correctness answers and the fault windows to the figure of every check in every
span, plus the soak's duration and its missed fault windows (issue 7 §2, RUNBOOK §5.1-5.2). The
service's G4 decision (``runners.soak.evaluation``) and the auditor's verifier
(``acceptance_core.soak``) both call :func:`decision_figures`, so a report re-decides to the
same figures.

Spans, per node: ``steady`` (every window not overlapping any fault window), and for each fault
``before`` (windows ending in the ``before`` span before the injection), ``during``
(windows overlapping injection … heal; a fault still on counts until now) and ``after``
(windows starting in the ``after`` span after the heal). Figures per span:

* ``request_error_rate`` (ratio) = Σ failed ÷ Σ (completed + failed) — RUNBOOK §5.1;
* ``completion_gap_max`` (s): the longest time without a successful completion — inside a
  window (from the agent) and between consecutive windows of the span (next first − last,
  for windows that followed each other on the node);
* ``baseline_deviation`` with ``figure=ttft_p99`` (ratio): the span's median window TTFT p99 ÷
  baseline − 1, and with ``figure=output_throughput``: the span's median window throughput ÷
  baseline − 1 (the median: one window disturbed by a scheduler hiccup does not decide a
  span; an impact lasting the fault window does — outages are caught by the error rate and
  the completion gap, which take the worst). Baseline: for ``during`` / ``after``, the median
  of the fault's ``before`` windows (the *pre-fault* baseline); for ``steady`` / ``before``,
  the median of the soak's first ``baseline_windows`` windows. Windows without a completed
  request have no TTFT (only their throughput, 0, counts);
* ``probe_mismatches`` (1): correctness answers in the span (an answer belongs to the window
  running when it came) that differ from the known-good ones (RUNBOOK §5.2) or failed.

A span with no window yields the figures with ``invalid`` set (no evidence there: the criterion
is then "insufficient", never a pass). Times are node epoch seconds.

Once the load is over: ``soak_duration`` (s) per node = Σ window lengths × the time
compression (plan seconds per real second), and ``fault_windows_missed`` (1) per fault window:
0 when it was injected and healed, else 1 (its state and reason as labels).

The inputs come from measurement rows (:class:`Row`: the service's stored ones, or the ones the
verifier reads again from the embedded raw outputs) through :func:`windows_of` and
:func:`answers_of`.
"""


from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

CHECKS = ("request_error_rate", "completion_gap_max", "ttft_p99", "output_throughput",
          "probe_mismatches")


@dataclass(frozen=True)
class Window:
    """One load window of one node: node time span and its figures (``ids``: the measurements
    it came from)."""

    node: str
    index: int
    start: float
    end: float
    completed: float
    failed: float
    ttft_p99: float | None
    output_throughput: float | None
    gap_max: float
    first_completion: float | None
    last_completion: float | None
    ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Answer:
    """One correctness answer: node, node time, mismatch (1) or match (0), measurement id, and
    the window it fell in (the last window of its node started before it; set by derive)."""

    node: str
    at: float
    mismatch: float
    id: int = 0
    window: int = 0


@dataclass(frozen=True)
class Fault:
    """A fault window as injected: name, start (injection) and end (heal; None = still on)."""

    name: str
    start: float
    end: float | None


@dataclass(frozen=True)
class SpanFigure:
    """One check's figure in one span: metric, value, unit, labels, node, evidence ids."""

    metric: str
    value: float
    unit: str
    labels: dict[str, str]
    node: str
    input_ids: tuple[int, ...] = field(default_factory=tuple)


def baseline(windows: list[Window], count: int) -> tuple[float | None, float | None]:
    """Median TTFT p99 and output throughput of the first ``count`` windows with completions."""
    first = [w for w in sorted(windows, key=lambda w: w.start) if w.completed > 0][:count]
    ttft = [w.ttft_p99 for w in first if w.ttft_p99 is not None]
    thr = [w.output_throughput for w in first if w.output_throughput is not None]
    return (statistics.median(ttft) if ttft else None,
            statistics.median(thr) if thr else None)


def _overlaps(w: Window, start: float, end: float) -> bool:
    return w.start < end and w.end > start


def spans(windows: list[Window], faults: list[Fault], *, before_s: float, after_s: float,
          now: float) -> list[tuple[str, str, float, float, list[Window]]]:
    """(fault or "", phase, span start, span end, windows) of every span, per the module doc."""
    result = []
    during = [(f.start, f.end if f.end is not None else now) for f in faults]
    steady = [w for w in windows if not any(_overlaps(w, s, e) for s, e in during)]
    if windows:
        result.append(("", "steady", min(w.start for w in windows),
                       max(w.end for w in windows), steady))
    for fault in faults:
        end = fault.end if fault.end is not None else now
        result.append((fault.name, "before", fault.start - before_s, fault.start,
                       [w for w in windows
                        if fault.start - before_s < w.end <= fault.start]))
        result.append((fault.name, "during", fault.start, end,
                       [w for w in windows if _overlaps(w, fault.start, end)]))
        if fault.end is not None:
            result.append((fault.name, "after", end, end + after_s,
                           [w for w in windows if end <= w.start < end + after_s]))
    return result


def _gap(span: list[Window]) -> float:
    ordered = sorted(span, key=lambda w: w.start)
    gap = max(w.gap_max for w in ordered)
    for prev, nxt in zip(ordered, ordered[1:], strict=False):
        # Only windows that followed each other: a span may skip the windows of a fault.
        if (nxt.index == prev.index + 1 and prev.last_completion is not None
                and nxt.first_completion is not None):
            gap = max(gap, nxt.first_completion - prev.last_completion)
    return gap


def span_figures(node: str, fault: str, phase: str, span: list[Window],
                 answers: list[Answer], base: tuple[float | None, float | None]
                 ) -> list[SpanFigure]:
    """The figures of one span of one node (see the module doc)."""
    labels = {"scope": "fault", "fault": fault, "phase": phase} if fault else {
        "scope": "steady", "phase": phase}
    ids = tuple(i for w in span for i in w.ids)
    if not span:
        bad = {**labels, "invalid": f"no load window in {phase}"
               + (f" of fault window {fault}" if fault else "")}
        return [SpanFigure(m, 0.0, u, dict(bad), node) for m, u in
                (("request_error_rate", "ratio"), ("completion_gap_max", "s"))]
    completed = sum(w.completed for w in span)
    failed = sum(w.failed for w in span)
    total = completed + failed
    figures = [
        SpanFigure("request_error_rate", failed / total if total else 1.0, "ratio",
                   dict(labels), node, ids),
        SpanFigure("completion_gap_max", _gap(span), "s", dict(labels), node, ids),
    ]
    ttft_base, thr_base = base
    ttfts = [w.ttft_p99 for w in span if w.completed > 0 and w.ttft_p99 is not None]
    if ttft_base and ttfts:
        figures.append(SpanFigure("baseline_deviation",
                                  statistics.median(ttfts) / ttft_base - 1, "ratio",
                                  {**labels, "figure": "ttft_p99"}, node, ids))
    thr = [w.output_throughput for w in span if w.output_throughput is not None]
    if thr_base and thr:
        figures.append(SpanFigure("baseline_deviation",
                                  statistics.median(thr) / thr_base - 1, "ratio",
                                  {**labels, "figure": "output_throughput"}, node, ids))
    mine = {w.index for w in span}
    inside = [a for a in answers if a.window in mine]
    if inside:
        figures.append(SpanFigure("probe_mismatches", sum(a.mismatch for a in inside), "1",
                                  dict(labels), node, tuple(a.id for a in inside)))
    return figures


def _placed(windows: list[Window], answers: list[Answer]) -> list[Answer]:
    """``answers`` each with the highest window index among the windows started at or before
    it (0: none), by bisection over the windows in start order (a prefix maximum of the
    indexes), not by scanning every window for every answer."""
    starts = sorted((w.start, w.index) for w in windows)
    times = [s for s, _i in starts]
    highest: list[int] = []
    for _s, index in starts:
        highest.append(max(index, highest[-1]) if highest else index)
    placed = []
    for answer in answers:
        k = bisect_right(times, answer.at)
        placed.append(replace(answer, window=highest[k - 1] if k else 0))
    return placed


def derive(windows: list[Window], answers: list[Answer], faults: list[Fault], *,
           baseline_windows: int, before_s: float, after_s: float, now: float
           ) -> list[SpanFigure]:
    """Every span figure of every node (nodes in name order, spans in time order)."""
    figures: list[SpanFigure] = []
    per_node: dict[str, list[Window]] = {}
    for window in windows:
        per_node.setdefault(window.node, []).append(window)
    answers_of_node: dict[str, list[Answer]] = {}
    for answer in answers:
        answers_of_node.setdefault(answer.node, []).append(answer)
    for node in sorted(per_node):
        mine = per_node[node]
        own_answers = _placed(mine, answers_of_node.get(node, []))
        soak_base = baseline(mine, baseline_windows)
        before: dict[str, list[Window]] = {}
        for fault, phase, _s, _e, span in spans(mine, faults, before_s=before_s,
                                                after_s=after_s, now=now):
            if phase == "before":
                before[fault] = span
            if phase in ("during", "after"):
                pre = baseline(before.get(fault, []), len(before.get(fault, [])))
                base = (pre[0] or soak_base[0], pre[1] or soak_base[1])
            else:
                base = soak_base
            figures += span_figures(node, fault, phase, span, own_answers, base)
    return figures


@dataclass(frozen=True)
class Row:
    """One stored measurement of a soak: ``at`` is its ``sampled_at`` in epoch seconds (a
    window's end, an answer's time), ``id`` what figures link to as their input."""

    id: int
    node: str
    metric: str
    value: float
    labels: dict[str, str]
    at: float


WINDOW_METRICS = ("completed_requests", "failed_requests", "ttft_p99", "output_throughput",
                  "completion_gap_max")


def _epoch(text: str | None) -> float | None:
    return float(text) if text else None


def windows_of(rows: Iterable[Row]) -> list[Window]:
    """The load windows of the window rows (``WINDOW_METRICS``, labelled ``soak_window``; the
    ``completion_gap_max`` row carries the window's start, first and last completion), in
    (node, index) order. A window without its ``completion_gap_max`` row is left out."""
    per_window: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        if row.metric not in WINDOW_METRICS:
            continue
        entry = per_window.setdefault((row.node, int(row.labels["soak_window"])), {"ids": []})
        entry[row.metric] = row.value
        entry["ids"].append(row.id)
        if row.metric == "completion_gap_max":
            entry["start"] = float(row.labels["window_start"])
            entry["end"] = row.at
            entry["first"] = _epoch(row.labels.get("first_completion"))
            entry["last"] = _epoch(row.labels.get("last_completion"))
    return [
        Window(node, index, e["start"], e["end"], e.get("completed_requests", 0.0),
               e.get("failed_requests", 0.0), e.get("ttft_p99"), e.get("output_throughput"),
               e["completion_gap_max"], e["first"], e["last"], tuple(e["ids"]))
        for (node, index), e in sorted(per_window.items()) if "start" in e
    ]


def answers_of(rows: Iterable[Row]) -> list[Answer]:
    """The correctness answers of the ``probe_mismatches`` rows."""
    return [Answer(row.node, row.at, row.value, row.id) for row in rows
            if row.metric == "probe_mismatches"]


@dataclass(frozen=True)
class FaultOutcome:
    """A fault window of the plan as it ended: its node, its state (``healed`` when injected
    and healed) and why not, when it was not."""

    name: str
    node: str
    state: str
    error: str = ""


HEALED = "healed"


def duration_figures(windows: list[Window], time_compression: float) -> list[SpanFigure]:
    """``soak_duration`` per node (nodes in order of first appearance): Σ window lengths in
    plan seconds; its inputs, the first row of each window."""
    per_node: dict[str, list[Window]] = {}
    for window in windows:
        per_node.setdefault(window.node, []).append(window)
    figures = []
    for node, mine in per_node.items():
        loaded = sum(w.end - w.start for w in mine)
        figures.append(SpanFigure(
            "soak_duration", loaded * time_compression, "s",
            {"time_compression": f"{time_compression:g}", "real_s": f"{loaded:.1f}",
             "windows": str(len(mine))}, node, tuple(i for w in mine for i in w.ids[:1])))
    return figures


def fault_figures(outcomes: list[FaultOutcome]) -> list[SpanFigure]:
    """``fault_windows_missed`` per fault window of the plan: 0 when healed, else 1."""
    figures = []
    for fault in outcomes:
        missed = 0.0 if fault.state == HEALED else 1.0
        figures.append(SpanFigure(
            "fault_windows_missed", missed, "1",
            {"fault": fault.name, "state": fault.state,
             **({"reason": fault.error[:120]} if missed else {})}, fault.node))
    return figures


def decision_figures(windows: list[Window], answers: list[Answer], faults: list[Fault],
                     outcomes: list[FaultOutcome], *, baseline_windows: int, before_s: float,
                     after_s: float, time_compression: float) -> list[SpanFigure]:
    """Every figure G4 is decided on, once the load is over: the span figures (a fault never
    healed counts until the last window), each node's ``soak_duration`` and each fault
    window's ``fault_windows_missed``."""
    now = max([w.end for w in windows] + [f.start for f in faults], default=0.0)
    return (derive(windows, answers, faults, baseline_windows=baseline_windows,
                   before_s=before_s, after_s=after_s, now=now)
            + duration_figures(windows, time_compression) + fault_figures(outcomes))
