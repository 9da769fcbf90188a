"""What happened, told to whoever listens: Django signals the domain sends after commit.

The domain's services (a gate decided, a report issued or waiting for a sign-off, a run failed
or lost, a soak fault window failed or a soak interrupted) announce it here with
:func:`announce`; the notifications room (``notifications.apps``) listens and rings its own
Celery task. So the domain never imports notifications, and a listener can neither delay nor
change what was decided: every signal is sent only once the transaction that did the thing has
committed, and a listener's error is logged, never raised into the service.

Every signal carries ids only (keyword arguments), never model instances.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

gate_decided = Signal()  # decision_id
report_issued = Signal()  # report_id
signoff_waiting = Signal()  # report_id, parties: list of "vendor" / "customer" still to sign
run_failed = Signal()  # gate_run_id
run_lost = Signal()  # node_job_id
soak_fault_window_failed = Signal()  # fault_window_id
soak_interrupted = Signal()  # soak_id

SIGNALS = {
    "gate_decided": gate_decided, "report_issued": report_issued,
    "signoff_waiting": signoff_waiting, "run_failed": run_failed, "run_lost": run_lost,
    "soak_fault_window_failed": soak_fault_window_failed, "soak_interrupted": soak_interrupted,
}


def _send(signal: Signal, kwargs: dict[str, Any]) -> None:
    for receiver, result in signal.send_robust(sender=None, **kwargs):
        if isinstance(result, Exception):
            logger.error("event listener %r failed: %s: %s", receiver,
                         type(result).__name__, result)


def announce(signal: Signal, **kwargs: Any) -> None:
    """Send ``signal`` with ``kwargs`` (ids) once the current transaction commits (at once
    outside one); listeners' errors are logged."""
    transaction.on_commit(lambda: _send(signal, kwargs), robust=True)
