"""The acceptance service: project package (settings, urls, Celery app, engagement domain)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
