"""The fault suite's real parts: a private Redis (AOF on) that a test kills and restarts, a
fresh PostgreSQL database, Celery workers as real processes, ``manage.py`` as a person runs it,
and a lab node whose fio reads a scratch file for long enough to be interrupted."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class PrivateRedis:
    """redis-server on a free loopback port with ``--appendonly yes``; ``kill()`` is SIGKILL
    (no clean shutdown), ``start()`` brings it back on the same port and data directory."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.answers, timeout=15, what="redis to answer")

    def answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def wipe(self) -> None:
        """What a Redis without persistence keeps across a restart: nothing."""
        for child in self.directory.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()

    def queue_length(self) -> int:
        import redis

        return int(redis.Redis(port=self.port).llen("celery"))


@pytest.fixture
def private_redis(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server (scripts/setup installs it)")
    server = PrivateRedis(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    yield server
    server.kill()


@pytest.fixture
def postgres_url():
    url = os.environ.get("TEST_POSTGRES_URL")
    if not url:
        pytest.skip("no PostgreSQL answered on 127.0.0.1:5432 (TEST_POSTGRES_URL)")
    import psycopg

    admin = url.replace("postgres://", "postgresql://", 1)
    name = f"acceptance_fault_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    yield f"{base}/{name}".replace("postgresql://", "postgres://", 1)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def service_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a ``manage.py`` or worker subprocess of its own: no
    database, broker or settings of the caller's, its files under ``tmp_path / "var"``, then
    ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(ACCEPTANCE_VAR_DIR=str(tmp_path / "var"), **extra)
    return env


class Site:
    """One service installation for a test: its environment, its database, its commands."""

    def __init__(self, tmp_path: Path, database_url: str, **extra: str) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url
        self.env = service_env(tmp_path, DATABASE_URL=database_url, **extra)
        self.processes: list[subprocess.Popen] = []

    def manage(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT,
                                   env=self.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.processes.append(process)
        return process

    def worker(self) -> subprocess.Popen:
        """A real Celery worker (solo pool), in a process group of its own."""
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
             "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
             "-n", f"fault-{uuid.uuid4().hex[:6]}@%h"],
            cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self.processes.append(process)
        return process

    def query(self, sql: str, *params) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.database_url.replace("postgres://", "postgresql://", 1)) as db:
            return db.execute(sql, params).fetchall()

    def terminate_connections(self) -> int:
        """pg_terminate_backend on every connection to this site's database but ours."""
        name = self.database_url.rpartition("/")[2]
        rows = self.query("select pg_terminate_backend(pid) from pg_stat_activity where "
                          "datname = %s and pid <> pg_backend_pid()", name)
        return len(rows)

    def stop_all(self) -> str:
        """Stop every process this site started (by its own process group); their output."""
        out = []
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGCONT)
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                stdout, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                stdout, stderr = process.communicate(timeout=10)
            out.append((stdout or "") + (stderr or ""))
        self.manage("lab", "down")
        return "\n".join(out)


def wait_for(predicate, timeout: float = 60, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def processes_matching(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


LONG_FIO = """
from acceptance.models import Engagement
e = Engagement.objects.get(name="lab-healthy")
e.gates.filter(code="G1").update(state="passed")
g2 = e.gates.get(code="G2")
for step in g2.probe_plan:
    if step["probe"] == "fio_seqread":
        step["params"].update(runtime={runtime}, ramp_time=0, numjobs=1, iodepth=1,
                              ioengine="psync", direct=False)
g2.save()
e.nodes.filter(role="inference").update(fio_target="{scratch}")
"""


def lab_with_slow_fio(site: Site, runtime: int = 300) -> Path:
    """The healthy lab engagement, G1 passed, whose G2 fio really reads a scratch file for
    ``runtime`` seconds (the slow tool a fault interrupts); returns the scratch file."""
    migrate = site.manage("migrate", "-v", "0")
    assert migrate.returncode == 0, migrate.stderr
    up = site.manage("lab", "up", "--scenario", "healthy")
    assert up.returncode == 0, up.stderr
    scratch = site.tmp_path / f"scratch-{uuid.uuid4().hex[:8]}.bin"
    scratch.write_bytes(b"\0" * (16 << 20))
    done = site.manage("shell", "-c", LONG_FIO.format(runtime=runtime, scratch=scratch))
    assert done.returncode == 0, done.stderr
    return scratch


def fio_running(site: Site) -> list[tuple]:
    return site.query("select id, gate_run_id from runners_proberun where probe = "
                      "'fio_seqread' and state = 'running'")
