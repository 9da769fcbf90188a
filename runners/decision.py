"""Deciding a finished gate run: evidence complete or an error, derived figures, verdicts.

``gate_run_decide`` turns a run whose node jobs are all over into a decision (or an error that
says what evidence is missing): the G2/G3 figures are derived from the read measurements and
linked to their inputs, each criterion is evaluated (``gates.evaluation``) and the decision is
recorded (``gates.services.decision_record``). Issuing the signed report is the next step, done
by the door that asked for the decision (the Celery task ``runners.gate_run_evaluate``), so the
dispatcher never imports the reports.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from acceptance import events
from gates import derivations, evaluation
from gates.models import Decision
from gates.services import (
    array_drive_plans,
    criterion_spec,
    decision_record,
    node_array_line_rates,
    readback_plan,
)
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.probes import SIMULATED_MARKER

logger = logging.getLogger(__name__)

#: The start of the error of a customer engagement's run whose evidence came from stand-ins.
SIMULATED_ON_CUSTOMER = "simulated evidence on a customer engagement"


def simulated_evidence_error(gate_run: GateRun, *, extra_nodes: Iterable[str] = ()) -> str:
    """Why ``gate_run`` may not be decided because lab stand-ins produced (some of) its
    evidence on a customer engagement (``is_lab`` false); '' when that is not so. A lab
    engagement is decided on stand-ins by design; a customer's never: its gate would pass or
    stop on figures no hardware of theirs produced. ``extra_nodes``: nodes the caller knows ran
    stand-ins (the soak's agents) without a probe run saying so yet."""
    if gate_run.gate.engagement.is_lab:
        return ""
    runs = list(gate_run.evidence_probe_runs().filter(simulated=True).select_related("node"))
    nodes = sorted({r.node.name if r.node else "service" for r in runs} | set(extra_nodes))
    if not nodes:
        return ""
    return (f"{SIMULATED_ON_CUSTOMER}: {len(runs)} evidence run(s) on {', '.join(nodes)} "
            f"carry the lab stand-in marker ({SIMULATED_MARKER!r}); a customer engagement is "
            f"decided only on its own nodes' real tools, so no decision was recorded. Check "
            f"the node's PATH, then run the gate again.")

def _evidence_errors(gate_run: GateRun) -> list[str]:
    errors = [
        f"{job.node.name}: {job.error_kind}: {job.error}"
        for job in gate_run.node_jobs.select_related("node").filter(
            state__in=[NodeJob.State.FAILED, NodeJob.State.TIMED_OUT])
    ]
    for run in gate_run.evidence_probe_runs().select_related("node").filter(
            state=ProbeRun.State.FAILED):
        where = run.node.name if run.node else "service"
        message = f"{where}: {run.probe}: {run.error_kind}: {run.error}"
        if not any(message in e for e in errors):
            errors.append(message)
    return errors


def _fail(gate_run: GateRun, reason: str) -> GateRun:
    gate_run.state, gate_run.error = GateRun.State.FAILED, reason
    gate_run.finished_at = timezone.now()
    gate_run.save(update_fields=["state", "error", "finished_at"])
    events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
    return gate_run


def _samples(gate_run: GateRun) -> list[evaluation.Sample]:
    return [
        evaluation.Sample(m.id, m.metric, m.value, m.unit, m.labels,
                          m.node.name if m.node else "")
        for m in gate_run.evidence_measurements().select_related("node")
    ]


@transaction.atomic
def _store_derived(gate_run: GateRun, samples: list[evaluation.Sample]) -> None:
    nodes = {n.name: n for n in gate_run.engagement.nodes.all()}
    # G3: all derivations, the aggregate read-back against each array's port.
    arrays = node_array_line_rates(engagement=gate_run.engagement)
    # G1: each array's drives counted and self-tested on its controller.
    drives = array_drive_plans(engagement=gate_run.engagement)
    # G3: the read-back's planned node count and shortest overlap, as the plan says.
    readback = readback_plan(gate=gate_run.gate)
    for d in derivations.derive_all(samples, arrays, drives, readback):
        row = Measurement.objects.create(
            gate_run=gate_run, node=nodes.get(d.node), metric=d.metric, value=d.value,
            unit=d.unit, labels=d.labels, derived=True,
        )
        row.inputs.set(d.input_ids)


@transaction.atomic
def _store_deviations(gate_run: GateRun, criteria, verdicts) -> None:
    """baseline_deviation (METRICS.md) for every ``within`` criterion, linked to its inputs."""
    by_key = {c.key: c for c in criteria}
    for v in verdicts:
        if v.deviation is None:
            continue
        criterion = by_key[v.key]
        row = Measurement.objects.create(
            gate_run=gate_run, metric="baseline_deviation", value=v.deviation, unit="ratio",
            labels={"figure": criterion.metric, **criterion.label_filter}, derived=True,
        )
        row.inputs.set(v.sample_ids)


def gate_run_decide(*, gate_run_id: int) -> Decision | None:
    """Decide a finished run: simulated evidence on a customer engagement
    (:func:`simulated_evidence_error`) or any missing evidence makes it an error (None, the
    run failed with the reason); else the decision is recorded and returned. The run stays
    ``evaluating`` until its report is issued (the report's transaction ends it, done) or could
    not be (:func:`gate_run_report_failed`).

    One transaction under the run's row lock, the decision looked up first: a duplicate
    delivery of the evaluation stores nothing twice and returns the decision already recorded
    (its report is issued idempotently); a run no longer evaluating is left as it is (None).
    """
    with transaction.atomic():
        gate_run = (GateRun.objects.select_for_update(of=("self",))
                    .select_related("gate__engagement").get(id=gate_run_id))
        existing = Decision.objects.filter(gate_run=gate_run).first()
        if existing is not None:
            return existing
        if gate_run.state != GateRun.State.EVALUATING:
            return None
        return _decide(gate_run)


def _decide(gate_run: GateRun) -> Decision | None:
    simulated = simulated_evidence_error(gate_run)
    if simulated:
        _fail(gate_run, simulated)
        return None
    errors = _evidence_errors(gate_run)
    if errors:
        _fail(gate_run, "the run did not produce the evidence needed to decide:\n"
              + "\n".join(errors))
        return None
    _store_derived(gate_run, _samples(gate_run))
    criteria = list(gate_run.gate.criteria.all())
    specs = [criterion_spec(c) for c in criteria]
    samples = _samples(gate_run)
    verdicts = [evaluation.evaluate_criterion(spec, samples) for spec in specs]
    blocking = {s.key: s.blocking for s in specs}
    outcome = evaluation.gate_outcome(verdicts, blocking)
    if outcome == "error":  # insufficient or unstable: no decision, says why
        _fail(gate_run, evaluation.no_decision_reason(verdicts, blocking))
        return None
    _store_deviations(gate_run, criteria, verdicts)
    return decision_record(gate_run=gate_run, verdicts=verdicts, criteria=criteria,
                           outcome=outcome)


def report_missing_reason(decision: Decision, error: BaseException) -> str:
    return (f"decision recorded ({decision.outcome}) but the signed report could not be "
            f"issued: {type(error).__name__}: {error}. The gate does not count as "
            f"{decision.outcome} until it is; recovery (every 30 s, or manage.py recover_runs) "
            f"issues it once the cause is fixed")


def gate_run_report_failed(*, decision: Decision, error: BaseException) -> GateRun:
    """The decision stands but its signed report could not be issued: the run ends as an error
    saying so (announced once; a later failed retry only updates the cause). Recovery issues
    the report later (``runners.launch.runs_recover``) and the run is done then."""
    reason = report_missing_reason(decision, error)
    gate_run = decision.gate_run
    if GateRun.objects.filter(id=gate_run.id, state=GateRun.State.EVALUATING).update(
            state=GateRun.State.FAILED, error=reason, finished_at=timezone.now()):
        events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
    else:
        GateRun.objects.filter(id=gate_run.id, state=GateRun.State.FAILED).update(error=reason)
    gate_run.refresh_from_db()
    return gate_run


def gate_run_done(*, gate_run: GateRun) -> GateRun:
    """The decision and its signed report are in (called in the report's transaction): the
    run is done."""
    gate_run.state, gate_run.finished_at = GateRun.State.DONE, timezone.now()
    gate_run.save(update_fields=["state", "finished_at", "error"])
    return gate_run
