"""The same main job through a real Redis and a real Celery worker, and on real PostgreSQL.

These run the commands as a user would, as subprocesses sharing one database: the embedded
SQLite file (with Redis) or a fresh PostgreSQL database (where one answers). Redis comes from
TEST_REDIS_URL and PostgreSQL from TEST_POSTGRES_URL, both set by scripts/test; without them the
tests skip and say why.
"""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.faults.harness import postgres_url  # noqa: F401 (fixture)
from tests.faults.harness import service_env as base_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def manage(env, *args, timeout=300):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def report_path(stdout):
    return next(line[len("report: "):] for line in stdout.splitlines()
                if line.startswith("report: "))


@pytest.fixture
def redis_url():
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: run through scripts/test, which starts one")
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


def test_it_runs_g1_through_redis_and_a_real_worker(tmp_path, redis_url):
    env = base_env(tmp_path, CELERY_BROKER_URL=redis_url)
    assert manage(env, "migrate", "-v", "0").returncode == 0
    up = manage(env, "lab", "up", "--scenario", "missing-drive")
    assert up.returncode == 0, up.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
         "-n", f"test-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        run = manage(env, "run_gate", "lab-missing-drive", "G1", "--timeout", "240")
    finally:
        worker.terminate()
        log = worker.communicate(timeout=60)[0]
        manage(env, "lab", "down")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "drive_count" in run.stdout and " 23 " in run.stdout
    # The worker, not the command, executed the node job and the evaluation.
    assert "runners.node_job_execute" in log and "succeeded" in log
    assert "runners.gate_run_evaluate" in log
    verify = manage(env, "verify_report", report_path(run.stdout))
    assert verify.returncode == 0, verify.stdout


def test_it_runs_g1_and_g2_on_postgresql(tmp_path, postgres_url):  # noqa: F811
    env = base_env(tmp_path, DATABASE_URL=postgres_url)
    migrate = manage(env, "migrate", "-v", "0")
    assert migrate.returncode == 0, migrate.stderr
    assert manage(env, "lab", "up", "--scenario", "slow-link").returncode == 0
    try:
        g1 = manage(env, "run_gate", "lab-slow-link", "G1")
        g2 = manage(env, "run_gate", "lab-slow-link", "G2")
    finally:
        manage(env, "lab", "down")
    assert g1.returncode == 0, g1.stdout + g1.stderr
    assert g2.returncode == 1, g2.stdout + g2.stderr
    line = next(x for x in g2.stdout.splitlines() if x.startswith("line_efficiency"))
    assert "0.760" in line and "FAIL" in line
    import psycopg

    with psycopg.connect(postgres_url.replace("postgres://", "postgresql://", 1)) as connection:
        outcomes = connection.execute(
            "select g.code, d.outcome from gates_decision d join gates_gate g on g.id = d.gate_id "
            "order by g.code").fetchall()
    assert outcomes == [("G1", "passed"), ("G2", "stopped")]
