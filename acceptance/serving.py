"""One command serves everything: gunicorn for the web, Celery workers and beat, supervised.

``child_commands`` builds each child's argv in one place: ``manage.py serve`` starts them all,
``manage.py serve --only web|worker|beat`` one role (one container each in
``docker-compose.yml``), and the tests compare the two.

The broker: with ``CELERY_BROKER_URL`` set (Redis in production) the children use it. On the
embedded default (no broker URL) the children get ``CELERY_BROKER_URL=filesystem://``: kombu's
filesystem transport, one file per message under ``var/broker`` (settings), so a run started in
the browser is sent to a worker process and the request returns at once. It needs no server and
no new dependency, and it does not write into the SQLite database the service itself uses (the
SQLAlchemy transport over that file would compete with every request for SQLite's one writer
lock). Taken messages are kept in ``var/broker/processed`` (a rename is what makes taking atomic
between workers) and pruned here after an hour.

The supervision rule (``Supervisor``): a child that exits on its own is started again after a
back-off (1, 2, 4 … s, at most 30 s); a child that dies more than ``RESTART_LIMIT`` times within
``RESTART_WINDOW_S`` ends ``serve`` with exit status 1 (every other child stopped first), so
systemd or the container engine sees the failure. SIGTERM or SIGINT stops the children cleanly:
web first (it stops taking requests), then beat, then the workers, each sent SIGTERM and given
``stop_grace_s`` before SIGKILL; ``serve`` then exits 0. A worker killed in the middle of a job
leaves a node job that beat's recovery sweep (or the next worker's start) fails as lost.
"""

from __future__ import annotations

import ctypes
import json
import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

logger = logging.getLogger(__name__)

ROLES = ("web", "worker", "beat")
RESTART_LIMIT = 5
RESTART_WINDOW_S = 300.0
BACKOFF_MAX_S = 30.0
PROCESSED_KEEP_S = 3600.0
STOP_ORDER = {"web": 0, "beat": 1, "worker": 2}


@dataclass(frozen=True)
class Child:
    name: str  # "web", "worker-1", "beat"
    role: str
    argv: tuple[str, ...]


def child_commands(*, roles: tuple[str, ...] = ROLES, bind: str = "127.0.0.1:8000",
                   web_workers: int = 2, web_threads: int = 4, workers: int = 2,
                   concurrency: int = 64, var_dir: Path, log_level: str = "INFO",
                   python: str = sys.executable) -> list[Child]:
    """The argv of every child for ``roles``, in start order."""
    celery = (python, "-m", "celery", "-A", "acceptance", "--quiet")  # no banners: JSON only
    children = []
    if "web" in roles:
        children.append(Child("web", "web", (
            python, "-m", "gunicorn", "acceptance.wsgi:application",
            "--config", "python:acceptance.gunicorn_conf", "--bind", bind,
            "--workers", str(web_workers), "--worker-class", "gthread",
            "--threads", str(web_threads), "--no-control-socket")))
    if "worker" in roles:
        for number in range(1, workers + 1):
            # Threads, not prefork: a killed worker takes its jobs with it (no orphaned pool
            # process finishing a job nobody watches); the jobs' work is SSH and waiting, so
            # 64 threads a process (2 × 64 = 128 nodes in one wave) cost little CPU.
            children.append(Child(f"worker-{number}", "worker", (
                *celery, "worker", "--pool=threads", f"--concurrency={concurrency}",
                f"--loglevel={log_level}", "-n", f"worker-{number}@%h")))
    if "beat" in roles:
        children.append(Child("beat", "beat", (
            *celery, "beat", f"--loglevel={log_level}",
            "--schedule", str(var_dir / "celerybeat-schedule"))))
    return children


def child_log_level(env: dict[str, str]) -> str:
    return env.get("ACCEPTANCE_LOG_LEVEL") or env.get("LOG_LEVEL") or "INFO"


