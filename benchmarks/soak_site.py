"""G4 at site scale: 128 inference nodes × the default 72 h soak plan (15 min windows), its
rows generated in bulk into the benchmark's own PostgreSQL database (``benchmarks/_own.py``).

Figures (one JSON line each: ``{"name", "value", "unit", "anchor", "ratio"}``, the anchor being
the target, ``ratio`` = value ÷ target; medians of ``--runs`` where a figure repeats):

* ``soak_page_p95`` / ``soak_poll_p95`` (ms): the soak page and its 2 s htmx poll as an
  engineer sees them, ``--requests`` requests each (target 300 ms); their CPU p95 too (the
  machine's two cores are shared, so wall time is inflated by the load);
* ``soak_driver_tick`` (s): the database side of one driver tick as the driver takes it —
  one new window per node folded into its aggregate (``windows_record``), then into the live
  span figures the driver keeps across ticks, every check judged and stored
  (``soak_checks_refresh``) — beside, as its anchor, the from-scratch tick it replaced (the
  same new windows, then every window and answer read again and derived anew:
  ``soak_checks_update``); ``…_cpu``, ``…_db_cpu`` the same for the CPU;
  ``soak_driver_judge`` (and its CPU figures): the tick without the collection's own
  storing of the windows (the fold, judging and storing the checks, against
  ``soak_checks_update``); and
  ``soak_driver_tick_start`` (s): the full pass that builds the live figures (driver start,
  resume, recovery, a fault injected or healed). The nodes' reads run in collection threads
  and are not the service's cost;
* ``soak_evaluation`` (s): ``soak_decide`` — every span figure derived and stored with its
  input links, every criterion judged, the decision recorded (target 10 s); with
  ``soak_driver_tick_cpu`` / ``soak_evaluation_cpu``: this process's CPU, and ``…_db_cpu``:
  the CPU of the PostgreSQL backend serving it (``/proc``; 0 when not readable);
* ``soak_report`` (s) and ``soak_report_peak_rss`` (MiB): the signed G4 report, issued in a
  fresh process whose own peak RSS (``VmHWM``, Django and WeasyPrint loaded as in a worker)
  is read at its end (targets 60 s, 1024 MiB). Skipped with ``--no-report``.

The soak is built as its collection leaves it (``runners.lab.soak_scale``): per node the
``--golden`` round and, per window, one collected range of ``windows.jsonl`` and one of
``probes.jsonl`` — each a collection record (``ProbeRun``) whose raw output is a stored file,
read by the soak's own parsers into its rows (the 11 figures ``vllm bench serve``'s result
gives and ``completion_gap_max`` a window, 3 correctness answers a round) and folded into the
window aggregates: at 128 nodes × 72 h 73 856 records and 0.55 M rows (``#`` line on stderr). The
report embeds every record's raw output and lists its figures in ``summary.json``, so its
figure covers them. Nodes' times are plan seconds from a fixed epoch (compression 1, a lab
engagement: simulated evidence).

Run: ``.venv/bin/python benchmarks/soak_site.py [--nodes 128] [--hours 72] [--runs 3]``.
"""

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._own import figure, own, p95  # noqa: E402


