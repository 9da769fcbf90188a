"""G3's shared read-back with real Celery workers (threads, one slot per node), PostgreSQL and
Redis: the node jobs run at once, every node waits at the barrier, the samplers start
together and the overlap window is where all of them read. A staggered read-back (node i
starts reading (i − 1) × 8 s late) leaves too short an overlap or none, named in the error.
Lab nodes over SSH, the whole path: plan, barrier, probes, parse, derive, evaluate, report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.faults.harness import ROOT, Site, postgres_url  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

PREPARE = """
from acceptance.models import Engagement
e = Engagement.objects.get(name="{name}")
e.gates.filter(code__in=["G1", "G2"]).update(state="passed")
"""


@pytest.fixture
def redis_url():
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis (TEST_REDIS_URL)")
    import redis

    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


def threads_worker(site: Site, slots: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=threads",
         f"--concurrency={slots}", "--loglevel=WARNING", "--without-heartbeat",
         "--without-mingle", "--without-gossip", "-n", f"readback-{uuid.uuid4().hex[:6]}@%h"],
        cwd=ROOT, env=site.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    site.processes.append(process)
    return process


def g3_with_workers(tmp_path, database, broker, scenario: str, nodes: int):
    site = Site(tmp_path, database, CELERY_BROKER_URL=broker,
                ACCEPTANCE_NODE_JOB_SLOTS=str(nodes + 1), ACCEPTANCE_BARRIER_WAIT_S="240")
    assert site.manage("migrate", "-v", "0").returncode == 0
    try:
        up = site.manage("lab", "up", "--scenario", scenario, "--nodes", str(nodes))
        assert up.returncode == 0, up.stderr
        name = f"lab-{scenario}"
        done = site.manage("shell", "-c", PREPARE.format(name=name))
        assert done.returncode == 0, done.stderr
        threads_worker(site, nodes + 1)
        run = site.manage("run_gate", name, "G3", "--timeout", "600", timeout=660)
        rows = site.query(
            "select m.value, m.labels::text from runners_measurement m join runners_gaterun r "
            "on r.id = m.gate_run_id where m.metric = 'line_efficiency' and m.derived "
            "and m.labels->>'scope' = 'aggregate'")
        waits = site.query("select count(*) from runners_barrierarrival")
        # the signed report decided again from its embedded raw outputs, without the service
        reports = site.query("select r.path from reports_report r join gates_decision d on "
                             "d.id = r.decision_id join gates_gate g on g.id = d.gate_id "
                             "where g.code = 'G3'")
        again = site.manage("redecide", reports[0][0]) if reports else None
    finally:
        log = site.stop_all()
    assert "Traceback" not in run.stderr, run.stderr
    assert len(rows) == 1, run.stdout + run.stderr + log[-3000:]
    return run, rows[0][0], json.loads(rows[0][1]), waits[0][0], again


def test_three_nodes_started_together_read_back_over_their_overlap(
        tmp_path, postgres_url, redis_url):  # noqa: F811
    run, value, labels, arrived, again = g3_with_workers(tmp_path, postgres_url, redis_url,
                                                         "kv-gain", 3)
    assert arrived == 3  # every node came to the barrier
    assert run.returncode == 0, run.stdout + run.stderr
    assert "invalid" not in labels
    assert labels["nodes"] == labels["planned_nodes"] == "3"
    # 3 × 11.0e9 / 3 B/s over the window where all three read, against the 12.5e9 B/s port
    assert value == pytest.approx(11.0e9 / 12.5e9, rel=0.02)
    assert float(labels["window_s"]) >= 2.0
    assert [part.split()[0] for part in labels["clock_skew"].split(", ")] == [
        "lab-inference-1", "lab-inference-2", "lab-inference-3"]
    # summary.json's basis: the three series and clock readings re-parsed, the same overlap
    # window and aggregate derived again, the same verdict
    assert again is not None and again.returncode == 0, again.stdout + again.stderr
    row = next(line.split() for line in again.stdout.splitlines()
               if line.startswith("G3   readback-efficiency"))
    assert row[-2:] == ["pass", "yes"]
    assert "decision G3: recorded passed, recomputed passed" in again.stdout


def test_a_staggered_read_back_leaves_too_short_an_overlap_and_cannot_count(
        tmp_path, postgres_url, redis_url):  # noqa: F811
    # Nodes 2 and 3 start reading 8 s and 16 s after node 1, whose 3 s pass ends long before
    # (plus the SSH steps' own time, which the load stretches): the window where all three
    # read is none, or under the plan's 2 s.
    run, value, labels, arrived, _ = g3_with_workers(tmp_path, postgres_url, redis_url,
                                                     "staggered-readback", 3)
    assert arrived == 3
    assert run.returncode == 2, run.stdout + run.stderr
    length = float(labels["window_s"])
    assert length < 2.0
    if length > 0:
        assert labels["invalid"] == (f"the overlap window is {length:.1f} s, shorter than the "
                                     f"2 s required")
    else:
        assert labels["invalid"].startswith("the nodes' read-back windows do not overlap")
        assert value == 0
    assert labels["invalid"] in run.stdout + run.stderr  # the run's error names it
