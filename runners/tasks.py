"""Celery tasks: thin doors onto the dispatcher's services. They take ids, keyword-only, and are
rung by name (``runners.doorbell``).

``gate_run_evaluate`` is where the two rooms meet: the dispatcher decides the run
(``runners.decision``), then the reports room issues the signed report of the decision. Neither
imports the other.
"""

import logging

from celery import shared_task
from celery.signals import worker_ready

from acceptance.logging import log_context
from gates.models import Decision
from reports.services import report_files_recover, report_issue
from runners import decision, execution
from runners.launch import runs_recover
from runners.retention import raw_outputs_prune

logger = logging.getLogger(__name__)


@shared_task(name="runners.node_job_execute", acks_late=False)
def node_job_execute(*, node_job_id: int) -> None:
    with log_context(node_job=node_job_id):  # execution adds the engagement, run and node
        execution.node_job_execute(node_job_id=node_job_id)


@shared_task(name="runners.gate_run_evaluate", acks_late=False)
def gate_run_evaluate(*, gate_run_id: int) -> None:
    """Decide the finished run, then issue its signed report (or say why it could not be)."""
    with log_context(gate_run=gate_run_id):
        _gate_run_evaluate(gate_run_id=gate_run_id)


def _gate_run_evaluate(*, gate_run_id: int) -> None:
    decided = decision.gate_run_decide(gate_run_id=gate_run_id)
    if decided is not None:
        _report_issue(decided)


def _report_issue(decided) -> None:
    """Issue the signed report of ``decided`` (its transaction settles the gate and ends the
    run done; idempotent), or end the run as an error saying the report is missing."""
    try:
        report_issue(decision=decided)
    except Exception as error:  # the decision stands; recovery issues the report later
        logger.exception("report for decision %s failed", decided.id)
        decision.gate_run_report_failed(decision=decided, error=error)


@shared_task(name="runners.decision_report_issue", acks_late=False)
def decision_report_issue(*, decision_id: int) -> None:
    """Recovery's door: issue the missing signed report of a decision (a worker killed while
    rendering it, a full disk); a report issued meanwhile makes it a no-op."""
    decided = Decision.objects.select_related("gate_run").get(id=decision_id)
    with log_context(gate_run=decided.gate_run_id):
        _report_issue(decided)


def recover_all() -> list[str]:
    """``runs_recover`` and the report files a killed writer left (``reports.storage``)."""
    return runs_recover() + report_files_recover()


@shared_task(name="runners.runs_recover", acks_late=False)
def runs_recover_task() -> None:
    """Beat's periodic sweep: lost node jobs failed, stopped soaks re-attached, missing reports
    issued, unfinished report files removed."""
    for line in recover_all():
        logger.warning("recovered: %s", line)


@worker_ready.connect
def recover_on_start(**_kwargs) -> None:
    """A worker that starts (again) first settles runs a dead worker left behind."""
    recover_all()


@shared_task(name="runners.raw_outputs_prune", acks_late=False)
def raw_outputs_prune_task() -> None:
    """Retention, for beat (e.g. daily); does nothing while retention is off."""
    summary = raw_outputs_prune()
    if summary.enabled:
        logger.info("retention pruned %s raw outputs (%s bytes)", summary.probe_runs,
                    summary.bytes)
