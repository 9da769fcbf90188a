"""G4 at site scale: 128 inference nodes × the default 72 h soak plan (15 min windows), its
rows generated in bulk into the benchmark's own PostgreSQL database (``benchmarks/_own.py``).

Figures (one JSON line each: ``{"name", "value", "unit", "anchor", "ratio"}``, the anchor being
the target, ``ratio`` = value ÷ target; medians of ``--runs`` where a figure repeats):

* ``soak_page_p95`` / ``soak_poll_p95`` (ms): the soak page and its 2 s htmx poll as an
  engineer sees them, ``--requests`` requests each (target 300 ms); their CPU p95 too (the
  machine's two cores are shared, so wall time is inflated by the load);
* ``soak_driver_tick`` (s): the database side of one driver tick — folding one new window per
  node into its aggregate and judging every check on the span figures (``soak_checks_update``);
  the nodes' reads run in collection threads and are not the service's cost;
* ``soak_evaluation`` (s): ``soak_decide`` — every span figure derived and stored with its
  input links, every criterion judged, the decision recorded (target 10 s); with
  ``soak_driver_tick_cpu`` / ``soak_evaluation_cpu``: this process's CPU, and ``…_db_cpu``:
  the CPU of the PostgreSQL backend serving it (``/proc``; 0 when not readable);
* ``soak_report`` (s) and ``soak_report_peak_rss`` (MiB): the signed G4 report, issued in a
  child process whose peak RSS is read from ``getrusage`` (targets 60 s, 1024 MiB). Skipped
  with ``--no-report``.

Rows per node and window: 16 client figures of ``vllm bench serve`` (the five the soak reads
plus eleven it stores), the window's ``completion_gap_max``; correctness answers: 3 prompts
every second window; the chart buckets and latest answers folded from them with the
collection's own folds (``runners.soak.digest``). No collection records (``ProbeRun`` with raw
outputs) are generated: the report figure covers the soak section, the figures and the
decision basis, not the per-record evidence table (its cost grows with the records; see the
issue). Nodes' times are plan seconds
from a fixed epoch (compression 1, a lab engagement: simulated evidence).

Run: ``.venv/bin/python benchmarks/soak_site.py [--nodes 128] [--hours 72] [--runs 3]``.
"""

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._own import figure, own, p95  # noqa: E402