def backend_cpu() -> float:
    """CPU seconds (user + system) of the PostgreSQL backend serving this process's
    connection, from ``/proc`` (the server runs on this machine); 0.0 when not readable."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--hours", type=float, default=72.0)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    owned = own("soak_site", postgres=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        measure(args)
    finally:
        owned.release()


def measure(args) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from acceptance.models import Membership
    from runners.models import Measurement
    from runners.soak.collection import windows_record
    from runners.soak.evaluation import (
        soak_checks_refresh,
        soak_checks_update,
        soak_decide,
        soak_tick_fold,
        soak_tick_start,
    )
    from runners.soak.models import Soak, SoakWindow

    started = time.perf_counter()
    from runners.lab.soak_scale import T0, at, soak_at_scale

    soak, stored, records, count = soak_at_scale(args.nodes, args.hours)
    sys.stdout.reconfigure(line_buffering=True)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"# {args.nodes} nodes × {count} windows: {records} collection records, "
          f"{stored} measurement rows, "
          f"{SoakWindow.objects.count()} window aggregates ({time.perf_counter() - started:.0f} s"
          f" to seed); load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    engineer = User.objects.create_user("bench-engineer")
    Membership.objects.create(user=engineer, role=Membership.Role.ENGINEER)
    browser = Client(SERVER_NAME="localhost")
    browser.force_login(engineer)

    def timed(url: str, must: bytes) -> tuple[list[float], list[float]]:
        browser.get(url)
        gc.collect()
        gc.freeze()
        times, cpu = [], []
        for _ in range(args.requests):
            start, start_cpu = time.perf_counter(), time.process_time()
            response = browser.get(url)
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
            if response.status_code != 200 or must not in response.content:
                raise SystemExit(f"GET {url}: {response.status_code} {response.content[:200]!r}")
        return times, cpu

    page, page_cpu = timed(reverse("soak-detail", args=[soak.id]), b"gpu-127"
                           if args.nodes > 127 else b"gpu-000")
    poll, poll_cpu = timed(reverse("soak-live", args=[soak.id]), b"gpu-000")
    print(figure("soak_page_p95", p95(page), "ms", 300.0, 1))
    print(figure("soak_page_cpu_p95", p95(page_cpu), "ms", 300.0, 1))
    print(figure("soak_poll_p95", p95(poll), "ms", 300.0, 1))
    print(figure("soak_poll_cpu_p95", p95(poll_cpu), "ms", 300.0, 1))

    # One driver tick's database side, one new window per node: the driver's path (the live
    # figures kept across ticks) and, as its anchor, the from-scratch tick, run by run.
    from runners.soak.models import SoakAgent

    agents = list(SoakAgent.objects.filter(soak=soak).select_related("node", "soak"))

    def windows_arrive(index: int) -> None:
        end = T0 + index * 900.0
        for agent in agents:
            rows = Measurement.objects.bulk_create([
                Measurement(gate_run_id=soak.gate_run_id, node=agent.node, metric=m, value=v,
                            unit=u, sampled_at=at(end), labels=dict(
                                {"soak_window": str(index)}, **extra))
                for m, v, u, extra in (
                    ("completed_requests", 900.0, "1", {}), ("failed_requests", 0.0, "1", {}),
                    ("ttft_p99", 0.31, "s", {}), ("output_throughput", 52.0, "tok/s", {}),
                    ("completion_gap_max", 2.0, "s", {
                        "window_start": f"{end - 900:.3f}",
                        "first_completion": f"{end - 899:.3f}",
                        "last_completion": f"{end - 1:.3f}"}))])
            windows_record(soak, agent, rows)

    def clocked(work) -> tuple[float, float, float]:
        start, start_cpu, start_db = time.perf_counter(), time.process_time(), backend_cpu()
        work()
        return (time.perf_counter() - start, time.process_time() - start_cpu,
                backend_cpu() - start_db)

    def both(first, second) -> tuple[float, ...]:
        """Seconds, CPU, database CPU of ``first`` + ``second``, then of ``second`` alone."""
        a, b = clocked(first), clocked(second)
        return tuple(x + y for x, y in zip(a, b, strict=True)) + b

    starts = [clocked(lambda: soak_tick_start(soak)) for _ in range(args.runs)]
    live = soak_tick_start(soak)
    ticks: dict[str, list[tuple[float, ...]]] = {"live": [], "scratch": []}
    for run in range(args.runs):
        index = count + 1 + 2 * run
        ticks["scratch"].append(both(lambda i=index: windows_arrive(i),
                                     lambda: soak_checks_update(soak=soak)))
        soak_tick_fold(soak, live)  # the scratch tick's windows: the driver has them too
        ticks["live"].append(both(lambda i=index + 1: windows_arrive(i),
                                  lambda: soak_checks_refresh(soak=soak, stamp=live)))
    if (live.spans.windows, live.window_id) != (
            SoakWindow.objects.filter(soak=soak).count(),
            SoakWindow.objects.order_by("id").last().id):
        raise SystemExit("the live figures did not fold every window")

    def median(path: str, column: int) -> float:
        return statistics.median(t[column] for t in ticks[path])

    for column, name in enumerate(("soak_driver_tick", "soak_driver_tick_cpu",
                                   "soak_driver_tick_db_cpu", "soak_driver_judge",
                                   "soak_driver_judge_cpu", "soak_driver_judge_db_cpu")):
        print(figure(name, median("live", column), "s", median("scratch", column), 3))
    print(figure("soak_driver_tick_start", statistics.median(s[0] for s in starts), "s",
                 None, 3))
    print(figure("soak_driver_tick_start_cpu", statistics.median(s[1] for s in starts), "s",
                 None, 3))

    Soak.objects.filter(id=soak.id).update(state=Soak.State.EVALUATING)
    soak.refresh_from_db()
    start, start_cpu, start_db = time.perf_counter(), time.process_time(), backend_cpu()
    decision = soak_decide(soak=soak)
    evaluation_s = time.perf_counter() - start
    evaluation_cpu, evaluation_db = time.process_time() - start_cpu, backend_cpu() - start_db
    if decision is None:
        soak.refresh_from_db()
        raise SystemExit(f"no decision: {soak.error}")
    links = Measurement.inputs.through.objects.count()
    print(f"# decision {decision.outcome}; {links} input links", file=sys.stderr)
    print(figure("soak_evaluation", evaluation_s, "s", 10.0, 2))
    print(figure("soak_evaluation_cpu", evaluation_cpu, "s", 10.0, 2))  # this process only
    print(figure("soak_evaluation_db_cpu", evaluation_db, "s", None, 2))
    if args.no_report:
        return
    report_in_child(decision.id)


#: The report's own process: Django set up as a worker is, then the report issued; its peak
#: RSS is the process's own high-water mark (VmHWM: a forked child would count the pages it
#: shares with this process, which holds the seeding's memory).
REPORT_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import django
django.setup()
from benchmarks._own import figure
from gates.models import Decision
from reports.services import report_issue
start = time.perf_counter()
report = report_issue(decision=Decision.objects.get(id=int(sys.argv[2])))
seconds = time.perf_counter() - start
print(f"# report {Path(report.path).stat().st_size} bytes", file=sys.stderr)
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(figure("soak_report", seconds, "s", 60.0, 2))
print(figure("soak_report_peak_rss", peak / 1024, "MiB", 1024.0, 0))
"""


def report_in_child(decision_id: int) -> None:
    """Issue the signed report in a fresh process (``REPORT_CHILD``): its seconds and its own
    peak RSS."""
    from django.db import connections

    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    done = subprocess.run([sys.executable, "-c", REPORT_CHILD, str(ROOT), str(decision_id)],
                          check=False, timeout=1800)
    if done.returncode != 0:
        print(f"# the report process exited with {done.returncode}", file=sys.stderr)


if __name__ == "__main__":
    main()
