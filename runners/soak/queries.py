"""Read-only views of a G4 soak for the live page, the API and the G4 report section.

Every function takes a ``Soak`` (``soak_of(gate_run)`` finds it) and returns plain data
(dicts, lists, floats, aware datetimes) — no model instances — so templates and report
builders stay dumb. Nothing here writes. Units are the canonical ones of METRICS.md (s, tok/s,
ratio, 1); times are UTC datetimes, plus ``epoch`` (s) for charts.

* :func:`soak_progress` — state, elapsed/remaining (real and plan seconds), percent, windows
  collected vs planned, per-agent state (for the progress bar);
* :func:`soak_series` — one metric's time series per node with the fault windows to mark;
* :func:`soak_fault_windows` — each fault window as planned and as it happened (armed, injected,
  healed, how, safety checks);
* :func:`soak_fault_rows` — the per-fault table: checks before/during/after with value, unit,
  verdict and explanation, and the fault's verdict;
* :func:`soak_checks` — the latest state of each steady-state check (live);
* :func:`soak_gaps`, :func:`soak_events` — collection gaps and the soak's log.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gates import evaluation
from runners.models import GateRun, Measurement
from runners.soak.digest import CHARTED
from runners.soak.evaluation import CHECK_KEYS as CHECK_KEYS  # the page reads them here
from runners.soak.evaluation import PHASES, fault_checks_judge, soak_figures
from runners.soak.models import Soak, SoakChartBucket, SoakWindow
from runners.soak.plan import real_s, windows_planned

#: Metrics with a time series (one point per window, or per correctness answer), and units.
SERIES = {
    "ttft_p99": "s",
    "output_throughput": "tok/s",
    "completed_requests": "1",
    "failed_requests": "1",
    "request_error_rate": "ratio",  # computed here per window: failed ÷ (completed + failed)
    "completion_gap_max": "s",
    "probe_mismatches": "1",
}


def soak_of(gate_run: GateRun) -> Soak | None:
    """The soak of a gate run, or None when the run is not a soak."""
    return Soak.objects.filter(gate_run=gate_run).first()


def soak_progress(soak: Soak) -> dict:
    """``{"state", "loaded_s", "duration_s", "remaining_s", "percent", "plan_duration_s",
    "plan_elapsed_s", "time_compression", "paused_s", "started_at", "finished_at",
    "windows_planned", "windows_collected", "agents": [{"node", "state", "last_window",
    "last_collected_at"}]}`` — seconds are real unless named ``plan_…``."""
    plan = soak.plan
    duration = soak.duration_s
    loaded = min(max(soak.loaded_s, 0.0), duration)
    if soak.state in (Soak.State.DONE, Soak.State.EVALUATING):
        loaded = duration if soak.loaded_s >= duration * 0.95 else loaded
    agents = [{"node": a.node.name, "state": a.state, "last_window": a.last_window,
               "last_collected_at": a.last_collected_at}
              for a in soak.agents.select_related("node").order_by("node__name")]
    return {
        "state": soak.state, "loaded_s": loaded, "duration_s": duration,
        "remaining_s": max(duration - loaded, 0.0),
        "percent": 100.0 * loaded / duration if duration else 0.0,
        "plan_duration_s": float(plan["duration_s"]),
        "plan_elapsed_s": loaded * soak.time_compression,
        "time_compression": soak.time_compression, "paused_s": soak.paused_s,
        "started_at": soak.started_at, "finished_at": soak.finished_at,
        "windows_planned": windows_planned(plan),
        "windows_collected": max((a["last_window"] for a in agents), default=0),
        "agents": agents,
    }


def _epoch(at: datetime | None) -> float | None:
    return at.timestamp() if at else None


def soak_fault_windows(soak: Soak) -> list[dict]:
    """Each fault window: ``{"name", "kind", "node", "target", "state", "planned_start",
    "planned_end"`` (UTC, from the load's start and the compression; None before the load
    started), ``"injected_at", "healed_at", "start_epoch", "end_epoch", "heal_how",
    "heal_method", "heal_command", "inject_command", "heal_armed_at", "heal_verified_at",
    "safety": [{check, command, said, ok}], "error"}``."""
    rows = []
    start = _epoch(soak.load_started_at)
    for f in soak.faults.select_related("node").order_by("position"):
        planned_start = planned_end = None
        if start is not None:
            s = start + real_s(soak.plan, f.start_s)
            planned_start = datetime.fromtimestamp(s, tz=UTC)
            planned_end = datetime.fromtimestamp(s + real_s(soak.plan, f.duration_s), tz=UTC)
        rows.append({
            "name": f.name, "kind": f.kind, "node": f.node.name, "target": f.target,
            "state": f.state, "planned_start": planned_start, "planned_end": planned_end,
            "injected_at": f.injected_at, "healed_at": f.healed_at,
            "start_epoch": _epoch(f.injected_at), "end_epoch": _epoch(f.healed_at),
            "heal_how": f.heal_how, "heal_method": f.heal_method,
            "heal_command": f.heal_command, "inject_command": f.inject_command,
            "heal_armed_at": f.heal_armed_at, "heal_verified_at": f.heal_verified_at,
            "safety": f.safety, "error": f.error,
        })
    return rows


#: The window metrics read from the ``SoakWindow`` aggregates (column of each).
WINDOW_COLUMNS = {"ttft_p99": "ttft_p99", "output_throughput": "output_throughput",
                  "completed_requests": "completed", "failed_requests": "failed",
                  "completion_gap_max": "completion_gap_max"}
#: Metrics where a lower value is worse (a bucket of windows shows its lowest).
LOW_IS_WORSE = {"output_throughput", "completed_requests"}


def _window_points(soak: Soak, metric: str, node: str | None,
                   max_points: int | None) -> list[dict] | None:
    """The points of a window metric from the stored aggregates (one query), or None when
    the soak has none (collected before they existed). With ``max_points``, each node's
    consecutive windows are taken in buckets so that all nodes together give at most about
    ``max_points`` points; a bucket shows its worst window (highest, or lowest for
    throughput) and says how many windows it covers (``windows``)."""
    rows = SoakWindow.objects.filter(soak=soak)
    if node:
        rows = rows.filter(node__name=node)
    values = list(rows.order_by("node__name", "index").values_list(
        "node__name", "index", "end", "completed", "failed",
        *([WINDOW_COLUMNS[metric]] if metric in WINDOW_COLUMNS else [])))
    if not values:
        return None
    per_node: dict[str, list[tuple]] = {}
    for row in values:
        name, index, end, completed, failed = row[:5]
        if metric == "request_error_rate":
            total = completed + failed
            value = failed / total if total else 1.0
        else:
            value = row[5]
        if value is not None:
            per_node.setdefault(name, []).append((end, value, index))
    size = 1
    if max_points:
        longest = max((len(v) for v in per_node.values()), default=0)
        size = max(1, -(-longest * len(per_node) // max_points))
    worst = min if metric in LOW_IS_WORSE else max
    points = []
    for name, series in per_node.items():
        for i in range(0, len(series), size):
            bucket = series[i:i + size]
            end, value, index = worst(bucket, key=lambda b: b[1])
            points.append({"at": datetime.fromtimestamp(end, tz=UTC), "epoch": end,
                           "value": value, "node": name, "window": str(index),
                           "windows": len(bucket)})
    return points


def soak_chart_series(soak: Soak) -> dict[str, dict] | None:
    """The charted metrics' series from the chart buckets folded at collection (one query, at
    most about ``digest.CHART_POINTS`` rows whatever the windows and nodes): ``{metric:
    soak_series shape}``, each point a bucket's worst window (``windows``: how many windows
    with a value it covers); None when the soak has no buckets (collected before them)."""
    rows = list(SoakChartBucket.objects.filter(soak=soak).order_by(
        "node__name", "bucket").values_list("node__name", "worst"))
    if not rows:
        return None
    faults = soak_fault_windows(soak)
    out = {}
    for metric in CHARTED:
        points = [{"at": datetime.fromtimestamp(kept[2], tz=UTC), "epoch": kept[2],
                   "value": kept[0], "node": name, "window": str(kept[1]),
                   "windows": kept[3]}
                  for name, worst in rows if (kept := worst.get(metric)) is not None]
        points.sort(key=lambda p: (p["epoch"], p["node"]))
        out[metric] = {"metric": metric, "unit": SERIES[metric], "points": points,
                       "fault_windows": faults}
    return out


def soak_first_values(soak: Soak, metric: str, count: int) -> list[float]:
    """The values of the ``count`` earliest windows (all nodes, by end time) of a window
    metric: the opening baseline a chart draws, one query on the aggregates."""
    if metric not in WINDOW_COLUMNS:
        return []
    column = WINDOW_COLUMNS[metric]
    return list(SoakWindow.objects.filter(soak=soak, **{f"{column}__isnull": False}).order_by(
        "end", "node__name").values_list(column, flat=True)[:count])


def soak_series(soak: Soak, metric: str, *, node: str | None = None,
                max_points: int | None = None) -> dict:
    """One metric's time series: ``{"metric", "unit", "points": [{"at", "epoch", "value",
    "node", "window", "windows"}], "fault_windows": soak_fault_windows(soak)}``, points in
    time order. Window metrics come from the stored window aggregates (``windows``: how many
    windows a point covers, its worst, when ``max_points`` bounds the count).

    ``request_error_rate`` is computed per window from its failed and completed requests;
    ``probe_mismatches`` has one point per correctness answer (``window`` is the prompt id).
    ValueError for a metric not in :data:`SERIES`."""
    if metric not in SERIES:
        raise ValueError(f"no time series for {metric!r}; known: {', '.join(SERIES)}")
    if metric != "probe_mismatches":
        stored = _window_points(soak, metric, node, max_points)
        if stored is not None:
            stored.sort(key=lambda p: (p["epoch"], p["node"]))
            return {"metric": metric, "unit": SERIES[metric], "points": stored,
                    "fault_windows": soak_fault_windows(soak)}
    wanted = ["completed_requests", "failed_requests"] if metric == "request_error_rate" \
        else [metric]
    rows = Measurement.objects.filter(gate_run_id=soak.gate_run_id, derived=False,
                                      metric__in=wanted, sampled_at__isnull=False)
    if node:
        rows = rows.filter(node__name=node)
    points: list[dict] = []
    if metric == "request_error_rate":
        per: dict[tuple, dict] = {}
        for m in rows.select_related("node").order_by("sampled_at", "id"):
            key = (m.node.name, m.labels.get("soak_window"))
            per.setdefault(key, {"at": m.sampled_at})[m.metric] = m.value
        for (name, window), entry in per.items():
            total = entry.get("completed_requests", 0) + entry.get("failed_requests", 0)
            points.append({"at": entry["at"], "epoch": entry["at"].timestamp(),
                           "value": entry.get("failed_requests", 0) / total if total else 1.0,
                           "node": name, "window": window, "windows": 1})
    else:
        for m in rows.select_related("node").order_by("sampled_at", "id"):
            points.append({"at": m.sampled_at, "epoch": m.sampled_at.timestamp(),
                           "value": m.value, "node": m.node.name if m.node else "",
                           "window": m.labels.get("soak_window") or m.labels.get("prompt"),
                           "windows": 1})
    points.sort(key=lambda p: (p["epoch"], p["node"]))
    return {"metric": metric, "unit": SERIES[metric], "points": points,
            "fault_windows": soak_fault_windows(soak)}


def _figures(soak: Soak) -> list[evaluation.Sample]:
    """The span figures: stored ones once the soak was evaluated, else those of the latest
    driver tick (``Soak.figures``), else computed now."""
    stored = list(Measurement.objects.filter(gate_run_id=soak.gate_run_id, derived=True,
                                             labels__has_key="phase").select_related("node"))
    if stored:
        return [evaluation.Sample(m.id, m.metric, m.value, m.unit, m.labels,
                                  m.node.name if m.node else "") for m in stored]
    if soak.figures:
        return [evaluation.Sample(i, f["metric"], f["value"], f["unit"], f["labels"],
                                  f["node"]) for i, f in enumerate(soak.figures)]
    return [evaluation.Sample(i, f.metric, f.value, f.unit, f.labels, f.node)
            for i, f in enumerate(soak_figures(soak))]


def soak_fault_rows(soak: Soak) -> list[dict]:
    """The per-fault table: ``[{"name", "kind", "node", "window": (injected_at, healed_at),
    "state", "heal_how", "checks": {phase: [{"check", "metric", "value", "unit", "verdict",
    "explanation"}]}, "verdict"}]`` — ``verdict`` is ``pass`` when every check of every phase
    passed, ``fail`` when one failed, ``insufficient`` when evidence is missing, ``not
    injected`` (with the reason) when the fault never ran. Each figure is judged against the
    engagement's criterion of that check: as the latest tick or the decision stored it
    (``Soak.fault_checks``), else here from the span figures."""
    judged = soak.fault_checks
    if judged is None:
        judged = fault_checks_judge(soak, _figures(soak))
    rows = []
    for fault in soak_fault_windows(soak):
        checks = judged.get(fault["name"]) or {phase: [] for phase in PHASES}
        verdicts = {c["verdict"] for phase in checks.values() for c in phase}
        if fault["injected_at"] is None:
            overall = f"not injected ({fault['state']}: {fault['error']})".strip()
        elif "fail" in verdicts:
            overall = "fail"
        elif verdicts & {"insufficient", "unstable"} or not verdicts:
            overall = "insufficient"
        else:
            overall = "pass"
        rows.append({"name": fault["name"], "kind": fault["kind"], "node": fault["node"],
                     "window": (fault["injected_at"], fault["healed_at"]),
                     "state": fault["state"], "heal_how": fault["heal_how"],
                     "checks": checks, "verdict": overall})
    return rows


def soak_checks(soak: Soak) -> dict:
    """The latest state of each steady-state check while the soak runs: ``{criterion key:
    {"state", "value", "unit", "explanation", "at"}}`` (``state`` a verdict: pass, fail,
    insufficient)."""
    return dict(soak.checks or {})


def soak_gaps(soak: Soak) -> list[dict]:
    """Collection gaps: ``[{"node" (or ""), "started_at", "ended_at" (None: open),
    "seconds" (None: open), "reason"}]``."""
    return [{"node": g.node.name if g.node else "", "started_at": g.started_at,
             "ended_at": g.ended_at,
             "seconds": (g.ended_at - g.started_at).total_seconds() if g.ended_at else None,
             "reason": g.reason}
            for g in soak.gaps.select_related("node")]


def soak_events(soak: Soak, *, limit: int = 500) -> list[dict]:
    """The soak's log, newest last: ``[{"at", "kind", "actor", "text", "fault"}]``."""
    rows = soak.events.select_related("fault").order_by("-at", "-id")[:limit]
    return [{"at": e.at, "kind": e.kind, "actor": e.actor, "text": e.text,
             "fault": e.fault.name if e.fault else ""} for e in reversed(list(rows))]