T0 = 1764590400.0
BENCH_EXTRA = ("mean_ttft", "median_ttft", "mean_tpot", "median_tpot", "p99_tpot", "mean_itl",
               "median_itl", "p99_itl", "request_throughput", "total_token_throughput",
               "max_concurrency")


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def seed(nodes: int, hours: float):
    """The soak of a fresh lab engagement, its load over and both faults healed (state
    evaluating), with every window's rows and aggregates."""
    import base64

    from acceptance.models import Credential, Node
    from gates.models import Gate
    from gates.services import engagement_create
    from runners.models import GateRun, Measurement
    from runners.soak.digest import digest_rebuild
    from runners.soak.evaluation import soak_checks_update
    from runners.soak.models import FaultWindow, Soak, SoakAgent, SoakWindow
    from runners.soak.plan import plan_sha256

    engagement = engagement_create(name="bench-soak-site", customer="Bench",
                                   start_date=date(2026, 9, 1), is_lab=True)
    Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
        state=Gate.State.PASSED)
    credential = Credential.from_secret("bench-key", "not a real key")
    credential.save()
    key = "ssh-ed25519 " + base64.b64encode(b"bench-host-key").decode()
    common = {"engagement": engagement, "credential": credential, "ssh_user": "acctest",
              "host_key": key, "is_lab": True, "address": "127.0.0.1"}
    array = Node.objects.create(name="array-1", role=Node.Role.ARRAY, **common)
    inference = Node.objects.bulk_create(
        Node(name=f"gpu-{k:03d}", role=Node.Role.INFERENCE, interface="acs-v1", **common)
        for k in range(nodes))
    inference = list(Node.objects.filter(engagement=engagement, role=Node.Role.INFERENCE)
                     .order_by("name"))
    gate = engagement.gates.get(code="G4")
    plan = dict(gate.probe_plan[0]["soak"])
    plan["duration_s"] = hours * 3600
    plan["time_compression"] = 1.0
    gate_run = GateRun.objects.create(gate=gate, attempt=1, started_by="bench",
                                      state=GateRun.State.RUNNING)
    soak = Soak.objects.create(gate_run=gate_run, plan=plan, plan_sha256=plan_sha256(plan),
                               time_compression=1.0, state=Soak.State.RUNNING,
                               started_at=at(T0 - 60), load_started_at=at(T0),
                               loaded_s=plan["duration_s"], heartbeat_at=at(T0))
    agents = SoakAgent.objects.bulk_create(
        SoakAgent(soak=soak, node=n, remote_dir=f"soak/{n.name}", token=n.name,
                  state="finished", simulated=True, tool_version="vllm 0.20.1 (stand-in)",
                  last_collected_at=at(T0))
        for n in inference)
    window_s = float(plan["load"]["window_s"])
    count = int(plan["duration_s"] // window_s)
    faults = []
    for position, fault in enumerate(plan["faults"], start=1):
        node = array if fault["kind"] == "drive_out" else inference[0]
        start = T0 + fault["start_s"]
        faults.append(FaultWindow(
            soak=soak, position=position, name=fault["name"], kind=fault["kind"], node=node,
            target=fault["target"] or {"interface": "acs-v1"}, start_s=fault["start_s"],
            duration_s=fault["duration_s"], state=FaultWindow.State.HEALED,
            injected_at=at(start), healed_at=at(start + fault["duration_s"]), heal_how="timer"))
    FaultWindow.objects.bulk_create(faults)
    during = [(f.injected_at.timestamp(), f.healed_at.timestamp()) for f in faults]
    stored = 0
    for agent in agents:
        rows, shapes = [], []
        for index in range(1, count + 1):
            start, end = T0 + (index - 1) * window_s, T0 + index * window_s
            hit = any(start < e and end > s for s, e in during)
            failed = 3.0 if hit else 0.0
            labels = {"soak_window": str(index)}
            figures = [("completed_requests", 900.0 - failed, "1"),
                       ("failed_requests", failed, "1"),
                       ("ttft_p99", 0.31 + 0.01 * (index % 3) + (0.05 if hit else 0), "s"),
                       ("output_throughput", 52.0 - index % 2, "tok/s")]
            figures += [(name, 1.0 + index % 5, "s" if "t" in name[-4:] else "1")
                        for name in BENCH_EXTRA]
            first, last = start + 0.4, end - 0.6
            window = [Measurement(gate_run=gate_run, node_id=agent.node_id, metric=m,
                                  value=v, unit=u, labels=labels, sampled_at=at(end))
                      for m, v, u in figures]
            window.append(Measurement(
                gate_run=gate_run, node_id=agent.node_id, metric="completion_gap_max",
                value=2.0 + (30 if hit else 0), unit="s", sampled_at=at(end),
                labels={**labels, "window_start": f"{start:.3f}",
                        "first_completion": f"{first:.3f}", "last_completion": f"{last:.3f}"}))
            if index % 2 == 0:
                window += [Measurement(
                    gate_run=gate_run, node_id=agent.node_id, metric="probe_mismatches",
                    value=0.0, unit="1", sampled_at=at(end - 1),
                    labels={"prompt": p, "result": "exact", "soak_round": str(index // 2)})
                    for p in ("sum-contract", "code-review", "translate")]
            rows += window
            shapes.append((index, start, end, 900.0 - failed, failed, figures[2][1],
                           figures[3][1], window[len(figures)].value, first, last,
                           len(window)))
        Measurement.objects.bulk_create(rows, batch_size=5000)
        stored += len(rows)
        aggregates, offset = [], 0
        for index, start, end, done, failed, ttft, thr, gap, first, last, size in shapes:
            ids = sorted(r.id for r in rows[offset:offset + size]
                         if r.metric in ("completed_requests", "failed_requests", "ttft_p99",
                                         "output_throughput", "completion_gap_max"))
            offset += size
            aggregates.append(SoakWindow(
                soak=soak, node_id=agent.node_id, index=index, start=start, end=end,
                completed=done, failed=failed, ttft_p99=ttft, output_throughput=thr,
                completion_gap_max=gap, first_completion=first, last_completion=last,
                measurement_ids=ids))
        SoakWindow.objects.bulk_create(aggregates, batch_size=5000)
        SoakAgent.objects.filter(id=agent.id).update(last_window=count)
    digest_rebuild(soak)  # the chart buckets and latest answers, with the collection's folds
    soak_checks_update(soak=soak)
    soak.refresh_from_db()
    return soak, stored, count


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
    from runners.soak.evaluation import soak_checks_update, soak_decide
    from runners.soak.models import Soak, SoakWindow

    started = time.perf_counter()
    soak, stored, count = seed(args.nodes, args.hours)
    sys.stdout.reconfigure(line_buffering=True)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"# {args.nodes} nodes × {count} windows: {stored} measurement rows, "
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

    # One driver tick's database side: one new window per node folded in, every check judged.
    from runners.soak.models import SoakAgent

    agents = list(SoakAgent.objects.filter(soak=soak).select_related("node", "soak"))
    ticks, tick_cpu, tick_db = [], [], []
    for run in range(args.runs):
        index = count + 1 + run
        start, start_cpu, start_db = time.perf_counter(), time.process_time(), backend_cpu()
        for agent in agents:
            end = T0 + index * 900.0
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
        soak_checks_update(soak=soak)
        ticks.append(time.perf_counter() - start)
        tick_cpu.append(time.process_time() - start_cpu)
        tick_db.append(backend_cpu() - start_db)
    print(figure("soak_driver_tick", statistics.median(ticks), "s", None, 2))
    print(figure("soak_driver_tick_cpu", statistics.median(tick_cpu), "s", None, 2))
    print(figure("soak_driver_tick_db_cpu", statistics.median(tick_db), "s", None, 2))

    Soak.objects.filter(id=soak.id).update(state=Soak.State.EVALUATING)
    soak.refresh_from_db()
    start, start_cpu, start_db = time.perf_counter(), time.process_time(), backend_cpu()
    decision = soak_decide(soak=soak)
    evaluation_s = time.perf_counter() - start
    evaluation_cpu = time.process_time() - start_cpu
    evaluation_db = backend_cpu() - start_db
    if decision is None:
        soak.refresh_from_db()
        raise SystemExit(f"no decision: {soak.error}")
    links = Measurement.inputs.through.objects.count()
    print(f"# decision {decision.outcome}; {links} input links", file=sys.stderr)
    print(figure("soak_evaluation", evaluation_s, "s", 10.0, 2))
    # this process's CPU only: PostgreSQL's (index and foreign-key work of the links) is not in it
    print(figure("soak_evaluation_cpu", evaluation_cpu, "s", 10.0, 2))
    print(figure("soak_evaluation_db_cpu", evaluation_db, "s", None, 2))
    if args.no_report:
        return
    report_in_child(decision.id)


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


def report_in_child(decision_id: int) -> None:
    """Issue the signed report in a forked child; its seconds and peak RSS (getrusage)."""
    from django.db import connections

    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: a fresh peak RSS, measured from here
        code = 1
        try:
            from gates.models import Decision
            from reports.services import report_issue

            start = time.perf_counter()
            report = report_issue(decision=Decision.objects.get(id=decision_id))
            seconds = time.perf_counter() - start
            size = Path(report.path).stat().st_size
            print(f"# report {size} bytes", file=sys.stderr)
            print(figure("soak_report", seconds, "s", 60.0, 2), flush=True)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(figure("soak_report_peak_rss", peak, "MiB", 1024.0, 0))
    if status != 0:
        print(f"# the report child exited with {status}", file=sys.stderr)


if __name__ == "__main__":
    main()
