"""What a person sees of a G4 soak: plain data for the soak page, its live fragment, the API
and the G4 report section, built on ``runners.soak.queries`` (read-only; nothing here writes).

* :func:`soak_view` — everything the soak page shows: header, progress (real and plan time),
  each steady-state check's current state with its requirement, the charts (SVG strings), the
  fault table, gaps, the event log, the decision;
* :func:`soak_charts` — the four time-series charts (TTFT p99, output throughput, request error
  rate, longest completion gap) with fault windows shaded and gaps marked;
* :func:`check_rows` — the steady-state checks in plan order, as ``gates.presentation``
  verdict rows (the shape the engagement page, the run page and the reports use);
* :func:`fault_table` — ``queries.soak_fault_rows`` joined with how the heal was armed;
* :func:`correctness_latest` — each prompt's latest answer: ``exact`` / ``diverges at token k``;
* :func:`duration_text` — seconds as people read them (``72 h``, ``1 h 05 min``, ``42 s``).

Units: values stay canonical (s, tok/s, ratio, 1); ``*_text`` fields are for display.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Max
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from acceptance.units import measurement_text
from gates import evaluation
from gates.presentation import VerdictRow, criterion_text
from gates.services import criterion_spec
from runners.models import Measurement
from runners.soak import charts, queries
from runners.soak.digest import CHART_POINTS
from runners.soak.models import Soak
from runners.soak.plan import real_s
from runners.soak.rate import FORMULA, RateBasis

#: Soak states after which nothing changes any more (the page stops polling).
OVER = (Soak.State.DONE, Soak.State.ABORTED, Soak.State.FAILED)

#: The charts of the page and the report: (metric, title, criterion key of its bound).
CHARTS = (
    ("ttft_p99", gettext_lazy("TTFT p99"), "ttft-p99"),
    ("output_throughput", gettext_lazy("Output throughput"), "throughput"),
    ("request_error_rate", gettext_lazy("Request error rate"), "error-rate"),
    ("completion_gap_max", gettext_lazy("Longest gap between completions"), "no-interruption"),
)


STATE_TEXT = {
    Soak.State.STARTING: gettext_lazy("starting"),
    Soak.State.RUNNING: gettext_lazy("running"),
    Soak.State.PAUSED: gettext_lazy("paused"),
    Soak.State.COLLECTING: gettext_lazy("collecting the last samples"),
    Soak.State.EVALUATING: gettext_lazy("evaluating"),
    Soak.State.DONE: gettext_lazy("done"),
    Soak.State.ABORTED: gettext_lazy("aborted"),
    Soak.State.FAILED: gettext_lazy("failed: no decision"),
}


PHASE_TEXT = {"before": gettext_lazy("before"), "during": gettext_lazy("during"),
              "after": gettext_lazy("after")}


def state_text(state: str) -> str:
    """A soak state in words (translated)."""
    return str(STATE_TEXT.get(state, state))


def duration_text(seconds: float | None) -> str:
    """``72 h``, ``1 h 05 min``, ``12 min 30 s``, ``42 s``; ``—`` for None."""
    if seconds is None:
        return "—"
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h" if minutes == 0 else f"{hours} h {minutes:02d} min"
    return f"{minutes} min" if secs == 0 else f"{minutes} min {secs:02d} s"


def is_simulated(soak: Soak) -> bool:
    """True when the soak's evidence comes from lab stand-ins (a lab engagement or an agent
    whose vLLM is a stand-in)."""
    return soak.gate_run.gate.engagement.is_lab or soak.agents.filter(simulated=True).exists()


def _specs(soak: Soak) -> dict[str, evaluation.CriterionSpec]:
    return {c.key: criterion_spec(c) for c in soak.gate_run.gate.criteria.all()}


def _value_text(key: str, value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if key in ("ttft-p99", "throughput") and unit == "ratio":
        return _("%(pct)s vs baseline") % {"pct": f"{value * 100:+.1f} %"}
    if unit == "ratio":
        return f"{value * 100:.2f} %"
    if key == "correctness":
        return _("mismatches: %(n)s") % {"n": f"{value:.0f}"}
    return measurement_text(value, unit)


def _utc(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch is not None else None


def correctness_latest(soak: Soak) -> list[dict]:
    """Each correctness prompt's latest answer, per node: ``[{"node", "prompt", "result"
    ("exact" | "diverges at token k" | "error: …"), "mismatch" (bool), "at",
    "last_mismatch" (the latest non-exact result, "" when none), "last_mismatch_at"}]``:
    as folded at collection (``SoakAgent.answers_latest``), else found in the ledger."""
    agents = list(soak.agents.values_list("node__name", "answers_latest", "offsets"))
    # an agent with answers collected before the fold existed: the ledger says (below)
    if agents and not any(latest is None and int((offsets or {}).get("probes.jsonl", 0))
                          for _n, latest, offsets in agents):
        folded = [(node, latest or {}) for node, latest, _o in agents]
        return [{"node": node, "prompt": prompt, "result": a["result"],
                 "mismatch": a["mismatch"], "at": _utc(a["at"]),
                 "last_mismatch": a["last_mismatch"],
                 "last_mismatch_at": _utc(a["last_mismatch_at"])}
                for node, latest in sorted(folded) for prompt, a in sorted(latest.items())]
    answers = Measurement.objects.filter(gate_run_id=soak.gate_run_id,
                                         metric="probe_mismatches", derived=False)
    # One row per node and prompt, in the database: the latest answer (collected in time
    # order, so the highest id) and the latest non-exact one — not every answer of the soak.
    last = answers.values("node_id", "labels__prompt").annotate(last=Max("id"))
    wrong_last = answers.filter(value__gt=0).values("node_id", "labels__prompt").annotate(
        last=Max("id"))
    rows = {m.id: m for m in Measurement.objects.filter(
        id__in=[r["last"] for r in last] + [r["last"] for r in wrong_last]).select_related(
        "node")}
    latest: dict[tuple[str, str], Measurement] = {}
    wrong: dict[tuple[str, str], Measurement] = {}
    for ids, into in ((last, latest), (wrong_last, wrong)):
        for r in ids:
            m = rows[r["last"]]
            into[(m.node.name if m.node else "", m.labels.get("prompt", ""))] = m
    return [{"node": node, "prompt": prompt, "result": m.labels.get("result", ""),
             "mismatch": m.value > 0, "at": m.sampled_at,
             "last_mismatch": wrong[(node, prompt)].labels.get("result", "")
             if (node, prompt) in wrong else "",
             "last_mismatch_at": wrong[(node, prompt)].sampled_at
             if (node, prompt) in wrong else None}
            for (node, prompt), m in sorted(latest.items())]


def check_rows(soak: Soak) -> list[VerdictRow]:
    """The steady-state checks (``queries.CHECK_KEYS`` order) as verdict rows: the criterion's
    description, its short ``title``, the requirement (relative to the pre-fault baseline for
    TTFT and throughput), the live value and its text, and the verdict — ``waiting`` before
    the first judgement."""
    criteria = {c.key: c for c in soak.gate_run.gate.criteria.all()}
    specs = {key: criterion_spec(c) for key, c in criteria.items()}
    live = queries.soak_checks(soak)
    rows = []
    for key in queries.CHECK_KEYS:
        spec = specs.get(key)
        if spec is None:
            continue
        state = live.get(key) or {}
        requirement = evaluation.threshold_text(spec)
        if key in ("ttft-p99", "throughput"):
            requirement = _("%(req)s of the pre-fault baseline") % {
                "req": f"{spec.operator} {spec.threshold * 100:+g} %"}
        elif spec.unit == "ratio":
            requirement = f"{spec.operator} {spec.threshold * 100:g} %"
        rows.append(VerdictRow(
            key=key, metric=spec.metric, description=criterion_text(criteria[key]),
            title=str(CHECK_NAME.get(key, key)), requirement=requirement,
            verdict=state.get("state") or "waiting", measured=state.get("value"),
            unit=spec.unit, measured_text=_value_text(key, state.get("value"), spec.unit),
            reference_source=criteria[key].source,
            explanation=state.get("explanation", ""), at=state.get("at") or ""))
    return rows


def _axis(soak: Soak, points: list[dict]) -> charts.Axis:
    start = soak.load_started_at.timestamp() if soak.load_started_at else (
        points[0]["epoch"] if points else time.time())
    end = start + soak.duration_s
    last = max((p["epoch"] for p in points), default=start)
    return charts.Axis(start=start, end=max(end, last, start + 1.0),
                       compression=soak.time_compression)


def _bound(key: str, spec: evaluation.CriterionSpec | None, baseline: float | None
           ) -> tuple[float, str] | None:
    if spec is None or spec.threshold is None:
        return None
    if key in ("ttft-p99", "throughput"):
        if baseline is None:
            return None
        return (baseline * (1 + spec.threshold),
                # the soak's opening baseline; each fault's during/after spans are judged
                # against that fault's own pre-fault windows (the fault table shows them)
                f"opening baseline {spec.threshold * 100:+g} %")
    if key == "error-rate":
        return None  # the bound is 0: the axis itself
    return (spec.threshold, f"limit {measurement_text(spec.threshold, spec.unit)}")


def soak_charts(soak: Soak, *, simulated: bool | None = None, width: int = charts.WIDTH,
                max_points: int = CHART_POINTS) -> list[dict]:
    """The soak's charts: ``[{"metric", "title", "unit", "svg", "legend": [{"node",
    "colour"}], "points", "baseline" (canonical unit or None), "bound_text"}]``; at most about
    ``max_points`` points a chart (the report draws fewer than the page)."""
    simulated = is_simulated(soak) if simulated is None else simulated
    specs = _specs(soak)
    gaps = queries.soak_gaps(soak)
    count = int(soak.plan["steady_state"]["baseline_windows"])
    # the page's bound: the chart buckets folded at collection; another (the report's): here
    folded = queries.soak_chart_series(soak) if max_points == CHART_POINTS else None
    out = []
    for metric, title, key in CHARTS:
        title = str(title)
        series = folded[metric] if folded is not None else queries.soak_series(
            soak, metric, max_points=max_points)
        values = ([p["value"] for p in series["points"]][:count]
                  if all(p["windows"] == 1 for p in series["points"])
                  else queries.soak_first_values(soak, metric, count))
        baseline = statistics.median(values) if values else None
        bound = _bound(key, specs.get(key), baseline)
        svg = charts.series_svg(series, title=title, axis=_axis(soak, series["points"]),
                                gaps=gaps, bound=bound, simulated=simulated, width=width)
        out.append({"metric": metric, "title": title, "unit": series["unit"], "svg": svg,
                    "legend": charts.legend(series), "points": len(series["points"]),
                    "baseline": baseline if key in ("ttft-p99", "throughput") else None,
                    "bound_text": bound[1] if bound else ""})
    return out


def _target_text(kind: str, target: dict) -> str:
    if kind == "drive_out":
        return _("drive %(n)s") % {"n": target.get("drive")}
    where = target.get("interface") or _("the node's interface")
    return f"{target['netns']}/{where}" if target.get("netns") else where


def fault_table(soak: Soak) -> list[dict]:
    """One row per planned fault: ``{"name", "kind", "node", "target_text", "state",
    "planned_start", "planned_end", "injected_at", "healed_at", "length_s", "heal_armed_at",
    "heal_verified_at", "heal_method", "heal_how", "heal_command", "inject_command",
    "safety", "error", "checks": {"before"|"during"|"after": [{"check", "value_text",
    "verdict", "explanation"}]}, "verdict"}``."""
    windows = {w["name"]: w for w in queries.soak_fault_windows(soak)}
    out = []
    for row in queries.soak_fault_rows(soak):
        window = windows[row["name"]]
        checks = {phase: [{**c, "value_text": _value_text(c["check"], c["value"], c["unit"])}
                          for c in row["checks"][phase]] for phase in queries.PHASES}
        length = ((window["healed_at"] - window["injected_at"]).total_seconds()
                  if window["injected_at"] and window["healed_at"] else None)
        verdict = row["verdict"]
        if window["injected_at"] is None and row["state"] in ("planned", "armed"):
            verdict = str(gettext_lazy("not yet"))
        out.append({"name": row["name"], "kind": row["kind"], "node": row["node"],
                    "target_text": _target_text(row["kind"], window["target"]),
                    "state": row["state"], "planned_start": window["planned_start"],
                    "planned_end": window["planned_end"],
                    "injected_at": window["injected_at"], "healed_at": window["healed_at"],
                    "length_s": length, "heal_armed_at": window["heal_armed_at"],
                    "heal_verified_at": window["heal_verified_at"],
                    "heal_method": window["heal_method"], "heal_how": window["heal_how"],
                    "heal_command": window["heal_command"],
                    "inject_command": window["inject_command"], "safety": window["safety"],
                    "error": window["error"], "checks": checks, "verdict": verdict,
                    "phases": [{"key": phase, "label": str(PHASE_TEXT[phase]),
                                "checks": checks[phase]} for phase in queries.PHASES],
                    "matrix": _matrix(checks),
                    "verdict_class": verdict if verdict in ("pass", "fail", "insufficient")
                    else "pending"})
    return out


CHECK_NAME = {"error-rate": gettext_lazy("Error rate"),
              "no-interruption": gettext_lazy("No interruption"),
              "ttft-p99": gettext_lazy("TTFT p99"), "throughput": gettext_lazy("Throughput"),
              "correctness": gettext_lazy("Correct answers")}
CHECK_SHORT = {"error-rate": gettext_lazy("error rate"),
               "no-interruption": gettext_lazy("completion gap"),
               "ttft-p99": gettext_lazy("TTFT p99"), "throughput": gettext_lazy("throughput"),
               "correctness": gettext_lazy("correctness")}


def _matrix(checks: dict[str, list[dict]]) -> list[dict]:
    """Checks as rows, phases as columns: ``[{"check", "label", "cells": [{"phase",
    "value_text", "verdict", "explanation"} | None per phase]}]`` in CHECK_KEYS order."""
    keys = [k for k in queries.CHECK_KEYS
            if any(c["check"] == k for phase in checks.values() for c in phase)]
    rows = []
    for key in keys:
        cells = []
        for phase in queries.PHASES:
            found = next((c for c in checks[phase] if c["check"] == key), None)
            cells.append(None if found is None else {
                "phase": phase, "value_text": found["value_text"],
                "verdict": found["verdict"], "explanation": found["explanation"]})
        rows.append({"check": key, "label": str(CHECK_SHORT.get(key, key)), "cells": cells})
    return rows


def progress_view(soak: Soak) -> dict:
    """``queries.soak_progress`` plus display texts: ``elapsed_text``, ``remaining_text``,
    ``plan_elapsed_text``, ``plan_duration_text``, ``plan_remaining_text``, ``compressed``
    (bool), ``percent_text``, ``percent_width`` (0 … 100, for the bar)."""
    p = queries.soak_progress(soak)
    plan_remaining = p["remaining_s"] * p["time_compression"]
    return {**p, "compressed": p["time_compression"] > 1,
            "elapsed_text": duration_text(p["loaded_s"]),
            "remaining_text": duration_text(p["remaining_s"]),
            "duration_text": duration_text(p["duration_s"]),
            "plan_elapsed_text": duration_text(p["plan_elapsed_s"]),
            "plan_remaining_text": duration_text(plan_remaining),
            "plan_duration_text": duration_text(p["plan_duration_s"]),
            "paused_text": duration_text(p["paused_s"]),
            "percent_text": f"{p['percent']:.0f} %",
            "percent_width": f"{min(max(p['percent'], 0.0), 100.0):.1f}"}


def decision_view(soak: Soak) -> dict | None:
    """The recorded G4 decision: ``{"outcome", "sentence", "decided_at", "report_id",
    "stop_reason"}``, or None before it."""
    try:
        decision = soak.gate_run.decision
    except ObjectDoesNotExist:
        return None
    try:
        report = decision.report
    except ObjectDoesNotExist:
        report = None
    return {"outcome": decision.outcome, "sentence": decision.sentence,
            "decided_at": decision.decided_at, "report_id": report.id if report else None,
            "stop_reason": soak.stop_reason}


def soak_view(soak: Soak) -> dict:
    """Everything the soak page shows (see the module doc); ``over`` True when the soak's
    state will not change any more."""
    soak.refresh_from_db()
    simulated = is_simulated(soak)
    plan = soak.plan
    return {
        "soak": soak, "state": soak.state, "over": soak.state in OVER,
        "simulated": simulated, "progress": progress_view(soak),
        "checks": check_rows(soak), "correctness": correctness_latest(soak),
        "charts": soak_charts(soak, simulated=simulated),
        "faults": fault_table(soak), "gaps": queries.soak_gaps(soak),
        "events": queries.soak_events(soak, limit=200),
        "decision": decision_view(soak),
        "plan_summary": plan_summary(plan), "plan_sha256": soak.plan_sha256,
        "abort": {"by": soak.abort_requested_by, "at": soak.abort_requested_at,
                  "reason": soak.abort_reason} if soak.abort_requested_at else None,
        "error": soak.error,
    }


def rate_text(load: dict, derived: str = "") -> str:
    """Where the load's request rate comes from: derived from G2 (the figure and formula, as
    stored when the soak started, or ``derived`` — what it would be now, or why there is no
    default — for a plan whose rate is null), or entered in the plan."""
    basis = load.get("request_rate_basis")
    if basis:
        fields = {k: basis[k] for k in RateBasis.__dataclass_fields__}
        return _("derived from G2 at the start: %(text)s (%(formula)s)") % {
            "text": RateBasis(**fields).text(), "formula": FORMULA}
    if load.get("request_rate") is None:
        return _("the default, derived from G2 when the soak starts (%(formula)s): "
                 "%(now)s") % {"formula": FORMULA, "now": derived}
    return _("as entered in the plan")


def plan_summary(plan: dict, derived: str = "") -> list[tuple[str, str]]:
    """The plan in a few lines a person reads: ``[(label, text)]``; ``derived``: the default
    request rate's basis now, for a plan whose rate is null (``rate_text``)."""
    load = plan["load"]
    rate = load["request_rate"]
    rows = [
        (_("duration"), duration_text(plan["duration_s"])),
        (_("time compression"), _("×%(f)s (lab: %(real)s real)") % {
            "f": f"{plan['time_compression']:g}",
            "real": duration_text(real_s(plan, plan["duration_s"]))}
         if float(plan["time_compression"]) > 1 else _("none (real time)")),
        (_("load"), _("%(rate)s req/s at concurrency %(c)s, windows of %(w)s, model %(m)s")
         % {"rate": _("G2's capacity") if rate is None else f"{rate:.4g}",
            "c": load["concurrency"], "w": duration_text(load["window_s"]),
            "m": load["model"]}),
        (_("request rate"), rate_text(load, derived)),
        (_("sampling"), _("every %(s)s") % {"s": duration_text(plan["sampling_s"])}),
        (_("correctness probe"), _("%(n)s prompts every %(s)s at temperature 0") % {
            "n": len(plan["correctness"]["prompts"]),
            "s": duration_text(plan["correctness"]["every_s"])}),
        (_("steady state"), _("baseline from the first %(n)s windows; %(b)s before and %(a)s "
                              "after each fault") % {
            "n": plan["steady_state"]["baseline_windows"],
            "b": duration_text(plan["steady_state"]["before_s"]),
            "a": duration_text(plan["steady_state"]["after_s"])}),
    ]
    for fault in plan["faults"]:
        rows.append((_("fault %(name)s") % {"name": fault["name"]},
                     _("%(kind)s on %(node)s (%(target)s) at %(start)s for %(len)s") % {
                         "kind": fault["kind"], "node": fault["node"],
                         "target": _target_text(fault["kind"], fault.get("target") or {}),
                         "start": duration_text(fault["start_s"]),
                         "len": duration_text(fault["duration_s"])}))
    return rows


def when_text(at: datetime | None) -> str:
    """``2026-11-30 13:04:05 UTC`` or ``—``."""
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "—"
