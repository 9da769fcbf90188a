"""The Celery application.

With no ``CELERY_BROKER_URL`` set, tasks run in-process (``task_always_eager``): the embedded
default. With ``CELERY_BROKER_URL=redis://…`` the same calls go through Redis to real workers;
``manage.py serve`` on the embedded default uses ``filesystem://`` (files under ``var/broker``),
so its workers are separate processes there too.

A worker's and beat's log lines are JSON like the rest when ``ACCEPTANCE_LOG_FORMAT=json``:
Celery keeps its own handlers and log level, they get the service's formatter and id filter.
"""

import logging
import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

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
