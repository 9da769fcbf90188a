"""The Celery application.

With no ``CELERY_BROKER_URL`` set, tasks run in-process (``task_always_eager``): the embedded
default. With ``CELERY_BROKER_URL=redis://…`` the same calls go through Redis to real workers.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

app = Celery("acceptance")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["runners", "gates"])
