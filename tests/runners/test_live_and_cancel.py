"""Live output, cancel and crash safety, with real processes.

The main job runs as a user runs it — ``manage.py`` subprocesses sharing one SQLite file — and a
real ``fio`` on a scratch file stands in for a long probe, so cancel and recovery have a real
remote process to kill. The lab node is a real sshd on loopback.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from runners.live import OutputRecorder, output_read
from tests.faults.harness import service_env as env_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def manage(env, *args, timeout=120):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def query(tmp_path, sql, *params):
    with sqlite3.connect(tmp_path / "var" / "acceptance.sqlite3", timeout=30) as db:
        return db.execute(sql, params).fetchall()


def wait_for(predicate, timeout=60, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def fio_processes(marker):
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


def prepare_long_fio(env, tmp_path):
    """A lab engagement whose G2 fio reads a real scratch file for 300 s (time based)."""
    assert manage(env, "migrate", "-v", "0").returncode == 0
    assert manage(env, "lab", "up", "--scenario", "healthy").returncode == 0
    scratch = tmp_path / f"scratch-{uuid.uuid4().hex[:8]}.bin"
    scratch.write_bytes(b"\0" * (16 << 20))
    script = f"""
from acceptance.models import Engagement
e = Engagement.objects.get(name="lab-healthy")
e.gates.filter(code="G1").update(state="passed")
g2 = e.gates.get(code="G2")
for step in g2.probe_plan:
    if step["probe"] == "fio_seqread":
        step["params"].update(runtime=300, ramp_time=0, numjobs=1, iodepth=1,
                              ioengine="psync", direct=False)
