"""Judging the soak: the span figures from the stored samples (``runners.soak.steady``), the
live check states while it runs, and the decision at the end (``gates.evaluation`` on G4's
criteria, recorded with ``gates.services.decision_record``). A stop names the fault window and
the check that failed.

The signed report is not issued here: ``soak_decide`` returns the decision and the door
(``runners.soak.tasks``) issues the report, then calls ``soak_finish`` or, when the report
failed, ``soak_report_failed``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from django.db import transaction
from django.utils import timezone

from acceptance import events
from gates import evaluation
from gates.models import Decision
from gates.services import criterion_spec, decision_record
from runners.models import GateRun, Measurement
from runners.soak import steady
from runners.soak.events import event_record
from runners.soak.models import FaultWindow, Soak
from runners.soak.plan import real_s

logger = logging.getLogger(__name__)


def soak_inputs(soak: Soak) -> tuple[list[steady.Window], list[steady.Answer],
                                     list[steady.Fault]]:
    """The soak's windows, correctness answers and injected fault windows, from the database
    (the inputs of ``steady.derive``)."""
    per_window: dict[tuple[str, int], dict] = {}
    rows = Measurement.objects.filter(
        gate_run_id=soak.gate_run_id, derived=False,
        metric__in=["completed_requests", "failed_requests", "ttft_p99", "output_throughput",
                    "completion_gap_max"]).select_related("node").only(
        "id", "metric", "value", "labels", "node__name", "sampled_at")
    for m in rows.iterator():
        key = (m.node.name, int(m.labels["soak_window"]))
        entry = per_window.setdefault(key, {"ids": []})
        entry[m.metric] = m.value
        entry["ids"].append(m.id)
        if m.metric == "completion_gap_max":
            entry["start"] = float(m.labels["window_start"])
            entry["end"] = m.sampled_at.timestamp()
            entry["first"] = float(m.labels["first_completion"]) if m.labels.get(
                "first_completion") else None
            entry["last"] = float(m.labels["last_completion"]) if m.labels.get(
                "last_completion") else None
    windows = [
        steady.Window(node, index, e["start"], e["end"], e.get("completed_requests", 0.0),
                      e.get("failed_requests", 0.0), e.get("ttft_p99"),
                      e.get("output_throughput"), e["completion_gap_max"], e["first"],
                      e["last"], tuple(e["ids"]))
        for (node, index), e in sorted(per_window.items()) if "start" in e
    ]
    answers = [steady.Answer(m.node.name, m.sampled_at.timestamp(), m.value, m.id)
               for m in Measurement.objects.filter(
                   gate_run_id=soak.gate_run_id, metric="probe_mismatches", derived=False
               ).select_related("node").only("id", "value", "node__name", "sampled_at")]
    faults = [steady.Fault(f.name, f.injected_at.timestamp(),
                           f.healed_at.timestamp() if f.healed_at else None)
              for f in soak.faults.filter(injected_at__isnull=False)]
    return windows, answers, faults


def soak_figures(soak: Soak) -> list[steady.SpanFigure]:
    """Every span figure of the soak so far (``steady.derive`` on the stored samples)."""
    windows, answers, faults = soak_inputs(soak)
    plan = soak.plan
    return steady.derive(
        windows, answers, faults, baseline_windows=int(plan["steady_state"]["baseline_windows"]),
        before_s=real_s(plan, plan["steady_state"]["before_s"]),
        after_s=real_s(plan, plan["steady_state"]["after_s"]), now=time.time())


def soak_checks_update(*, soak: Soak) -> dict:
    """Judge every criterion on the span figures so far and store the result in
    ``soak.checks`` ({criterion key: {state, value, explanation, at}}): the live check states."""
    figures = soak_figures(soak)
    samples = [evaluation.Sample(i, f.metric, f.value, f.unit, f.labels, f.node)
               for i, f in enumerate(figures)]
    checks = {}
    for spec in [criterion_spec(c) for c in soak.gate_run.gate.criteria.all()]:
        if spec.metric in ("soak_duration", "fault_windows_missed"):
            continue
        verdict = evaluation.evaluate_criterion(spec, samples)
        checks[spec.key] = {"state": verdict.verdict, "value": verdict.measured,
                            "unit": spec.unit, "explanation": verdict.explanation,
                            "at": timezone.now().isoformat()}
    Soak.objects.filter(id=soak.id).update(checks=checks)
    return checks


def _store_figures(soak: Soak) -> None:
    nodes = {n.name: n for n in soak.gate_run.gate.engagement.nodes.all()}
    gate_run = soak.gate_run
    with transaction.atomic():
        for figure in soak_figures(soak):
            row = Measurement.objects.create(
                gate_run=gate_run, node=nodes.get(figure.node), metric=figure.metric,
                value=figure.value, unit=figure.unit, labels=figure.labels, derived=True)
            row.inputs.set(figure.input_ids)
        durations: dict[str, list[steady.Window]] = {}
        for window in soak_inputs(soak)[0]:
            durations.setdefault(window.node, []).append(window)
        for node, windows in durations.items():
            loaded = sum(w.end - w.start for w in windows)
            row = Measurement.objects.create(
                gate_run=gate_run, node=nodes.get(node), metric="soak_duration",
                value=loaded * soak.time_compression, unit="s", derived=True,
                labels={"time_compression": f"{soak.time_compression:g}",
                        "real_s": f"{loaded:.1f}", "windows": str(len(windows))})
            row.inputs.set([i for w in windows for i in w.ids[:1]])
        for fault in soak.faults.all():
            missed = 0.0 if fault.state == FaultWindow.State.HEALED else 1.0
            Measurement.objects.create(
                gate_run=gate_run, node=fault.node, metric="fault_windows_missed",
                value=missed, unit="1", derived=True,
                labels={"fault": fault.name, "state": fault.state,
                        **({"reason": fault.error[:120]} if missed else {})})


def _where(soak: Soak, verdict: evaluation.Verdict, samples: list[evaluation.Sample]) -> str:
    """The node and span a failing verdict's worst figure comes from, in words."""
    chosen = [s for s in samples if s.id in set(verdict.sample_ids)]
    worst = next((s for s in chosen if s.value == verdict.measured
                  and s.node == verdict.node), None)
    if worst is None or "phase" not in worst.labels:
        return verdict.node
    if worst.labels.get("fault"):
        fault = soak.faults.filter(name=worst.labels["fault"]).first()
        span = ""
        if fault and fault.injected_at:
            end = f"{fault.healed_at:%H:%M:%S}" if fault.healed_at else "…"
            span = f" {fault.injected_at:%H:%M:%S}–{end} UTC"
        kind = fault.kind if fault else ""
        return (f"{worst.node} in fault window {worst.labels['fault']} ({kind}{span}), "
                f"{worst.labels['phase']} the fault")
    return f"{worst.node} in steady state"


