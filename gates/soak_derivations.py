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
:func:`answers_of`. A figure links the rows it used (``input_ids``, :func:`ids_of`): the error
rate the completed and failed rows of its span's windows, the gap their ``completion_gap_max``
rows, a baseline deviation its figure's rows in the span and in the windows its baseline is the
median of (the value depends on both), the mismatches the span's answers, the duration one row
per window. The verifier compares values and labels, never ids.
"""


from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CHECKS = ("request_error_rate", "completion_gap_max", "ttft_p99", "output_throughput",
          "probe_mismatches")

#: A window's measurement rows, one per metric (``Window.metric_ids`` follows this order).
WINDOW_METRICS = ("completed_requests", "failed_requests", "ttft_p99", "output_throughput",
                  "completion_gap_max")


@dataclass(frozen=True)
class Window:
    """One load window of one node: node time span and its figures (``ids``: the measurements
    it came from; ``metric_ids``: the id of its row of each ``WINDOW_METRICS`` metric, in that
    order, 0 for none — empty when not known, for a window folded before they were kept: its
    figures then link every id in ``ids``)."""

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
    metric_ids: tuple[int, ...] = ()


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


def ids_of(windows: Iterable[Window], *metrics: str) -> tuple[int, ...]:
    """The ids of the ``metrics`` rows of ``windows``, each once, in order (a decision links
    the measurements it used); every id of a window whose per-metric ids are not known."""
    positions = [WINDOW_METRICS.index(metric) for metric in metrics]
    ids: list[int] = []
    for w in windows:
        if w.metric_ids:
            ids += [w.metric_ids[p] for p in positions if w.metric_ids[p]]
        else:
            ids += w.ids
    return tuple(dict.fromkeys(ids))


def baseline_windows_of(windows: list[Window], count: int) -> list[Window]:
    """The windows a baseline is the median of: the first ``count`` windows with
    completions."""
    return [w for w in sorted(windows, key=lambda w: w.start) if w.completed > 0][:count]


def baseline(windows: list[Window], count: int) -> tuple[float | None, float | None]:
    """Median TTFT p99 and output throughput of the first ``count`` windows with completions."""
    first = baseline_windows_of(windows, count)
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
                 answers: list[Answer], base: tuple[float | None, float | None], *,
                 base_from: tuple[list[Window], list[Window]] = ([], [])
                 ) -> list[SpanFigure]:
    """The figures of one span of one node (see the module doc). Each figure links the rows
    it used (``input_ids``): the error rate the span's completed and failed rows, the gap its
    ``completion_gap_max`` rows, a baseline deviation the span's rows of its figure with a
    value and those of the windows its baseline is the median of (``base_from``: the TTFT
    and the throughput baseline's windows), the mismatches the span's answers."""
    labels = {"scope": "fault", "fault": fault, "phase": phase} if fault else {
        "scope": "steady", "phase": phase}
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
                   dict(labels), node, ids_of(span, "completed_requests", "failed_requests")),
        SpanFigure("completion_gap_max", _gap(span), "s", dict(labels), node,
                   ids_of(span, "completion_gap_max")),
    ]
    ttft_base, thr_base = base
    ttft_span = [w for w in span if w.completed > 0 and w.ttft_p99 is not None]
    if ttft_base and ttft_span:
        ttft_from = [w for w in base_from[0] if w.ttft_p99 is not None]
        figures.append(SpanFigure(
            "baseline_deviation",
            statistics.median([w.ttft_p99 for w in ttft_span if w.ttft_p99 is not None])
            / ttft_base - 1, "ratio", {**labels, "figure": "ttft_p99"}, node,
            ids_of(ttft_span + ttft_from, "ttft_p99")))
    thr_span = [w for w in span if w.output_throughput is not None]
    if thr_base and thr_span:
        thr_from = [w for w in base_from[1] if w.output_throughput is not None]
        figures.append(SpanFigure(
            "baseline_deviation",
            statistics.median([w.output_throughput for w in thr_span
                               if w.output_throughput is not None]) / thr_base - 1, "ratio",
            {**labels, "figure": "output_throughput"}, node,
            ids_of(thr_span + thr_from, "output_throughput")))
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
        placed.append(Answer(answer.node, answer.at, answer.mismatch, answer.id,
                             highest[k - 1] if k else 0))  # not replace(): 5× its cost
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
        soak_from = baseline_windows_of(mine, baseline_windows)
        soak_base = baseline(mine, baseline_windows)
        before: dict[str, list[Window]] = {}
        for fault, phase, _s, _e, span in spans(mine, faults, before_s=before_s,
                                                after_s=after_s, now=now):
            if phase == "before":
                before[fault] = span
            if phase in ("during", "after"):
                pre_windows = before.get(fault, [])
                pre = baseline(pre_windows, len(pre_windows))
                pre_from = baseline_windows_of(pre_windows, len(pre_windows))
                base = (pre[0] or soak_base[0], pre[1] or soak_base[1])
                base_from = (pre_from if pre[0] else soak_from,
                             pre_from if pre[1] else soak_from)
            else:
                base, base_from = soak_base, (soak_from, soak_from)
            figures += span_figures(node, fault, phase, span, own_answers, base,
                                    base_from=base_from)
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
        entry = per_window.setdefault((row.node, int(row.labels["soak_window"])),
                                      {"ids": [], "by": [0] * len(WINDOW_METRICS)})
        entry[row.metric] = row.value
        entry["ids"].append(row.id)
        entry["by"][WINDOW_METRICS.index(row.metric)] = row.id
        if row.metric == "completion_gap_max":
            entry["start"] = float(row.labels["window_start"])
            entry["end"] = row.at
            entry["first"] = _epoch(row.labels.get("first_completion"))
            entry["last"] = _epoch(row.labels.get("last_completion"))
    return [
        Window(node, index, e["start"], e["end"], e.get("completed_requests", 0.0),
               e.get("failed_requests", 0.0), e.get("ttft_p99"), e.get("output_throughput"),
               e["completion_gap_max"], e["first"], e["last"], tuple(e["ids"]),
               tuple(e["by"]))
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
