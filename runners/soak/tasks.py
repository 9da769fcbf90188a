"""Celery tasks of the soak: thin doors onto ``runners.soak.services``. Ids, keyword-only."""

from celery import shared_task


@shared_task(name="soak.soak_drive", acks_late=False)
def soak_drive(*, soak_id: int, driver_token: str) -> None:
    from runners.soak import services

    services.soak_drive(soak_id=soak_id, driver_token=driver_token)
