"""JSON log lines: time, level, logger, pid and message, plus the ids of the work in progress
(log_context), dropped again when the block ends; unknown id names are refused."""

import io
import json
import logging
import os
import threading

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils.module_loading import import_string

from acceptance import logging as acceptance_logging
from acceptance.logging import ContextFilter, json_formatter, log_context, log_context_add


@pytest.fixture
def logged():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(json_formatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("tests.production.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    # Start from no ids: code an earlier test ran in this thread may have added some outside a
    # log_context block (in-process tasks), which stay for the thread's rest.
    token = acceptance_logging._context.set(None)
    yield logger, lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)
    acceptance_logging._context.reset(token)


def test_each_record_is_one_json_object_with_the_ids_where_known(logged):
    logger, records = logged
    with log_context(node_job=7):
        log_context_add(engagement="acme.site-1", gate_run=3, node="array-ctl")
        log_context_add(probe="nvme_inventory")
        logger.info("probe %s started", "nvme_inventory")
    logger.warning("after the job")
    inside, after = records()
    assert {k: inside[k] for k in ("level", "logger", "message", "engagement", "gate_run",
                                   "node_job", "node", "probe", "pid")} == {
        "level": "INFO", "logger": "tests.production.json",
        "message": "probe nvme_inventory started", "engagement": "acme.site-1", "gate_run": 3,
        "node_job": 7, "node": "array-ctl", "probe": "nvme_inventory", "pid": os.getpid()}
    assert inside["time"].endswith("+00:00")
    assert "gate_run" not in after and after["message"] == "after the job"


def test_threads_keep_their_own_ids(logged):
    logger, records = logged

    def job(number):
        with log_context(node_job=number):
            logger.info("job %s", number)

    threads = [threading.Thread(target=job, args=(n,)) for n in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted((r["message"], r["node_job"]) for r in records()) == [
        ("job 1", 1), ("job 2", 2), ("job 3", 3)]


def test_it_refuses_an_unknown_id_name():
    with pytest.raises(ValueError, match="unknown log context keys: password"):
        log_context_add(password="x")


def test_a_refused_request_logs_one_line_and_a_server_error_its_traceback():
    # The handler as settings.LOGGING builds it: a 403 page (another role) logged a whole
    # PermissionDenied traceback on the console each time
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    for name in ("ids", "client_errors"):
        spec = dict(settings.LOGGING["filters"][name])
        handler.addFilter(import_string(spec.pop("()"))(**spec))
    assert name in settings.LOGGING["handlers"]["console"]["filters"]
    logger = logging.getLogger("tests.production.request")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for status, error in ((403, PermissionDenied("Only a project manager may do this.")),
                              (500, RuntimeError("boom"))):
            try:
                raise error
            except Exception:
                logger.warning("Forbidden: /engagements/x/", exc_info=True,
                               extra={"status_code": status})
    finally:
        logger.removeHandler(handler)
    forbidden, failed = stream.getvalue().split("Forbidden: /engagements/x/\n", 2)[1:]
    assert forbidden == ""
    assert "Traceback" in failed and "RuntimeError: boom" in failed
