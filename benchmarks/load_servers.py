"""Dashboard and API under 20 concurrent clients: gunicorn (production) against runserver.

Figures (one JSON line each; TARGETS.md "dashboard and API under 20 concurrent clients"):

* ``load_dashboard_p95_gunicorn``: p95 wall time (ms) of ``GET /dashboard/`` as a project
  manager (session cookie) under 20 concurrent clients on gunicorn (``acceptance.wsgi``,
  ``--workers`` sync workers, default 2 × cores + 1); anchor: the same p95 on ``manage.py
  runserver`` (threaded, no reloader), same data, same run; ratio = gunicorn / runserver.
* ``load_api_p95_gunicorn``: the same for ``GET /api/engagements/`` with an API token.
* ``load_dashboard_p95_gunicorn_vs_target`` and ``load_api_p95_gunicorn_vs_target``: the
  gunicorn p95 against the absolute target (150 ms).

Each server serves the same scratch installation (``ACCEPTANCE_VAR_DIR`` in a temporary
directory, its SQLite file, DEBUG off) seeded with 50 engagements by the ``Seeder`` of
``benchmarks/dashboard.py`` (nodes, BOMs, gate runs, decisions, measurements). gunicorn runs
with ``--preload`` (the application and its ``gc.freeze()`` made once, before the fork). Each
client is a thread with its own HTTP session; each first sends ``--warm-up`` untimed requests
(5: a worker's first dashboard costs seconds — imports, templates, kept rows — and with 20
clients every worker gets several), then all clients load together for ``--seconds`` (4),
timed. The clients run on the same two cores as the servers, for both servers alike. Any answer
other than 200 ends the run with an error (a figure with failed requests is not a figure).
Medians, throughput and error counts go to stderr.

Recorded here (2 cores shared with other engineers' suites, load average 7–8; gunicorn 5 sync
workers, SQLite, 50 engagements, 20 clients): dashboard p95 gunicorn 929 ms vs runserver 785 ms
(ratio 1.18; medians 732 / 414 ms; 31 / 46 answers/s); API p95 2097 vs 1967 ms (ratio 1.07;
17 / 22 answers/s). Both are CPU-bound on two loaded cores, so more processes cannot answer
faster than one threaded process there; before the per-client warm-up, gunicorn's cold workers
(a first dashboard costs 2–2.6 s in each) made its p95 look 2–7× worse. One client alone:
dashboard median 31 ms (gunicorn) / 26 ms (runserver), API 78 / 104 ms.

After the engagements list was written out and its gates read as plain values (issue 17: CPU
per request 22 → 9 ms, ``benchmarks/api_cpu.py``), 3 runs interleaved with the code before
(load average 3.7–6.9): API p95 gunicorn 328 ms (before 751), runserver 479 ms (before 1163),
72 answers/s on gunicorn (before 46); the dashboard unchanged within the noise.

Run: ``.venv/bin/python benchmarks/load_servers.py [--clients 20] [--seconds 4]
[--engagements 50] [--workers N]``
"""

