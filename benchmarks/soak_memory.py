"""A 72 h soak plan compressed in the lab: the memory of the worker driving it stays flat.

Figure (TARGETS.md): resident memory (VmRSS) of the Celery worker process that drives the soak
(``soak.soak_drive``: collection, fault injection and heals, live checks), sampled every
0.25 s from /proc while the ``soak-clean`` lab runs the default 72 h G4 plan compressed to
``--seconds`` real seconds (both faults injected and healed). Anchor: the worker's RSS one
hour-equivalent (``seconds`` ÷ 72 real seconds) after the load started. Value: the largest RSS
from then until the load ended (the agent's last window collected). Target: ratio ≤ 1.10 ("no
growth beyond 10 % after the first hour-equivalent"). Also printed, for information, the RSS
after the decision (same anchor): evaluating and issuing the signed PDF loads WeasyPrint and
pyHanko once into the worker, a step after the soak, not a growth during it. One JSON line
per figure: ``{"name", "value", "unit", "anchor", "ratio"}``, medians over ``--runs`` soaks.

The worker is a real ``celery worker --pool=solo`` subprocess on Redis (``--broker``, default
``$TEST_REDIS_URL`` or redis://127.0.0.1:6379/12; the database is flushed). Without a Redis the
soak runs eagerly in this process and its own RSS is sampled (said in the JSON line's
``worker`` key). Needs root (the lab's network namespace) and a scratch var dir (made here).

Run: ``.venv/bin/python benchmarks/soak_memory.py [--seconds 180] [--runs 1]``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 1.10
PLAN_HOURS = 72


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def redis_ok(url: str) -> bool:
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=2).ping()
        return True
    except Exception:  # noqa: BLE001 (any failure means: no Redis to use)
        return False


def one_soak(seconds: int, pid: int, index: int) -> tuple[float, float, float]:
    """Run one compressed soak; (anchor RSS, max RSS from the anchor to the end of the load,
    RSS after the decision) in MiB."""
    from gates.models import Gate
    from runners.lab.services import lab_up
    from runners.soak.driver import soak_start
    from runners.soak.models import Soak

    engagement, _ = lab_up(scenario_name="soak-clean", engagement_name=f"bench-soak-{index}",
                           overrides={"soak": {"seconds": seconds}})
    Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
        state="passed")
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            value = rss_mib(pid)
            if value is not None:
                samples.append((time.time(), value))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    gate_run = soak_start(gate=engagement.gates.get(code="G4"), started_by="benchmark")
    deadline = time.monotonic() + 3 * seconds + 120
    while time.monotonic() < deadline:
        gate_run.refresh_from_db()
        if gate_run.state in ("done", "failed", "cancelled"):
            break
        time.sleep(0.5)
    done.set()
    sampler.join()
    soak = Soak.objects.get(gate_run=gate_run)
    if gate_run.state != "done" or soak.state != Soak.State.DONE:
        raise SystemExit(f"the soak did not finish: {gate_run.state} {gate_run.error}")
    if os.environ.get("SOAK_MEMORY_TRACE"):
        Path(os.environ["SOAK_MEMORY_TRACE"]).write_text(json.dumps(
            {"samples": samples, "load_started": soak.load_started_at.timestamp(),
             "finished": soak.finished_at.timestamp(),
             "events": [(e.at.timestamp(), e.kind) for e in soak.events.all()]}))
    hour = soak.load_started_at.timestamp() + seconds / PLAN_HOURS
    load_end = max(e.at.timestamp() for e in soak.events.filter(kind__startswith="agent "))
    during = [v for t, v in samples if hour <= t <= load_end]
    if not during:
        raise SystemExit("no memory sample after the first hour-equivalent")
    return during[0], max(during), samples[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=180,
                        help="real seconds the 72 h plan is compressed to (default 180)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--broker", default=os.environ.get("TEST_REDIS_URL",
                                                           "redis://127.0.0.1:6379/12"))
    args = parser.parse_args()
    os.environ["ACCEPTANCE_VAR_DIR"] = tempfile.mkdtemp(prefix="bench-soak-")
    use_worker = redis_ok(args.broker)
    if use_worker:
        os.environ["CELERY_BROKER_URL"] = args.broker
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runners.lab.services import lab_down

    call_command("migrate", verbosity=0)
    worker = None
    pid = os.getpid()
    if use_worker:
        import redis

        redis.Redis.from_url(args.broker).flushdb()
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
             "--loglevel=WARNING", "--without-heartbeat", "--without-mingle",
             "--without-gossip", "-n", "bench-soak@%h"],
            cwd=ROOT, env=dict(os.environ), start_new_session=True)
        pid = worker.pid
    results = []
    try:
        for index in range(args.runs):
            results.append(one_soak(args.seconds, pid, index))
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        lab_down()
    anchor = statistics.median(r[0] for r in results)
    peak = statistics.median(r[1] for r in results)
    end = statistics.median(r[2] for r in results)
    where = "celery worker (solo pool, Redis)" if worker is not None else "in-process eager"
    for name, value, target in (("soak_worker_rss_max_during_soak", peak, TARGET),
                                ("soak_worker_rss_after_decision", end, None)):
        print(json.dumps({"name": name, "value": round(value, 1), "unit": "MiB",
                          "anchor": round(anchor, 1), "ratio": round(value / anchor, 3),
                          "target": target, "plan": f"{PLAN_HOURS} h in {args.seconds} s",
                          "runs": args.runs, "worker": where}))


if __name__ == "__main__":
    main()
