"""The supervision rule of ``manage.py serve`` (acceptance.serving.Supervisor), with real child
processes: a child that dies is started again after its back-off, one that keeps dying ends
the supervisor with status 1, SIGTERM stops every child and exits 0. Then the children of
``serve`` itself: the argv of each role, the server-less broker on the embedded default."""

import io
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from acceptance import serving
from acceptance.serving import Child, Supervisor, child_commands, child_environment
from tests.production.helpers import base_env, manage, wait_for


def events_recorder():
    events = []

    def announce(event, **fields):
        events.append((event, fields))

    return events, announce


def python_child(name, code, role="worker"):
    return Child(name, role, (sys.executable, "-c", code))


def test_it_restarts_a_child_that_dies_and_stops_all_on_sigterm(tmp_path, monkeypatch):
    events, announce = events_recorder()
    counter = tmp_path / "starts"
    flaky = python_child("worker-1", (
        f"import pathlib, time; p = pathlib.Path({str(counter)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); "
        "time.sleep(0.3 if len(p.read_text()) < 3 else 600)"))
    steady = python_child("web", "import time; time.sleep(600)", role="web")
    supervisor = Supervisor([steady, flaky], env=dict(os.environ), cwd=tmp_path,
                            stop_grace_s=5, announce=announce)
    monkeypatch.setattr(serving, "BACKOFF_MAX_S", 0.5)
    # Signal handlers live in the main thread: the supervisor runs here, a thread sends SIGTERM.
    stopper = threading.Thread(target=lambda: (
        wait_for(lambda: counter.exists() and len(counter.read_text()) >= 3, 30,
                 "the third start"),
        time.sleep(0.5), os.kill(os.getpid(), signal.SIGTERM)))
    stopper.start()
    status = supervisor.run()
    stopper.join()
    assert status == 0
    names = [(event, fields.get("child")) for event, fields in events]
    assert names.count(("started", "worker-1")) == 3
    assert names.count(("died", "worker-1")) == 2
    assert names.count(("started", "web")) == 1
    delays = [fields["restart_in_s"] for event, fields in events if event == "died"]
    assert delays == [0.5, 0.5]  # 1 s then 2 s, capped by the (patched) maximum
    assert ("stopping", None) in names
    stopped = [fields["child"] for event, fields in events if event == "stopped"]
    assert stopped == ["web", "worker-1"]  # web first
    assert all(e.process.poll() is not None for e in supervisor.running)


def test_a_child_that_keeps_dying_ends_serve_with_status_1(tmp_path, monkeypatch):
    events, announce = events_recorder()
    monkeypatch.setattr(serving, "BACKOFF_MAX_S", 0.05)
    monkeypatch.setattr(serving, "RESTART_LIMIT", 2)
    steady = python_child("beat", "import time; time.sleep(600)", role="beat")
    dying = python_child("worker-1", "raise SystemExit(3)")
    supervisor = Supervisor([steady, dying], env=dict(os.environ), cwd=tmp_path,
                            stop_grace_s=5, announce=announce)
    started = time.monotonic()
    assert supervisor.run() == 1
    assert time.monotonic() - started < 20
    assert supervisor.failed == "worker-1 died 3 times within 300 s"
    assert ("giving up", {"child": "worker-1", "exit_status": 3}) in events
    assert ("stopped", {"child": "beat", "exit_status": -signal.SIGTERM}) in events


def test_a_child_deaf_to_sigterm_is_killed_after_the_grace(tmp_path):
    events, announce = events_recorder()
    deaf = python_child("worker-1", (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(600)"))
    supervisor = Supervisor([deaf], env=dict(os.environ), cwd=tmp_path, stop_grace_s=1,
                            announce=announce)
    supervisor._start(supervisor.running[0])
    time.sleep(1)  # the handler is installed
    supervisor.stop()
    assert ("killed", {"child": "worker-1", "after_s": 1}) in events
    assert supervisor.running[0].process.returncode == -signal.SIGKILL


def test_each_role_runs_the_same_command_alone_as_in_the_whole(tmp_path):
    env = base_env(tmp_path / "var")
    whole = manage(env, "serve", "--workers", "2", "--print")
    assert whole.returncode == 0, whole.stderr
    lines = whole.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["web", "worker-1", "worker-2", "beat"]
    # the shipped worker default is 2 processes × 64 threads: 128 node jobs in one wave
    assert "--concurrency=64" in lines[1] and "--concurrency=64" in lines[2]
    for role, names in (("web", ["web"]), ("worker", ["worker-1", "worker-2"]),
                        ("beat", ["beat"])):
        alone = manage(env, "serve", "--only", role, "--print")
        assert alone.stdout.splitlines() == [x for x in lines if x.split(":")[0] in names]
    assert "-m gunicorn acceptance.wsgi:application" in lines[0]
    assert "worker --pool=threads" in lines[1] and "-n worker-2@%h" in lines[2]
    assert f"beat --loglevel=INFO --schedule {tmp_path / 'var' / 'celerybeat-schedule'}" in (
        lines[3])


def test_the_children_get_the_serverless_broker_only_where_none_is_set(tmp_path):
    var = Path(tmp_path)
    embedded = child_environment({"PATH": "/usr/bin"}, var_dir=var)
    assert embedded["CELERY_BROKER_URL"] == "filesystem://localhost/"
    assert (embedded["ACCEPTANCE_LOG_FORMAT"], embedded["ACCEPTANCE_LOG_LEVEL"]) == (
        "json", "INFO")
    assert embedded["ACCEPTANCE_VAR_DIR"] == str(var)
    real = child_environment({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
                              "ACCEPTANCE_LOG_FORMAT": "text"}, var_dir=var)
    assert (real["CELERY_BROKER_URL"], real["ACCEPTANCE_LOG_FORMAT"]) == (
        "redis://127.0.0.1:6379/0", "text")
    assert [c.name for c in child_commands(roles=("worker",), workers=3, var_dir=var)] == [
        "worker-1", "worker-2", "worker-3"]


@pytest.mark.parametrize("args, message", [
    (["--workers", "0"], "argument --workers: invalid positive value: '0'"),
    (["--only", "cron"], "argument --only: invalid choice: 'cron'"),
])
def test_it_refuses_bad_options_in_one_line(tmp_path, args, message):
    refused = manage(base_env(tmp_path / "var"), "serve", *args, "--print")
    assert refused.returncode == 2
    assert message in refused.stderr and "Traceback" not in refused.stderr


def test_it_refuses_to_serve_an_unmigrated_database(tmp_path):
    refused = manage(base_env(tmp_path / "var"), "serve")
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("CommandError: the database has ")
    assert refused.stderr.strip().endswith("unapplied migrations: run manage.py migrate first")


def test_a_child_dying_unasked_is_logged_as_a_warning_and_giving_up_as_an_error():
    stream = io.StringIO()
    announce = serving.announce_json(stream)
    announce("started", child="worker-1", pid=1)
    announce("died", child="worker-1", exit_status=-9, restart_in_s=1.0)
    announce("giving up", child="worker-1", exit_status=-9)
    announce("stopped", child="worker-1", exit_status=0)
    levels = [json.loads(line)["level"] for line in stream.getvalue().splitlines()]
    assert levels == ["INFO", "WARNING", "ERROR", "INFO"]
