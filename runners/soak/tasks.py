"""Celery tasks of the soak: thin doors onto ``runners.soak.driver`` and
``runners.soak.evaluation``. Ids, keyword-only; the domain rings them by name
(``runners.doorbell``), Celery finds this module through ``CELERY_IMPORTS``.

The signed report is issued here, not in the soak domain (which never imports ``reports``):
the driver says when the load is over, evaluation records the decision, this door issues the
report and then finishes the run (or fails it saying the report could not be issued).
"""

import logging

from celery import shared_task

from reports.services import report_issue
from runners.soak import driver, evaluation
from runners.soak.models import Soak

logger = logging.getLogger(__name__)


@shared_task(name="soak.soak_drive", acks_late=False)
def soak_drive(*, soak_id: int, driver_token: str) -> None:
    if driver.soak_drive(soak_id=soak_id, driver_token=driver_token):
        soak_decide(soak_id=soak_id)


@shared_task(name="soak.soak_decide", acks_late=False)
def soak_decide(*, soak_id: int) -> None:
    """Decide a soak whose load is over, issue the signed report, finish the run."""
    soak = Soak.objects.get(id=soak_id)
    decision = evaluation.soak_decide(soak=soak)
    if decision is None:
        return
    try:
        report_issue(decision=decision)
    except Exception as error:  # the decision stands; the run says the report is missing
        logger.exception("report for decision %s failed", decision.id)
        evaluation.soak_report_failed(soak=soak, decision=decision, error=error)
        return
    evaluation.soak_finish(soak=soak)
