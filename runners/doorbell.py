"""The doorbell: the domain asks for work by a task's registered name, never by importing it.

Celery tasks are doors (``runners/tasks.py``, ``runners/soak/tasks.py``) that call the domain's
services; a service that needs more work done (the next node job, the evaluation of a finished
run, the soak driver) rings the task's name here. So the dispatcher never imports its own doors,
and the task modules are found from Celery's configuration (``CELERY_IMPORTS``), not from an
import. On the embedded default (``task_always_eager``) the task runs in this process.

A broker that does not answer (Redis down) makes :func:`ring` raise :class:`BrokerUnavailable`
with one line of reason, after Celery's short publish retry (``CELERY_TASK_PUBLISH_RETRY_POLICY``
in the settings); :func:`broker_check` asks the same before a run is created, and
:func:`queue_waiting` says how many messages wait in the default queue (None: unknown).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.utils.translation import gettext as _
from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)
#: What a broker that does not answer raises from a send (kombu wraps most as OperationalError).
_NOT_SENT = (OperationalError, KombuError, RedisError, OSError)


class BrokerUnavailable(Exception):
    """The task broker did not take the message: nothing was sent. ``gate_run_id`` names the
    run whose task it was, where known."""

    def __init__(self, message: str, *, gate_run_id: int | None = None) -> None:
        super().__init__(message)
        self.gate_run_id = gate_run_id


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _not_answering(error: BaseException) -> str:
    return _("the task broker is not answering (%(reason)s)") % {"reason": _reason(error)}


def _app():
    return current_app._get_current_object()


def ring(task_name: str, **kwargs: Any) -> None:
    """Send the task registered as ``task_name`` with keyword arguments (ids only); raises
    BrokerUnavailable when the broker does not take it."""
    app = _app()
    task = app.tasks.get(task_name)
    if task is None:  # the task modules are imported on first use, from CELERY_IMPORTS
        app.loader.import_default_modules()
        task = app.tasks[task_name]
    try:
        task.delay(**kwargs)
    except _NOT_SENT as error:
        raise BrokerUnavailable(_not_answering(error)) from None


def broker_check() -> None:
    """Raise BrokerUnavailable unless the broker answers now (nothing to ask in-process)."""
    app = _app()
    if app.conf.task_always_eager:
        return
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0.2,
                                         timeout=app.conf.broker_connection_timeout)
    except _NOT_SENT as error:
        raise BrokerUnavailable(_not_answering(error)) from None


def queue_waiting() -> int | None:
    """Messages waiting in the default queue (not yet taken by a worker); None when the broker
    does not say (it does not answer, or runs in-process)."""
    app = _app()
    if app.conf.task_always_eager:
        return None
    queue = app.conf.task_default_queue or "celery"
    try:
        with app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=5)
            declared = connection.default_channel.queue_declare(queue=queue, passive=True)
            return int(declared.message_count)
    except Exception as error:  # a queue not declared yet, a broker down: unknown
        logger.info("queue depth of %s unknown: %s", queue, _reason(error))
        return None


def rings_in_process() -> bool:
    """Whether a ring runs its task here and now, inside the call (``task_always_eager``)."""
    return bool(_app().conf.task_always_eager)
