"""The production stack as processes: ``manage.py serve --workers 2`` (gunicorn, two Celery
workers, beat) in production mode on a throw-away PostgreSQL database and a private
``redis-server --appendonly yes``, behind a pretend HTTPS proxy (X-Forwarded-Proto). G1 and G2
of a lab engagement are driven over the HTTP API; Redis is restarted while G1 runs and the
worker running G2 is SIGKILLed; both runs end in a final state, ``/readyz`` answers 200 and
then 503 naming the broker while Redis is down, and every log line is one JSON object.
"""

import json
import os
import signal
import subprocess
import sys
import uuid

import psycopg
import pytest
import redis
import requests

from reports.signing import CA_FILE, ensure_dev_signer
from tests.production.helpers import ROOT, free_port, manage, production_env, wait_for

pytestmark = pytest.mark.slow
FINAL = {"done", "failed", "cancelled", "stopped", "error"}
PROXY = {"X-Forwarded-Proto": "https"}


def postgres_admin_url() -> str:
    url = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    try:
        psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=3).close()
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL answers at TEST_POSTGRES_URL or 127.0.0.1:5432")
    return url


@pytest.fixture
def postgres_url():
    admin = postgres_admin_url().replace("postgres://", "postgresql://", 1)
    name = f"acceptance_stack_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    yield f"{base}/{name}".replace("postgresql://", "postgres://", 1)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PrivateRedis:
    """redis-server with AOF on a free port, its data in ``directory`` (kept across restarts)."""

    def __init__(self, directory):
        self.directory, self.port, self.process = directory, free_port(), None
        directory.mkdir()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _pings(redis.Redis(port=self.port, socket_timeout=1)), 20,
                 "redis to answer")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis flushes the AOF and exits
            self.process.wait(timeout=20)


def _pings(client) -> bool:
    try:
        return client.ping()
    except Exception:
        return False


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


class Stack:
    def __init__(self, env, port):
        self.env, self.base = env, f"http://127.0.0.1:{port}"
        self.log = open(env["ACCEPTANCE_VAR_DIR"] + "-serve.log", "w+")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--workers", "2", "--concurrency", "2",
             "--bind", f"127.0.0.1:{port}", "--stop-grace", "20"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.session = requests.Session()
        self.session.headers.update(PROXY)

    def get(self, path, **kw):
        return self.session.get(self.base + path, timeout=20, **kw)

    def post(self, path, **kw):
        return self.session.post(self.base + path, timeout=30, **kw)

    def lines(self) -> list[str]:
        self.log.flush()
        with open(self.log.name) as f:
            return [line for line in f.read().splitlines() if line.strip()]

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.lines() if line.startswith("{")]

    def child_pids(self) -> dict[str, int]:
        """The current pid of each child, from serve's own 'started' lines."""
        return {r["child"]: r["pid"] for r in self.records()
                if r.get("logger") == "acceptance.serving" and r["message"] == "started"}


def run_state(stack, run_id):
    return stack.get(f"/api/gate-runs/{run_id}/").json()["state"]


