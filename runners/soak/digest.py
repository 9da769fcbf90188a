"""What the soak page and its poll read, folded once at collection (issue 17: the page at 128
nodes × 72 h read every window of every node on every 2 s poll):

* :func:`charts_fold` — each new window into its chart bucket (``SoakChartBucket``): per
  charted metric the bucket's worst window, so a chart reads at most about
  :data:`CHART_POINTS` rows whatever the windows and nodes;
* :func:`answers_fold` — each new correctness answer into its node's latest answer per prompt
  (``SoakAgent.answers_latest``), so the page does not group every answer of the soak;
* :func:`digest_rebuild` — both from the ledger, for a soak collected before they existed.

The bucket size is fixed at the first window folded: the planned windows × the nodes ÷
:data:`CHART_POINTS`, rounded up (1 for a lab soak of a few nodes: every window its own point).
Window ``i`` falls in bucket ``(i - 1) // size``; a bucket shows its highest value (lowest for
throughput), the earliest window on a tie, and how many windows with a value it covers. Units
are canonical (s, tok/s, ratio); times node epoch seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runners.models import Measurement
from runners.soak import steady
from runners.soak.models import Soak, SoakAgent, SoakChartBucket, SoakWindow
from runners.soak.plan import windows_planned

#: Points per chart, all nodes together: beyond it a point is its bucket's worst window.
CHART_POINTS = 2400
#: The charted window metrics; True where a lower value is worse (the bucket keeps its lowest).
CHARTED = {"ttft_p99": False, "output_throughput": True, "request_error_rate": False,
           "completion_gap_max": False}


def window_values(window: steady.Window) -> dict[str, float | None]:
    """A window's charted values: TTFT p99 (s), output throughput (tok/s), request error rate
    (ratio: failed ÷ (completed + failed), 1 when nothing was sent) and the longest gap
    between completions (s); None where the window has no value."""
    total = window.completed + window.failed
    return {"ttft_p99": window.ttft_p99, "output_throughput": window.output_throughput,
            "request_error_rate": window.failed / total if total else 1.0,
            "completion_gap_max": window.gap_max}


def bucket_size(soak: Soak) -> int:
    """Windows per chart bucket: fixed (stored) at the first call, from the plan's windows and
    the soak's nodes."""
    if soak.chart_bucket_windows:
        return soak.chart_bucket_windows
    nodes = max(1, SoakAgent.objects.filter(soak=soak).count())
    size = max(1, -(-windows_planned(soak.plan) * nodes // CHART_POINTS))
    Soak.objects.filter(id=soak.id, chart_bucket_windows=0).update(chart_bucket_windows=size)
    soak.chart_bucket_windows = Soak.objects.values_list(
        "chart_bucket_windows", flat=True).get(id=soak.id)
    return soak.chart_bucket_windows


def _worse(metric: str, value: float, index: int, kept: list) -> bool:
    if value == kept[0]:
        return index < kept[1]
    return value < kept[0] if CHARTED[metric] else value > kept[0]


def charts_fold(soak: Soak, node_id: int, windows: Sequence[steady.Window]) -> None:
    """Fold newly collected windows of one node into their chart buckets (two queries: the
    buckets they touch, then their writes)."""
    if not windows:
        return
    size = bucket_size(soak)
    groups: dict[int, list[steady.Window]] = {}
    for window in windows:
        groups.setdefault((window.index - 1) // size, []).append(window)
    existing = {b.bucket: b for b in SoakChartBucket.objects.filter(
        soak=soak, node_id=node_id, bucket__in=list(groups))}
    created, changed = [], []
    for bucket, members in groups.items():
        row = existing.get(bucket)
        if row is None:
            row = SoakChartBucket(soak=soak, node_id=node_id, bucket=bucket, worst={})
            created.append(row)
        else:
            changed.append(row)
        for window in sorted(members, key=lambda w: w.index):
            for metric, value in window_values(window).items():
                if value is None:
                    continue
                kept = row.worst.get(metric)
                if kept is None:
                    row.worst[metric] = [value, window.index, window.end, 1]
                elif _worse(metric, value, window.index, kept):
                    row.worst[metric] = [value, window.index, window.end, kept[3] + 1]
                else:
                    kept[3] += 1
    SoakChartBucket.objects.bulk_create(created)
    SoakChartBucket.objects.bulk_update(changed, ["worst"])


def answers_fold(agent: SoakAgent, answers: Iterable[tuple[str, str, float, float]]) -> None:
    """Fold answers ``(prompt id, result, mismatch (1), node epoch s)``, in the order they
    were stored, into ``agent.answers_latest`` (not saved: the caller saves the agent)."""
    latest = dict(agent.answers_latest or {})
    for prompt, result, mismatch, at in answers:
        entry = dict(latest.get(prompt) or {"last_mismatch": "", "last_mismatch_at": None})
        entry.update(result=result, mismatch=mismatch > 0, at=at)
        if mismatch > 0:
            entry.update(last_mismatch=result, last_mismatch_at=at)
        latest[prompt] = entry
    agent.answers_latest = latest


def answer_tuples(rows: Iterable[Measurement]) -> list[tuple[str, str, float, float]]:
    """``answers_fold``'s input from stored ``probe_mismatches`` rows."""
    return [(m.labels.get("prompt", ""), m.labels.get("result", ""), m.value,
             m.sampled_at.timestamp()) for m in rows
            if m.metric == "probe_mismatches" and m.sampled_at is not None]


def digest_rebuild(soak: Soak) -> None:
    """The chart buckets and every agent's latest answers from the stored window aggregates and
    answers (for a soak collected before they existed; replaces what is there)."""
    SoakChartBucket.objects.filter(soak=soak).delete()
    per_node: dict[int, list[steady.Window]] = {}
    for row in SoakWindow.objects.filter(soak=soak).order_by("node_id", "index").values_list(
            "node_id", "index", "start", "end", "completed", "failed", "ttft_p99",
            "output_throughput", "completion_gap_max", "first_completion", "last_completion"):
        per_node.setdefault(row[0], []).append(steady.Window(str(row[0]), *row[1:]))
    for node_id, windows in per_node.items():
        charts_fold(soak, node_id, windows)
    for agent in soak.agents.all():
        agent.answers_latest = {}
        answers_fold(agent, answer_tuples(Measurement.objects.filter(
            gate_run_id=soak.gate_run_id, node_id=agent.node_id, metric="probe_mismatches",
            derived=False).order_by("id")))
        agent.save(update_fields=["answers_latest"])
