"""The notifications room: listens to the domain's events (``acceptance.events``) and rings its
own task for each; the domain never imports it."""

from __future__ import annotations

from functools import partial

from django.apps import AppConfig

from acceptance import events
from runners import doorbell


def _ring(kind: str, sender=None, signal=None, **ids) -> None:
    doorbell.ring("notifications.notice_send", kind=kind, ids=ids)


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        for kind, signal in events.SIGNALS.items():
            signal.connect(partial(_ring, kind), weak=False,
                           dispatch_uid=f"notifications.{kind}")
