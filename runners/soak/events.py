"""The soak's timeline: one ``SoakEvent`` row per step the service (or a person) took on a soak —
agent started, heal armed, fault injected, paused, decided — which the soak page, ``manage.py
soak status`` and the report show in order."""

from __future__ import annotations

from django.utils import timezone

from runners.soak.models import FaultWindow, Soak, SoakEvent

SERVICE_ACTOR = "acceptance service (soak)"


def event_record(soak: Soak, kind: str, text: str, *, actor: str = SERVICE_ACTOR,
                 fault: FaultWindow | None = None) -> None:
    """Record that ``kind`` happened on ``soak`` now, in ``text``, by ``actor``."""
    SoakEvent.objects.create(soak=soak, at=timezone.now(), kind=kind, actor=actor, text=text,
                             fault=fault)
