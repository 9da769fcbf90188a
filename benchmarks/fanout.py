"""One gate run fanned out to 8 / 32 / 64 lab nodes against the slowest single node alone.

Figure (TARGETS.md): wall time of G2 (link speed, fio, serving benchmark on every inference
node) dispatched through Redis to a real Celery worker (threads pool), from dispatch to decision,
for N lab nodes (each its own sshd on loopback). Anchor: the slowest of 5 runs of the same gate
on a single lab node. Target ≤ 1.2×. One JSON line per N.

Run: ``.venv/bin/python benchmarks/fanout.py [--nodes 8 32 64] [--broker redis://…]``
(needs a Redis; uses a scratch var dir and SQLite unless DATABASE_URL is set).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--broker", default=os.environ.get("TEST_REDIS_URL",
                                                           "redis://127.0.0.1:6379/13"))
    parser.add_argument("--single-runs", type=int, default=5)
    args = parser.parse_args()
    os.environ["ACCEPTANCE_VAR_DIR"] = tempfile.mkdtemp(prefix="bench-fanout-")
    os.environ["CELERY_BROKER_URL"] = args.broker
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    redis.Redis.from_url(args.broker).flushdb()
    call_command("migrate", verbosity=0)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=threads",
         f"--concurrency={max(args.nodes)}", "--loglevel=WARNING", "--without-heartbeat",
         "--without-mingle", "--without-gossip", "-n", "bench@%h"],
        cwd=ROOT, env=dict(os.environ), start_new_session=True)
    from runners.dispatch import gate_run_start
    from runners.lab.services import lab_down, lab_up
    from runners.models import GateRun

    def timed_g2(engagement) -> float:
        engagement.gates.filter(code="G1").update(state="passed")
        engagement.gates.filter(code="G2").update(state="pending")
        engagement.state = "active"
        engagement.save(update_fields=["state"])
        start = time.perf_counter()
        run = gate_run_start(gate=engagement.gates.get(code="G2"), started_by="benchmark")
        while True:
            run.refresh_from_db()
            if run.state in ("done", "failed", "cancelled"):
                break
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        assert run.state == "done", run.error
        return elapsed

    try:
        single, _ = lab_up(scenario_name="healthy", engagement_name="bench-single")
        timed_g2(single)  # warm-up
        anchor = max(timed_g2(single) for _ in range(args.single_runs))
        for n in args.nodes:
            engagement, _ = lab_up(scenario_name="healthy", nodes=n,
                                   engagement_name=f"bench-fanout-{n}")
            engagement.max_parallel_nodes = n
            engagement.save(update_fields=["max_parallel_nodes"])
            value = timed_g2(engagement)
            assert GateRun.objects.filter(gate__engagement=engagement).count() == 1
            print(json.dumps({"name": f"gate_run_fanout_{n}_nodes", "value": round(value, 3),
                              "unit": "s", "anchor": round(anchor, 3),
                              "ratio": round(value / anchor, 3)}), flush=True)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        lab_down()


if __name__ == "__main__":
    main()
