"""Celery tasks: thin doors onto the dispatcher's services. They take ids, keyword-only, and are
rung by name (``runners.doorbell``).

``gate_run_evaluate`` is where the two rooms meet: the dispatcher decides the run
(``runners.decision``), then the reports room issues the signed report of the decision. Neither
imports the other.
"""

import logging

from celery import shared_task
from celery.signals import worker_ready

from reports.services import report_issue
from runners import decision, execution
from runners.launch import runs_recover
from runners.retention import raw_outputs_prune

logger = logging.getLogger(__name__)


@shared_task(name="runners.node_job_execute", acks_late=False)
def node_job_execute(*, node_job_id: int) -> None:
    execution.node_job_execute(node_job_id=node_job_id)


@shared_task(name="runners.gate_run_evaluate", acks_late=False)
def gate_run_evaluate(*, gate_run_id: int) -> None:
    """Decide the finished run, then issue its signed report (or say why it could not be)."""
    decided = decision.gate_run_decide(gate_run_id=gate_run_id)
    if decided is None:
        return
    try:
        report_issue(decision=decided)
    except Exception as error:
        logger.exception("report for decision %s failed", decided.id)
        decision.gate_run_report_failed(decision=decided, error=error)
        return
    decision.gate_run_done(gate_run=decided.gate_run)


@worker_ready.connect
def recover_on_start(**_kwargs) -> None:
    """A worker that starts (again) first settles runs a dead worker left behind."""
    runs_recover()


@shared_task(name="runners.raw_outputs_prune", acks_late=False)
def raw_outputs_prune_task() -> None:
    """Retention, for beat (e.g. daily); does nothing while retention is off."""
    summary = raw_outputs_prune()
    if summary.enabled:
        logger.info("retention pruned %s raw outputs (%s bytes)", summary.probe_runs,
                    summary.bytes)
