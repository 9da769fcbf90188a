"""Three days unattended, compressed: the soak as a person runs it — commands as subprocesses
sharing one database — paused, resumed and aborted by an engineer, and surviving a worker
killed in the middle (a real Celery worker with Redis)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.faults.harness import service_env as base_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SETUP = """
from gates.models import Gate
from runners.lab.services import lab_up
engagement, _ = lab_up(scenario_name="soak-clean", overrides={"soak": {"seconds": %d}})
Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(state="passed")
"""


def manage(env, *args, timeout=120):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def start_manage(env, *args):
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def query(tmp_path, sql, *params):
    with sqlite3.connect(tmp_path / "var" / "acceptance.sqlite3", timeout=30) as db:
        return db.execute(sql, params).fetchall()


def wait_for(predicate, timeout=90, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def prepared(tmp_path, seconds, **extra):
    env = base_env(tmp_path, **extra)
    assert manage(env, "migrate", "-v", "0").returncode == 0
    setup = manage(env, "shell", "-c", SETUP % seconds)
    assert setup.returncode == 0, setup.stderr
    return env


def fault_state(tmp_path, name):
    rows = query(tmp_path, "select state, heal_how, injected_at, healed_at from "
                 "soak_faultwindow where name = ?", name)
    return rows[0] if rows else (None, None, None, None)


def window_lines(tmp_path):
    rows = query(tmp_path, "select remote_dir from soak_soakagent")
    path = Path(rows[0][0]) / "windows.jsonl" if rows else None
    return path.read_text().splitlines() if path and path.exists() else []


def test_an_engineer_pauses_resumes_and_aborts_a_soak_and_the_fault_on_is_healed(tmp_path):
    env = prepared(tmp_path, 40)
    run = start_manage(env, "run_gate", "lab-soak-clean", "G4", "--timeout", "300")
    try:
        wait_for(lambda: len(window_lines(tmp_path)) >= 3, what="three load windows")
        paused = manage(env, "soak", "pause", "lab-soak-clean", "--reason",
                        "customer change window", "--by", "eng-bob")
        assert paused.returncode == 0, paused.stderr
        assert "paused" in paused.stdout
        time.sleep(1.5)  # the window under way ends
        before = len(window_lines(tmp_path))
        time.sleep(3)
        assert len(window_lines(tmp_path)) == before  # no window starts while paused
        resumed = manage(env, "soak", "resume", "lab-soak-clean", "--by", "eng-bob")
        assert resumed.returncode == 0, resumed.stderr
        (paused_s,), = query(tmp_path, "select paused_s from soak_soak")
        assert paused_s >= 4.0
        wait_for(lambda: len(window_lines(tmp_path)) > before, what="load again")
        wait_for(lambda: fault_state(tmp_path, "drive-out")[0] == "injected", timeout=60,
                 what="the drive fault")
        aborted = manage(env, "soak", "abort", "lab-soak-clean", "--reason",
                         "the customer stops the test", "--by", "eng-bob")
        assert aborted.returncode == 0, aborted.stderr
        out = run.communicate(timeout=120)[0]
    finally:
        if run.poll() is None:
            run.kill()
        manage(env, "lab", "down")
    assert run.returncode == 2, out
    assert "run cancelled by eng-bob" in out
    state, how, injected_at, healed_at = fault_state(tmp_path, "drive-out")
    assert (state, how) == ("healed", "abort") and healed_at >= injected_at
    array_state = tmp_path / "var" / "lab" / "lab-soak-clean" / "array-state.json"
    assert json.loads(array_state.read_text()) == {"drives_out": []}
    assert query(tmp_path, "select state from soak_soak") == [("aborted",)]
    assert query(tmp_path, "select state from soak_soakagent") == [("stopped",)]
    kinds = [k for (k,) in query(tmp_path, "select kind from soak_soakevent order by id")]
    assert kinds.index("paused") < kinds.index("resumed") < kinds.index("aborted")
    assert query(tmp_path, "select state from runners_gaterun") == [("cancelled",)]


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


def start_worker(env):
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
         "-n", f"soak-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_worker_killed_mid_soak_leaves_a_continuous_record_with_the_gap_marked(
        tmp_path, redis_url):
    env = prepared(tmp_path, 40, CELERY_BROKER_URL=redis_url, RUNS_LOST_AFTER_SECONDS="4")
    first = start_worker(env)
    second = None
    run = start_manage(env, "run_gate", "lab-soak-clean", "G4", "--timeout", "300")
    try:
        wait_for(lambda: fault_state(tmp_path, "drive-out")[0] == "injected", timeout=120,
                 what="the drive fault")
        os.kill(first.pid, signal.SIGKILL)  # the worker driving the soak dies
        killed_at = time.time()
        first.communicate(timeout=30)
        time.sleep(6)  # meanwhile the agent loads on, and the armed heal fires on the node
        restarted_at = time.time()
        second = start_worker(env)
        out = run.communicate(timeout=240)[0]
    finally:
        for process in (run, first, second):
            if process is not None and process.poll() is None:
                process.terminate()
        log = second.communicate(timeout=60)[0] if second is not None else ""
        manage(env, "lab", "down")
    assert run.returncode == 0, out + log
    assert "decision: PASSED" in out
    # The heal armed on the node restored the drive while no worker was there.
    state, how, _injected, healed_at = fault_state(tmp_path, "drive-out")
    assert (state, how) == ("healed", "timer")
    healed = query(tmp_path, "select cast(strftime('%s', healed_at) as real) from "
                   "soak_faultwindow where name = 'drive-out'")[0][0]
    assert killed_at - 1 < healed < restarted_at
    # The gap is recorded, spanning the kill, and says why.
    gaps = query(tmp_path, "select cast(strftime('%s', started_at) as real), "
                 "cast(strftime('%s', ended_at) as real), reason from soak_collectiongap")
    assert any(start <= killed_at + 1 and end >= restarted_at - 1
               and "worker driving the soak stopped" in reason for start, end, reason in gaps)
    # The record is continuous: every window of the agent, each once, none missing.
    windows = [int(w) for (w,) in query(
        tmp_path, "select json_extract(labels, '$.soak_window') from runners_measurement "
                  "where metric = 'completed_requests' and derived = 0")]
    assert sorted(windows) == list(range(1, len(windows) + 1)) and len(windows) >= 25
    assert len(window_lines(tmp_path)) == len(windows)
    assert "soak.soak_drive" in log and "re-attached" in [k for (k,) in query(
        tmp_path, "select kind from soak_soakevent")]