import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGET_MS = 150.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed(var_dir: str, engagements: int, measurements: int) -> tuple[str, str]:
    """Migrate and seed the scratch installation; return (session cookie, API token)."""
    os.environ["ACCEPTANCE_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    import django

    django.setup()
    from dashboard import Seeder  # benchmarks/dashboard.py
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from acceptance.models import Membership
    from acceptance.tokens import api_token_create

    call_command("migrate", verbosity=0)
    Seeder(math.ceil(measurements / engagements)).engagements(engagements)
    user = User.objects.create_user("load-pm")
    Membership.objects.create(user=user, role=Membership.Role.PROJECT_MANAGER)
    client = Client()
    client.force_login(user)  # the session row is in the database both servers read
    from django.db import connection

    connection.close()
    return client.cookies["sessionid"].value, api_token_create(user=user, name="load")[1]


def _server_env(var_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_DEBUG")}
    env.update(ACCEPTANCE_VAR_DIR=var_dir, DJANGO_SETTINGS_MODULE="acceptance.settings",
               # one user's 20 clients measure the server, not the per-user API rate
               API_THROTTLE_USER="1000000/min")
    return env


def _start(kind: str, port: int, var_dir: str, workers: int) -> subprocess.Popen:
    if kind == "gunicorn":
        args = [sys.executable, "-m", "gunicorn", "acceptance.wsgi", "--bind",
                f"127.0.0.1:{port}", "--workers", str(workers), "--preload",
                "--log-level", "warning"]
    else:
        args = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    # The server's log goes to a file: a pipe nobody reads would fill and stall the server.
    log = Path(var_dir) / f"{kind}.log"
    with open(log, "ab") as log_file:
        server = subprocess.Popen(args, cwd=ROOT, env=_server_env(var_dir),
                                  stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"{kind} exited: {log.read_text(errors='replace')[-500:]}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).ok:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.2)
    _stop(server)
    raise SystemExit(f"{kind} did not answer on port {port} within 60 s")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _load(url: str, *, clients: int, seconds: float, warm_up: int, cookies: dict,
          headers: dict) -> dict:
    """``clients`` threads GET ``url``: each ``warm_up`` requests untimed, then (all together,
    after a barrier) in a loop for ``seconds``, timed."""
    times_ms: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def get(session: requests.Session) -> tuple[str, float]:
        begin = time.monotonic()
        try:
            status = str(session.get(url, timeout=120).status_code)
        except requests.RequestException as error:
            status = type(error).__name__
        return status, (time.monotonic() - begin) * 1000

    def client() -> None:
        session = requests.Session()
        session.cookies.update(cookies)
        session.headers.update(headers)
        for _ in range(warm_up):
            status, _ms = get(session)
            if status != "200":
                with lock:
                    failures.append(status)
        barrier.wait()
        while time.monotonic() < stop_at[0]:
            status, elapsed = get(session)
            with lock:
                (times_ms.append(elapsed) if status == "200" else failures.append(status))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    stop_at[0] = float("inf")
    barrier.wait()
    stop_at[0] = time.monotonic() + seconds
    for thread in threads:
        thread.join()
    if failures or not times_ms:
        raise SystemExit(f"GET {url}: {len(failures)} failed requests ({sorted(set(failures))})"
                         f", {len(times_ms)} answered")
    times_ms.sort()
    return {"p95": times_ms[max(0, math.ceil(0.95 * len(times_ms)) - 1)],
            "median": times_ms[len(times_ms) // 2], "rate": len(times_ms) / seconds}


def _line(name: str, value: float, anchor: float) -> None:
    print(json.dumps({"name": name, "value": round(value, 1), "unit": "ms",
                      "anchor": round(anchor, 1), "ratio": round(value / anchor, 3)}),
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--warm-up", type=int, default=5,
                        help="untimed requests per client first (every worker warms up)")
    parser.add_argument("--engagements", type=int, default=50)
    parser.add_argument("--measurements", type=int, default=25_000)
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    args = parser.parse_args()
    var_dir = tempfile.mkdtemp(prefix="bench-load-")
    try:
        session, token = _seed(var_dir, args.engagements, args.measurements)
        pages = {"dashboard": ("/dashboard/", {"sessionid": session}, {}),
                 "api": ("/api/engagements/", {}, {"Authorization": f"Token {token}"})}
        results: dict[tuple[str, str], dict] = {}
        for kind in ("runserver", "gunicorn"):
            port = _free_port()
            server = _start(kind, port, var_dir, args.workers)
            try:
                for page, (path, cookies, headers) in pages.items():
                    results[kind, page] = _load(f"http://127.0.0.1:{port}{path}",
                                                clients=args.clients, seconds=args.seconds,
                                                warm_up=args.warm_up,
                                                cookies=cookies, headers=headers)
            finally:
                _stop(server)
        for (kind, page), r in results.items():
            print(f"# {kind} {page}: p95 {r['p95']:.1f} ms, median {r['median']:.1f} ms, "
                  f"{r['rate']:.1f} answers/s ({args.clients} clients, {args.engagements} "
                  f"engagements, gunicorn {args.workers} workers)", file=sys.stderr)
        for page in pages:
            gunicorn, runserver = results["gunicorn", page], results["runserver", page]
            _line(f"load_{page}_p95_gunicorn", gunicorn["p95"], runserver["p95"])
        for page in pages:
            _line(f"load_{page}_p95_gunicorn_vs_target", results["gunicorn", page]["p95"],
                  TARGET_MS)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
