"""Celery tasks of the notifications room: thin doors rung by name (``runners.doorbell``).

``notice_send`` builds a notice's deliveries; ``delivery_send`` makes one attempt and, while
attempts remain, retries itself with exponential back-off; ``schedule_sweep`` (Celery beat,
``CELERY_BEAT_SCHEDULE``) sends what time alone makes due.
"""

from celery import shared_task
from django.conf import settings

from notifications import services
from notifications.models import Delivery


@shared_task(name="notifications.notice_send", acks_late=False)
def notice_send(*, kind: str, ids: dict) -> None:
    services.notice_send(kind=kind, **ids)


@shared_task(name="notifications.delivery_send", bind=True, acks_late=False, max_retries=None)
def delivery_send(self, *, delivery_id: int) -> None:
    status = services.delivery_attempt(delivery_id=delivery_id)
    if status == Delivery.Status.RETRYING:
        raise self.retry(countdown=services.backoff_s(self.request.retries),
                         max_retries=settings.NOTIFY_MAX_ATTEMPTS)


@shared_task(name="notifications.schedule_sweep", acks_late=False)
def schedule_sweep() -> None:
    services.schedule_sweep()