g2.save()
e.nodes.filter(role="inference").update(fio_target="{scratch}")
"""
    done = manage(env, "shell", "-c", script)
    assert done.returncode == 0, done.stderr
    return scratch


def test_it_cancels_a_running_probe_and_confirms_the_remote_process_gone(tmp_path):
    env = env_for(tmp_path)
    scratch = prepare_long_fio(env, tmp_path)
    runner = subprocess.Popen([sys.executable, "manage.py", "run_gate", "lab-healthy", "G2"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        run_id = wait_for(lambda: query(
            tmp_path, "select gate_run_id from runners_proberun where probe='fio_seqread' "
                      "and state='running'"), what="fio to start")[0][0]
        wait_for(lambda: fio_processes(str(scratch)), what="fio on the node")
        cancel = manage(env, "cancel_run", str(run_id), "--by", "eng-bob")
        out, err = runner.communicate(timeout=60)
    finally:
        runner.kill()
        manage(env, "lab", "down")
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert "fio_seqread" in cancel.stdout and ": gone" in cancel.stdout
    assert fio_processes(str(scratch)) == []  # really gone from the node's process table
    assert runner.returncode == 2 and "cancelled by eng-bob" in err
    assert query(tmp_path, "select state, cancel_requested_by from runners_gaterun "
                           "where id=?", run_id) == [("cancelled", "eng-bob")]
    assert query(tmp_path, "select state from runners_proberun where probe='fio_seqread'") == [
        ("cancelled",)]
    assert query(tmp_path, "select count(*) from gates_decision") == [(0,)]


def test_it_recovers_a_run_whose_worker_was_killed_without_duplicates(tmp_path):
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: run through scripts/test, which starts one")
    import redis

    redis.Redis.from_url(url).flushdb()
    env = env_for(tmp_path, CELERY_BROKER_URL=url, RUNS_LOST_AFTER_SECONDS="3")
    scratch = prepare_long_fio(env, tmp_path)

    def worker():
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
             "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
             "-n", f"w{uuid.uuid4().hex[:6]}@%h"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)

    first = worker()
    runner = subprocess.Popen([sys.executable, "manage.py", "run_gate", "lab-healthy", "G2"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    second = None
    try:
        wait_for(lambda: fio_processes(str(scratch)), what="fio on the node")
        measured_before = query(tmp_path, "select count(*) from runners_measurement")[0][0]
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-run
        first.wait(timeout=10)
        time.sleep(4)  # its heartbeat goes stale
        second = worker()
        out, err = runner.communicate(timeout=120)
    finally:
        runner.kill()
        for process in (first, second):
            if process and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        manage(env, "lab", "down")
    assert runner.returncode == 2, out + err
    assert "lost" in err
    rows = query(tmp_path, "select state, error_kind from runners_proberun "
                           "where probe='fio_seqread'")
    assert rows == [("failed", "lost")]
    assert fio_processes(str(scratch)) == []  # recovery killed what the dead worker left
    duplicates = query(tmp_path, "select probe_run_id, metric, labels, count(*) c from "
                                 "runners_measurement group by probe_run_id, metric, labels "
                                 "having c > 1")
    assert duplicates == []
    assert query(tmp_path, "select count(*) from runners_measurement")[0][0] >= measured_before
    assert query(tmp_path, "select state from runners_nodejob") == [("failed",)]


def test_it_stores_output_while_the_command_runs_and_reads_from_any_offset(lab, tmp_path):
    from django.utils import timezone

    from runners.models import GateRun, NodeJob, ProbeRun
    from runners.transport import SSHConnection

    engagement, _ = lab("healthy")
    node = engagement.nodes.get(role="inference")
    gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                      started_by="t")
    # A job claimed by this worker (its lease written), as node_job_execute claims it.
    job = NodeJob.objects.create(gate_run=gate_run, node=node, state="running", lease="t1")
    run = ProbeRun.objects.create(gate_run=gate_run, node=node, probe="demo", parser="fio",
                                  parser_version="1", command="demo",
                                  started_at=timezone.now())
    recorder = OutputRecorder(run, job)
    seen_while_running = []

    def follow():
        from django.db import OperationalError, connection

        if connection.vendor == "sqlite":
            # The shared in-memory test database locks whole tables; an uncommitted read keeps
            # this reader from blocking the recorder's writes.
            connection.cursor().execute("PRAGMA read_uncommitted = 1")
        offset = 0
        while True:
            try:
                piece = output_read(run.id, offset=offset)
            except OperationalError:  # SQLite's shared in-memory test DB locks whole tables
                time.sleep(0.05)
                continue
            if piece.data:
                seen_while_running.append((piece.data, piece.state))
            offset = piece.next_offset
            if piece.state != "running":
                return
            time.sleep(0.1)

    reader = threading.Thread(target=follow)
    reader.start()
    with SSHConnection(node.ssh_target()) as connection:
        result = connection.run("for i in 1 2 3 4; do echo line$i; sleep 0.7; done",
                                timeout=30, on_output=recorder.on_output,
                                on_tick=recorder.on_tick)
    recorder.flush()
    ProbeRun.objects.filter(id=run.id).update(state="parsed", stdout=result.stdout)
    reader.join(timeout=10)
    live = b"".join(data for data, state in seen_while_running if state == "running")
    assert live.startswith(b"line1\nline2\n")  # read before the command had finished
    assert result.stdout == b"line1\nline2\nline3\nline4\n"
    # A reader that reconnects at offset 6 continues at "line2".
    assert output_read(run.id, offset=6).data == b"line2\nline3\nline4\n"
    assert output_read(run.id, offset=24).data == b""
    with pytest.raises(ValueError, match="stream must be"):
        output_read(run.id, stream="stdin")


def test_it_fails_a_run_whose_evaluation_was_lost_with_its_worker(db, settings):
    """Sent, never decided, every re-send used: an error that says so (evidence kept). A run
    still within its bound may still be deciding and is left alone."""
    from datetime import timedelta

    from django.utils import timezone

    from acceptance.models import Credential, Node
    from gates.services import engagement_create
    from runners.control import evaluations_settle
    from runners.models import GateRun, NodeJob

    engagement = engagement_create(name="site-a", customer="Org A",
                                   start_date=timezone.localdate())
    node = Node.objects.create(
        engagement=engagement, name="n1", role="array", address="127.0.0.1", port=22,
        ssh_user="root", host_key="ssh-ed25519 " + "A" * 68,
        credential=Credential.objects.create(name="c", private_key_encrypted=b"x"))
    long_ago = timezone.now() - timedelta(minutes=10)
    stuck = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                   started_by="t", state=GateRun.State.EVALUATING,
                                   evaluation_sent_at=long_ago,
                                   evaluation_sends=settings.RUNS_RESEND_MAX + 1)
    NodeJob.objects.create(gate_run=stuck, node=node, state="done", finished_at=long_ago)
    fresh = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                   started_by="t", state=GateRun.State.EVALUATING,
                                   evaluation_sent_at=timezone.now(), evaluation_sends=1)
    NodeJob.objects.create(gate_run=fresh, node=node, state="done", finished_at=timezone.now())
    lines = evaluations_settle(after=timedelta(seconds=90))
    stuck.refresh_from_db()
    fresh.refresh_from_db()
    assert stuck.state == "failed" and "evaluation lost: sent 4 times" in stuck.error
    assert "the evidence is kept" in stuck.error
    assert fresh.state == "evaluating"  # still within the grace period: maybe still deciding
    assert len(lines) == 1
