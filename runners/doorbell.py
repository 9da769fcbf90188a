"""The doorbell: the domain asks for work by a task's registered name, never by importing it.

Celery tasks are doors (``runners/tasks.py``, ``runners/soak/tasks.py``) that call the domain's
services; a service that needs more work done (the next node job, the evaluation of a finished
run, the soak driver) rings the task's name here. So the dispatcher never imports its own doors,
and the task modules are found from Celery's configuration (``CELERY_IMPORTS``), not from an
import. On the embedded default (``task_always_eager``) the task runs in this process.
"""

from __future__ import annotations

from typing import Any

from celery import current_app


def ring(task_name: str, **kwargs: Any) -> None:
    """Send the task registered as ``task_name`` with keyword arguments (ids only)."""
    app = current_app._get_current_object()
    task = app.tasks.get(task_name)
    if task is None:  # the task modules are imported on first use, from CELERY_IMPORTS
        app.loader.import_default_modules()
        task = app.tasks[task_name]
    task.delay(**kwargs)
