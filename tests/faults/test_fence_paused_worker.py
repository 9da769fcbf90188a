"""Fencing: a worker paused (SIGSTOP) longer than the lost threshold, then resumed, finds its
job declared lost and stops — it runs no next probe on the node and writes nothing over the
``lost`` record (real worker, private Redis, PostgreSQL, a lab node with a slow fio)."""

import os
import signal
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


def test_a_resumed_worker_whose_job_was_declared_lost_touches_neither_node_nor_ledger(
        tmp_path, private_redis, postgres_url):  # noqa: F811
    site = Site(tmp_path, postgres_url, CELERY_BROKER_URL=private_redis.url,
                RUNS_LOST_AFTER_SECONDS="4")
    scratch = lab_with_slow_fio(site, runtime=300)
    worker = site.worker()
    runner = site.start("run_gate", "lab-healthy", "G2", "--timeout", "200")
    try:
        wait_for(lambda: fio_running(site), timeout=90, what="fio to start")
        wait_for(lambda: processes_matching(str(scratch)), what="fio on the node")
        os.killpg(worker.pid, signal.SIGSTOP)  # the worker is paused mid-probe
        time.sleep(6)  # longer than the lost threshold (4 s): its heartbeat goes stale
        recovered = site.manage("recover_runs")
        assert recovered.returncode == 0, recovered.stderr
        assert "lost: no heartbeat" in recovered.stdout
        lost_record = site.query("select state, error_kind, error, finished_at from "
                                 "runners_proberun where probe = 'fio_seqread'")
        assert [r[:2] for r in lost_record] == [("failed", "lost")]
        # the kind is said once where kind and words are shown together ("lost: no …")
        assert lost_record[0][2].startswith("no heartbeat from its worker since "), lost_record
        assert processes_matching(str(scratch)) == []  # recovery killed it on the node
        os.killpg(worker.pid, signal.SIGCONT)  # … and the worker resumes
        out, err = runner.communicate(timeout=120)
    finally:
        log = site.stop_all()
    assert runner.returncode == 2, out + err
    assert "Traceback" not in err
    # The resumed worker saw its lease gone and stopped there.
    assert "is no longer this worker's" in log, log[-3000:]
    # Nothing it did after resuming reached the ledger: the lost record is as recovery wrote
    # it, no next probe started on the node, the job stays lost.
    assert site.query("select state, error_kind, error, finished_at from runners_proberun "
                      "where probe = 'fio_seqread'") == lost_record
    assert site.query("select probe from runners_proberun where node_id is not null "
                      "order by id") == [("link_speed",), ("fio_seqread",)]
    assert site.query("select state, error_kind from runners_nodejob") == [("failed", "lost")]
    assert processes_matching(str(scratch)) == []
    assert site.query("select state from runners_gaterun") == [("failed",)]
    assert site.query("select count(*) from gates_decision") == [(0,)]
