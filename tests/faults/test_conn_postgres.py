"""PostgreSQL connections terminated mid-probe (``pg_terminate_backend`` on every connection
of the service's database): the worker reconnects and settles the probe run as ``database``,
the remote fio is killed, the run ends, and ``run_gate`` — whose own connection was cut too —
reconnects and answers with its documented exit status, no traceback. Real worker, private
Redis, a lab node with a slow fio."""

import time

import pytest

from tests.faults.harness import (
    Site,
    fio_running,
    lab_with_slow_fio,
    postgres_url,  # noqa: F401 (fixture)
    private_redis,  # noqa: F401 (fixture)
    processes_matching,
    wait_for,
)

pytestmark = pytest.mark.slow


def test_terminated_database_connections_settle_the_probe_run_and_kill_the_remote_fio(
        tmp_path, private_redis, postgres_url):  # noqa: F811
    site = Site(tmp_path, postgres_url, CELERY_BROKER_URL=private_redis.url)
    scratch = lab_with_slow_fio(site, runtime=300)
    site.worker()
    runner = site.start("run_gate", "lab-healthy", "G2", "--timeout", "200")
    try:
        wait_for(lambda: fio_running(site), timeout=90, what="fio to start")
        wait_for(lambda: processes_matching(str(scratch)), what="fio on the node")
        time.sleep(1)
        assert site.terminate_connections() >= 2  # the worker's and run_gate's at least
        wait_for(lambda: site.query("select state from runners_proberun where probe = "
                                    "'fio_seqread'") != [("running",)], timeout=60,
                 what="the probe run settled")
        out, err = runner.communicate(timeout=120)
    finally:
        log = site.stop_all()
    assert runner.returncode == 2, out + err + log[-3000:]
    assert "Traceback" not in err
    assert "run failed (no decision)" in err and "database" in err
    [(state, kind, error)] = site.query("select state, error_kind, error from runners_proberun "
                                        "where probe = 'fio_seqread'")
    assert (state, kind) == ("failed", "database")
    assert error.startswith("the database connection was lost during the probe")
    assert "remote process group: gone" in error
    assert processes_matching(str(scratch)) == []
    assert site.query("select state, error_kind from runners_nodejob") == [
        ("failed", "database")]
    assert site.query("select count(*) from runners_proberun where probe = "
                      "'vllm_bench_serve'") == [(0,)]
    assert site.query("select state from runners_gaterun") == [("failed",)]


def test_every_api_endpoint_answers_a_lost_database_with_503_and_one_line():
    from django.db import OperationalError

    from acceptance.api.errors import exception_handler
    from runners.doorbell import BrokerUnavailable

    lost = exception_handler(OperationalError(
        "terminating connection due to administrator command\nSSL SYSCALL error"), {})
    assert lost.status_code == 503
    assert lost.data == {"detail": "the database is not answering (terminating connection "
                                   "due to administrator command)"}
    refused = exception_handler(BrokerUnavailable("the task broker is not answering (x)"), {})
    assert (refused.status_code, refused.data["detail"]) == (
        503, "refused: the task broker is not answering (x)")