def child_environment(base: dict[str, str], *, var_dir: Path) -> dict[str, str]:
    """The children's environment: the server-less broker where none is set, JSON logs unless
    told otherwise, and the parent's resolved VAR_DIR (so every child uses the same files)."""
    env = dict(base)
    if not env.get("CELERY_BROKER_URL"):
        env["CELERY_BROKER_URL"] = "filesystem://localhost/"
    env.setdefault("ACCEPTANCE_LOG_FORMAT", "json")
    if "ACCEPTANCE_LOG_LEVEL" not in env and "LOG_LEVEL" not in env:
        env["ACCEPTANCE_LOG_LEVEL"] = "INFO"  # a served site logs its requests and tasks
    env["ACCEPTANCE_VAR_DIR"] = str(var_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _die_with_parent() -> None:
    """In the child before exec: a SIGKILLed ``serve`` leaves no orphan (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class _Running:
    child: Child
    process: subprocess.Popen | None = None
    deaths: list[float] = field(default_factory=list)
    start_at: float = 0.0  # monotonic time of the next (re)start while process is None


class Supervisor:
    """Start the children, restart the ones that die (the rule above), stop all on a signal."""

    def __init__(self, children: list[Child], *, env: dict[str, str], cwd: Path,
                 stop_grace_s: float = 30.0, broker_dir: Path | None = None,
                 announce=None) -> None:
        self.running = [_Running(child) for child in children]
        self.env, self.cwd, self.stop_grace_s = env, cwd, stop_grace_s
        self.broker_dir = broker_dir
        self.announce = announce or (lambda event, **fields: None)
        self.stopping = False
        self.failed = ""

    def _start(self, entry: _Running) -> None:
        entry.process = subprocess.Popen(
            entry.child.argv, cwd=self.cwd, env=self.env, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        self.announce("started", child=entry.child.name, pid=entry.process.pid,
                      argv=list(entry.child.argv))

    def _stop_signal(self, signum, _frame) -> None:
        self.stopping = True

    def _reap(self, entry: _Running, now: float) -> None:
        code = entry.process.returncode
        entry.process = None
        entry.deaths = [t for t in entry.deaths if now - t < RESTART_WINDOW_S] + [now]
        if len(entry.deaths) > RESTART_LIMIT:
            self.failed = (f"{entry.child.name} died {len(entry.deaths)} times within "
                           f"{RESTART_WINDOW_S:.0f} s")
            self.announce("giving up", child=entry.child.name, exit_status=code)
            return
        delay = min(BACKOFF_MAX_S, 2.0 ** (len(entry.deaths) - 1))
        entry.start_at = now + delay
        self.announce("died", child=entry.child.name, exit_status=code, restart_in_s=delay)

    def _prune_processed(self) -> None:
        if self.broker_dir is None:
            return
        cutoff = time.time() - PROCESSED_KEEP_S
        for message in (self.broker_dir / "processed").glob("*.msg"):
            try:
                if message.stat().st_mtime < cutoff:
                    message.unlink()
            except OSError:
                continue  # taken or removed meanwhile

    def run(self, *, poll_s: float = 0.2) -> int:
        """Supervise until a stop signal (exit 0) or a child that keeps dying (exit 1)."""
        previous = {s: signal.signal(s, self._stop_signal) for s in (signal.SIGTERM,
                                                                      signal.SIGINT)}
        try:
            for entry in self.running:
                self._start(entry)
            pruned_at = 0.0
            while not self.stopping and not self.failed:
                now = time.monotonic()
                for entry in self.running:
                    if entry.process is not None and entry.process.poll() is not None:
                        self._reap(entry, now)
                    elif entry.process is None and now >= entry.start_at and not self.failed:
                        self._start(entry)
                if now - pruned_at > 60:
                    self._prune_processed()
                    pruned_at = now
                time.sleep(poll_s)
            self.stop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return 1 if self.failed else 0

    def stop(self) -> None:
        """SIGTERM to each child in stop order, SIGKILL after the grace period."""
        self.announce("stopping", reason=self.failed or "signal")
        for entry in sorted(self.running, key=lambda e: STOP_ORDER[e.child.role]):
            process = entry.process
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
                self.announce("killed", child=entry.child.name,
                              after_s=self.stop_grace_s)
            self.announce("stopped", child=entry.child.name, exit_status=process.returncode)


# A child that died unasked is worth a look (WARNING); one that kept dying stopped serve (ERROR).
EVENT_LEVELS = {"died": "WARNING", "giving up": "ERROR"}


def announce_json(stream):
    """An ``announce`` writing one JSON line per supervisor event (the log format of the rest)."""

    def write(event: str, **fields) -> None:
        record = {"time": datetime.now(UTC).isoformat(), "level": EVENT_LEVELS.get(event, "INFO"),
                  "logger": "acceptance.serving", "message": event, **fields}
        stream.write(json.dumps(record) + "\n")
        stream.flush()

    return write
