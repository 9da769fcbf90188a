"""A real Celery worker (threads, as served) on real PostgreSQL keeps each thread's database
connection from one task to the next (``acceptance.celery``): the node jobs of a second gate
run open no new PostgreSQL connection; and its kept SSH connections are given back and reused.

PostgreSQL from TEST_POSTGRES_URL (a fresh database), Redis from TEST_REDIS_URL; without them
the test skips and says why.
"""

import subprocess
import sys
import uuid

import pytest

from tests.faults.harness import postgres_url  # noqa: F401 (fixture)
from tests.runners.test_worker_paths import ROOT, base_env, manage, redis_url  # noqa: F401
from tests.transport.sshd import descends_from, tcp_client_pid

pytestmark = pytest.mark.slow


def worker_backends(url: str, worker_pid: int) -> set[tuple[int, object]]:
    """(backend pid, backend start) of the PostgreSQL connections the worker holds."""
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://", 1)) as connection:
        rows = connection.execute(
            "select pid, client_port, backend_start from pg_stat_activity "
            "where datname = current_database() and client_port > 0").fetchall()
    held = set()
    for pid, port, started in rows:
        client = tcp_client_pid(port)
        if client is not None and descends_from(client, worker_pid):
            held.add((pid, started))
    return held


def test_a_second_gate_run_opens_no_database_connection_in_the_worker(
        tmp_path, redis_url, postgres_url):  # noqa: F811
    env = base_env(tmp_path, CELERY_BROKER_URL=redis_url, DATABASE_URL=postgres_url,
                   ACCEPTANCE_LOG_LEVEL="INFO")
    assert manage(env, "migrate", "-v", "0").returncode == 0
    up = manage(env, "lab", "up", "--scenario", "slow-link")
    assert up.returncode == 0, up.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=threads",
         "--concurrency=2", "--loglevel=INFO", "--without-heartbeat", "--without-mingle",
         "--without-gossip", "-n", f"test-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        g1 = manage(env, "run_gate", "lab-slow-link", "G1", "--timeout", "240")
        before = worker_backends(postgres_url, worker.pid)
        g2 = manage(env, "run_gate", "lab-slow-link", "G2", "--timeout", "240")
        after = worker_backends(postgres_url, worker.pid)
    finally:
        worker.terminate()
        log = worker.communicate(timeout=60)[0]
        manage(env, "lab", "down")
    assert g1.returncode == 0, g1.stdout + g1.stderr + log[-3000:]
    # slow-link: line efficiency 0.76, FAIL
    assert g2.returncode == 1, g2.stdout + g2.stderr + log[-3000:]
    assert "runners.node_job_execute" in log and "succeeded" in log
    # the worker's threads kept their connections: G2's jobs and evaluation opened none
    # (the worker's main thread holds one too: more than that are the task threads' own)
    assert len(before) >= 2, f"the worker's task threads kept no connection: {before}"
    assert after <= before, (before, after)
