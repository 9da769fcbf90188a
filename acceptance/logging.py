"""Log records as one JSON object per line, with the ids of the work they belong to.

``log_context(engagement=…, gate_run=…, node=…, probe=…)`` sets the ids for the code it wraps
(a ``contextvars`` variable, so threads and tasks each keep their own); ``ContextFilter`` copies
them onto every record a handler writes, and ``json_formatter`` (python-json-logger) writes
``time`` (ISO 8601, UTC), ``level``, ``logger``, ``pid``, ``message``, the ids where known and any
``extra=`` fields. Django's ``LOGGING`` uses both (``ACCEPTANCE_LOG_FORMAT=json``); Celery's and
gunicorn's handlers get the same through ``json_handlers_install`` and ``gunicorn_logconfig``.

Secrets stay out as before: the formatter adds only what the record carries, and no caller puts
a key, passphrase or token into a record.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

#: The ids a record may carry, in the order they are written.
CONTEXT_KEYS = ("engagement", "gate_run", "node_job", "node", "probe", "probe_run")

_context: ContextVar[dict[str, object] | None] = ContextVar("acceptance_log_context",
                                                          default=None)


def _ids() -> dict[str, object]:
    return _context.get() or {}


@contextmanager
def log_context(**ids: object) -> Iterator[None]:
    """Add ``ids`` (names from ``CONTEXT_KEYS``; None values are left out) to every record
    logged inside the block; the outer ids come back after it."""
    token = _context.set(_context.get())
    log_context_add(**ids)
    try:
        yield
    finally:
        _context.reset(token)


def log_context_add(**ids: object) -> None:
    """Add ``ids`` for the rest of the enclosing ``log_context`` block (whose end drops them)."""
    unknown = set(ids) - set(CONTEXT_KEYS)
    if unknown:
        raise ValueError(f"unknown log context keys: {', '.join(sorted(unknown))}")
    _context.set({**_ids(), **{k: v for k, v in ids.items() if v is not None}})


def log_context_now() -> dict[str, object]:
    """The ids in force here (a copy)."""
    return dict(_ids())


class ContextFilter(logging.Filter):
    """Copy the ids of ``log_context`` onto each record (never overwriting a field the record
    already has)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _ids().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class ClientErrorFilter(logging.Filter):
    """A refused request (4xx: a 403 for another role, a 404) is logged in one line, without
    the traceback of the ``PermissionDenied`` / ``Http404`` that answered it: that is the
    service working, not failing. Server errors (5xx) keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500 and record.exc_info:
            record.exc_info, record.exc_text = None, None
        return True


def json_formatter() -> logging.Formatter:
    return JsonFormatter(
        "{levelname}{name}{process}{message}",
        style="{",
        rename_fields={"levelname": "level", "name": "logger", "process": "pid"},
        timestamp="time",
        json_ensure_ascii=False,
    )


def json_handlers_install(logger: logging.Logger) -> None:
    """Give the handlers Celery set up on ``logger`` the JSON formatter and the id filter."""
    for handler in logger.handlers:
        handler.setFormatter(json_formatter())
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())


def gunicorn_logconfig(level: str = "INFO") -> dict[str, object]:
    """gunicorn's ``logconfig_dict``: its error and access logs as JSON lines on stderr/stdout."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "acceptance.logging.json_formatter"}},
        "handlers": {
            "error_console": {"class": "logging.StreamHandler", "formatter": "json",
                              "stream": "ext://sys.stderr"},
            "console": {"class": "logging.StreamHandler", "formatter": "json",
                        "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["error_console"],
                               "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
        "root": {"level": level, "handlers": ["error_console"]},
    }
