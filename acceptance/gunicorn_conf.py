"""gunicorn's configuration for ``manage.py serve`` (``--config python:acceptance.gunicorn_conf``).

Logs as JSON lines like the rest of the service when ``ACCEPTANCE_LOG_FORMAT=json``; the access
log on stdout. ``ACCEPTANCE_FORWARDED_ALLOW_IPS`` lists the proxies whose X-Forwarded-* headers
gunicorn believes (default: 127.0.0.1); Django's own HTTPS detection is
``ACCEPTANCE_SECURE_PROXY_SSL_HEADER``.
"""

import os

from django.conf import settings

from acceptance.logging import gunicorn_logconfig

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

accesslog = "-"
errorlog = "-"
forwarded_allow_ips = os.environ.get("ACCEPTANCE_FORWARDED_ALLOW_IPS", "127.0.0.1")
timeout = 120  # a report download or a long page; runs go to the workers
graceful_timeout = 25
if settings.LOG_FORMAT == "json":
    logconfig_dict = gunicorn_logconfig(str(settings.LOGGING["root"]["level"]))
