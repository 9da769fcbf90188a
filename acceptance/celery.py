"""The Celery application.

With no ``CELERY_BROKER_URL`` set, tasks run in-process (``task_always_eager``): the embedded
default. With ``CELERY_BROKER_URL=redis://…`` the same calls go through Redis to real workers;
``manage.py serve`` on the embedded default uses ``filesystem://`` (files under ``var/broker``),
so its workers are separate processes there too.

A worker keeps each thread's database connection from one task to the next
(:func:`db_connections_keep`): a node job then opens no new PostgreSQL connection (issue 17).

A worker's and beat's log lines are JSON like the rest when ``ACCEPTANCE_LOG_FORMAT=json``:
Celery keeps its own handlers and log level, they get the service's formatter and id filter.
"""

import logging
import os
import threading

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    task_postrun,
    task_prerun,
    worker_init,
)
from django.conf import settings  # type: ignore[import-untyped]
from django.db import connections  # type: ignore[import-untyped]

from acceptance.logging import json_handlers_install

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

app = Celery("acceptance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runners", "gates"])


@after_setup_logger.connect  # type: ignore[untyped-decorator]
@after_setup_task_logger.connect  # type: ignore[untyped-decorator]
def json_logs(logger: logging.Logger, **_kwargs: object) -> None:
    if app.conf.get("log_json"):  # settings.CELERY_LOG_JSON, from ACCEPTANCE_LOG_FORMAT
        json_handlers_install(logger)


# The threads of this worker process whose database connection is kept between tasks.
_kept: set[int] = set()
_kept_lock = threading.Lock()


@worker_init.connect  # type: ignore[untyped-decorator]
def db_connections_keep(**_kwargs: object) -> None:
    """In a worker (not in the web server, not for eager tasks): each thread's connection lives
    ``WORKER_DB_CONN_MAX_AGE`` seconds and is checked (``SELECT 1``) before a task's first
    query, instead of being opened and closed by every task. Celery's own Django fix-up, which
    closes it after every task, is kept away by ``CELERY_DB_REUSE_MAX``; the tasks' signals
    below take its place."""
    for alias in connections:
        connections.settings[alias]["CONN_MAX_AGE"] = settings.WORKER_DB_CONN_MAX_AGE
        connections.settings[alias]["CONN_HEALTH_CHECKS"] = True


def _is_eager(sender: object) -> bool:
    return bool(getattr(getattr(sender, "request", None), "is_eager", False))


@task_prerun.connect  # type: ignore[untyped-decorator]
def db_connection_check(sender: object = None, **_kwargs: object) -> None:
    """Before a task: a connection that broke, outlived its age or was left in a transaction
    is closed (the task's first query opens a new one, or checks the kept one)."""
    if _is_eager(sender):
        return
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()


@task_postrun.connect  # type: ignore[untyped-decorator]
def db_connection_settle(sender: object = None, **_kwargs: object) -> None:
    """After a task: the thread keeps its connection while at most
    ``WORKER_DB_CONNECTIONS_KEPT`` threads of this process keep one (PostgreSQL's
    ``max_connections`` is shared with the web server, beat and the other workers); otherwise,
    or when it broke or outlived its age, it is closed as Celery would."""
    if _is_eager(sender):
        return
    me = threading.get_ident()
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()
        with _kept_lock:
            keep = connection.connection is not None and (
                me in _kept or len(_kept) < settings.WORKER_DB_CONNECTIONS_KEPT)
            if keep:
                _kept.add(me)
            else:
                _kept.discard(me)
        if not keep:
            connection.close()