def test_the_production_stack_survives_a_killed_worker_and_a_redis_restart(
        tmp_path, postgres_url, private_redis):
    p12, passphrase = ensure_dev_signer(tmp_path / "signing")
    env = production_env(tmp_path / "var", p12, passphrase.decode(),
                         DATABASE_URL=postgres_url, CELERY_BROKER_URL=private_redis.url,
                         ACCEPTANCE_REPORT_TRUST_ROOTS=str(tmp_path / "signing" / CA_FILE),
                         ACCEPTANCE_RUNS_LOST_AFTER_SECONDS="5",
                         ACCEPTANCE_RECOVER_EVERY_SECONDS="2")
    for command in (["migrate", "--no-input", "-v", "0"],
                    ["collectstatic", "--no-input", "-v", "0"],
                    ["lab", "up", "--scenario", "healthy"]):
        done = manage(env, *command)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    scratch = tmp_path / "g2-scratch.bin"
    scratch.write_bytes(b"\0" * (16 << 20))
    prepared = manage(env, "shell", "--no-imports", "-c", f"""
from django.contrib.auth.models import User
from acceptance.models import Engagement, Membership
user = User.objects.create_user("eng-stack")
Membership.objects.create(user=user, role="engineer")
e = Engagement.objects.get(name="lab-healthy")
g2 = e.gates.get(code="G2")
for step in g2.probe_plan:
    if step["probe"] == "fio_seqread":
        step["params"].update(runtime=300, ramp_time=0, numjobs=1, iodepth=1,
                              ioengine="psync", direct=False)
g2.save()
e.nodes.filter(role="inference").update(fio_target="{scratch}")
""")
    assert prepared.returncode == 0, prepared.stderr
    token = manage(env, "api_token", "eng-stack").stdout.strip()

    stack = Stack(env, free_port())
    stack.session.headers["Authorization"] = f"Token {token}"
    try:
        wait_for(lambda: _answers(stack, "/healthz"), 60, "gunicorn")
        ready = wait_for(lambda: _ready(stack), 60, "/readyz 200")
        assert ready.json()["status"] == "ready"
        assert stack.get("/healthz", allow_redirects=False).text == "ok\n"
        # without the proxy's header a page is redirected to HTTPS; health checks are not
        plain = requests.get(stack.base + "/api/", allow_redirects=False, timeout=10)
        assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")
        assert requests.get(stack.base + "/readyz", timeout=10).status_code == 200

        # G1, with Redis restarted in the middle of it
        started = stack.post("/api/engagements/lab-healthy/gates/G1/runs/", json={})
        assert started.status_code == 201, started.text
        g1 = started.json()["id"]
        private_redis.stop()
        [down] = wait_for(lambda: _not_ready(stack), 30, "/readyz 503")
        assert list(down.json()["failed"]) == ["broker"]
        assert down.json()["failed"]["broker"].startswith("unreachable (")
        assert str(private_redis.port) not in down.text
        private_redis.start()
        wait_for(lambda: run_state(stack, g1) in FINAL, 180, "G1 to end")
        assert run_state(stack, g1) == "done", stack.get(f"/api/gate-runs/{g1}/").text
        assert _ready(stack)

        # G2, whose worker is SIGKILLed while fio runs on the node
        started = stack.post("/api/engagements/lab-healthy/gates/G2/runs/", json={})
        assert started.status_code == 201, started.text
        g2 = started.json()["id"]
        wait_for(lambda: _fio_running(scratch), 120, "fio on the node")
        victim = wait_for(lambda: _worker_of_running_job(stack), 30, "the job's worker")
        pid = stack.child_pids()[victim]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: run_state(stack, g2) in FINAL, 180, "G2 to end")
        g2_run = stack.get(f"/api/gate-runs/{g2}/").json()
        assert g2_run["state"] == "failed", g2_run
        jobs = stack.get(f"/api/node-jobs/?gate_run={g2}").json()["results"]
        assert "lost" in {j.get("error_kind") for j in jobs}, jobs
        wait_for(lambda: not _fio_running(scratch), 60, "recovery to kill fio on the node")
        # serve restarted the killed worker under the same name
        assert stack.child_pids()[victim] != pid
        assert any(r.get("message") == "died" and r.get("child") == victim
                   for r in stack.records())
    finally:
        print("\n".join(x[:400] for x in stack.lines()[-80:]))  # shown when the test fails
        stack.process.send_signal(signal.SIGTERM)
        try:
            status = stack.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            stack.process.kill()
            status = "killed"
        manage(env, "lab", "down")
    assert status == 0, "\n".join(stack.lines()[-40:])

    lines = stack.lines()
    # Plain text only where Celery writes past logging: its warning about running as root
    # (tests run as root here; the image does not) and its shutdown line.
    known = ("SecurityWarning", "absolutely not recommended", "--uid option", "User information",
             "_warn_or_raise_security_error", "Warm shutdown")
    not_json = [x for x in lines if not x.startswith("{") and not any(k in x for k in known)]
    assert not_json == []
    records = stack.records()
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    with_ids = [r for r in records if r.get("gate_run") == g1 and r.get("node")]
    assert with_ids and all(r["engagement"] == "lab-healthy" for r in with_ids)
    assert any(r.get("probe") for r in records if r.get("gate_run") in (g1, g2))
    stopped = [r["child"] for r in records if r.get("message") == "stopped"]
    assert stopped[0] == "web" and set(stopped) == {"web", "beat", "worker-1", "worker-2"}
    everything = "\n".join(lines)
    for secret in (env["ACCEPTANCE_SECRET_KEY"], env["ACCEPTANCE_CREDENTIALS_KEY"],
                   passphrase.decode(), token):
        assert secret not in everything


def _answers(stack, path):
    try:
        return stack.get(path).status_code == 200
    except requests.ConnectionError:
        return False


def _ready(stack):
    answer = stack.get("/readyz")
    return answer if answer.status_code == 200 else None


def _not_ready(stack):
    answer = stack.get("/readyz")  # a requests Response of 503 is falsy: return it in a list
    return [answer] if answer.status_code == 503 else None


def _fio_running(scratch) -> bool:
    found = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True)
    return bool(found.stdout.split())


def _worker_of_running_job(stack) -> str | None:
    """The child whose process logged 'node job … started' for a job that has not ended."""
    by_pid = {pid: name for name, pid in stack.child_pids().items()}
    started, ended = {}, set()
    for record in stack.records():
        message = record.get("message", "")
        if message.startswith("node job ") and message.endswith(" started"):
            started[message.split()[2]] = record["pid"]
        elif message.startswith("node job ") and " ended " in message:
            ended.add(message.split()[2])
    running = [pid for job, pid in started.items() if job not in ended]
    # threads pool: the record's pid is the worker process itself
    names = [by_pid[pid] for pid in running if pid in by_pid]
    return names[-1] if names else None
