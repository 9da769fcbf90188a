"""Celery tasks: thin doors onto ``runners.services``. They take ids, keyword-only."""

from celery import shared_task
from celery.signals import worker_ready

from runners import services


@shared_task(name="runners.node_job_execute", acks_late=False)
def node_job_execute(*, node_job_id: int) -> None:
    services.node_job_execute(node_job_id=node_job_id)


@shared_task(name="runners.gate_run_evaluate", acks_late=False)
def gate_run_evaluate(*, gate_run_id: int) -> None:
    services.gate_run_evaluate(gate_run_id=gate_run_id)


@worker_ready.connect
def recover_on_start(**_kwargs) -> None:
    """A worker that starts (again) first settles runs a dead worker left behind."""
    from runners.control import recover_lost_jobs

    recover_lost_jobs()