def soak_decide(*, soak: Soak) -> Decision | None:
    """Derive and store the span figures of a soak whose load is over (state evaluating) and
    record G4's decision, in one transaction. None when there is no decision: the evidence
    cannot decide (the soak and its run failed with the reason), or the soak is not waiting
    for one (already decided, or a duplicate call). Figures an evaluation left unfinished by a
    dead worker are replaced."""
    gate_run = GateRun.objects.select_related("gate__engagement").get(id=soak.gate_run_id)
    try:
        with transaction.atomic():
            if not Soak.objects.select_for_update().filter(
                    id=soak.id, state=Soak.State.EVALUATING).exists() or \
                    Decision.objects.filter(gate_run=gate_run).exists():
                return None
            return _decide(soak, gate_run)
    except Exception as error:  # recorded; recovery evaluates again (nothing half-stored)
        logger.exception("soak %s evaluation failed", soak.id)
        event_record(soak, "driver error", f"{type(error).__name__}: {error}")
        raise


def _decide(soak: Soak, gate_run: GateRun) -> Decision | None:
    Measurement.objects.filter(gate_run=gate_run, derived=True).delete()
    _store_figures(soak)
    criteria = list(gate_run.gate.criteria.all())
    samples = [evaluation.Sample(m.id, m.metric, m.value, m.unit, m.labels,
                                 m.node.name if m.node else "")
               for m in gate_run.measurements.filter(derived=True).select_related("node")]
    specs = [criterion_spec(c) for c in criteria]
    verdicts = [evaluation.evaluate_criterion(spec, samples) for spec in specs]
    verdicts = [replace(v, node=_where(soak, v, samples)) if v.verdict == "fail" else v
                for v in verdicts]
    blocking = {s.key: s.blocking for s in specs}
    outcome = evaluation.gate_outcome(verdicts, blocking)
    now = timezone.now()
    if outcome == "error":
        reason = evaluation.no_decision_reason(verdicts, blocking)
        Soak.objects.filter(id=soak.id).update(state=Soak.State.FAILED, finished_at=now,
                                               error=reason)
        GateRun.objects.filter(id=gate_run.id).update(state=GateRun.State.FAILED,
                                                      error=reason, finished_at=now)
        event_record(soak, "no decision", reason)
        events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
        return None
    stop = "; ".join(f"{v.key}: {v.explanation} — {v.node}" for v in verdicts
                     if v.verdict == "fail")
    decision = decision_record(gate_run=gate_run, verdicts=verdicts, criteria=criteria,
                               outcome=outcome)
    Soak.objects.filter(id=soak.id).update(state=Soak.State.DONE, finished_at=now,
                                           stop_reason=stop)
    event_record(soak, f"decided: {outcome}", decision.sentence)
    return decision


def soak_finish(*, soak: Soak) -> None:
    """The decision and its signed report are recorded: the soak's gate run is done."""
    GateRun.objects.filter(id=soak.gate_run_id).update(state=GateRun.State.DONE,
                                                       finished_at=timezone.now())


def soak_report_failed(*, soak: Soak, decision: Decision, error: Exception) -> None:
    """The decision is recorded but its signed report could not be issued: the gate run fails
    saying so (the decision stays)."""
    GateRun.objects.filter(id=soak.gate_run_id).update(
        state=GateRun.State.FAILED, finished_at=timezone.now(),
        error=f"decision recorded ({decision.outcome}) but the signed report could not be "
              f"issued: {type(error).__name__}: {error}")
    events.announce(events.run_failed, gate_run_id=soak.gate_run_id)  # notifications
