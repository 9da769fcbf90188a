"""One gate run fanned out to 8 / 32 / 64 / 128 lab nodes against the median single node.

G2's three probes on every inference node, dispatched through Redis to real Celery workers
started with the shipped settings (the argv ``manage.py serve`` gives its worker children:
2 processes × 64 threads, ``benchmarks/_worker.py``), each node its own sshd on loopback. The
stand-ins are nearly free (``benchmarks/_cheap.py``: ``/bin/cat`` of the outputs the lab's
stand-ins printed in one real G2 run, parsed by the real parsers), so the figures are the
service's own cost. ``--steps K`` repeats G2's three probes K times per node: the workers' CPU
per node job at two K splits into a fixed part (task, connections, claim, end) and a per-probe
part. The site's ``max_parallel_nodes`` is the shipped default (128).

Figures (one JSON line each; medians of ``--runs`` runs per size, the anchor the median of
``--single-runs`` runs on one node):

* ``fanout_<N>_nodes_node_phase`` (s): dispatch until the last node job ended, anchored on the
  same for one node. Target ≤ 1.2×.
* ``fanout_<N>_nodes_to_decision`` (s): dispatch until the run is over (decision and signed
  report included), anchored on one node's.
* ``service_cpu_per_probe_<N>_nodes`` (ms): the workers' CPU (utime + stime of their
  processes) during the node phase plus the dispatcher's, per probe run. Target ≤ 5 ms.
* ``machine_cpu_<N>_nodes_node_phase`` (s): the whole machine's CPU in the node phase (every
  process: the service, the lab's sshds and shells, PostgreSQL, Redis, other engineers' work),
  anchored on the CPU the machine's cores offer in that wall time (cores × node phase): a ratio
  near 1 says the figure is bound by this machine's cores, not by the service's waits.
* ``evaluation_report_<N>_nodes`` (s): wall time from the last node job to the run's end
  (derivation, evaluation, the signed report). Target ≤ 3 s at 128.
* ``evaluation_report_cpu_<N>_nodes`` (s): the workers' CPU in that time.

Owns PostgreSQL ``bench_fanout_<pid>`` and Redis index 13 (``benchmarks/_own.py``;
``--redis-index`` for another).

``--ssh-pool off`` starts the workers with ``ACCEPTANCE_SSH_POOL_IDLE_SECONDS=0``: every node job
opens its own SSH connection (the shipped pool reuses a node's connection from its last run).

Run: ``.venv/bin/python benchmarks/fanout.py [--nodes 8 32 64 128] [--runs 3] [--steps 1]
[--ssh-pool on|off]``
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import figure, own  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def cpu_s(pids: list[int]) -> float:
    """utime + stime of the processes (all their threads), in seconds."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def machine_cpu_s() -> float:
    """CPU time every process of the machine spent (``/proc/stat``: all but idle and iowait),
    in seconds: the lab's sshds and shells, PostgreSQL and Redis beside the service."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS


def cpu_by_command() -> dict[int, tuple[str, float]]:
    """Every process's CPU with that of its reaped children (utime + stime + cutime + cstime,
    s), by pid, with its command name: a node's sshd counts its sessions' shells and tools, the
    postmaster its ended backends."""
    seen = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            head, tail = stat.read_text().rsplit(")", 1)
        except OSError:  # ended meanwhile
            continue
        fields = tail.split()
        seen[int(stat.parent.name)] = (head.split("(", 1)[1],
                                       sum(int(x) for x in fields[11:15]) / TICKS)
    return seen


def cpu_split(before: dict, after: dict, workers: list[int]) -> dict[str, float]:
    """CPU (s) between two ``cpu_by_command`` snapshots by command name, the service's workers
    apart (``worker``) and this process apart (``benchmark``)."""
    split: dict[str, float] = {}
    for pid, (name, cpu) in after.items():
        old = before.get(pid)
        spent = cpu - (old[1] if old and old[0] == name else 0.0)
        key = "worker" if pid in workers else "benchmark" if pid == os.getpid() else name
        split[key] = split.get(key, 0.0) + spent
    return {k: round(v, 2) for k, v in sorted(split.items(), key=lambda kv: -kv[1]) if v > 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64, 128])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single-runs", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=300.0,
                        help="seconds a run may take before the benchmark stops (s)")
    parser.add_argument("--redis-index", type=int, default=13)
    parser.add_argument("--ssh-pool", choices=("on", "off"), default="on",
                        help="on (shipped): a node's later runs reuse the connection its first "
                             "run kept; off: every node job opens its own SSH connection")
    parser.add_argument("--steps", type=int, default=1,
                        help="G2's three probes repeated this many times per node (the CPU per "
                             "node job against the probes it runs: fixed and per-probe parts)")
    args = parser.parse_args()
    owned = own("fanout", redis_index=args.redis_index, postgres=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import _cheap
    from _worker import shipped_argv
    from django.conf import settings

    cheap_dir = Path(owned.var_dir) / "cheap"
    _cheap.register(cheap_dir)
    from acceptance.serving import child_commands

    count = len(child_commands(roles=("worker",), var_dir=settings.VAR_DIR))
    print(f"# workers: {count} × {shipped_argv(1)}", file=sys.stderr)
    env = dict(os.environ)
    if args.ssh_pool == "off":
        env["ACCEPTANCE_SSH_POOL_IDLE_SECONDS"] = "0"
    print(f"# SSH pool {args.ssh_pool}: " + (
        "the single node's runs after its first, and each size's runs after its first, reuse "
        "the connections kept by the run before (warm on both sides of each ratio; a size's "
        "first run is cold)" if args.ssh_pool == "on" else
        "every node job opens and closes its own SSH connection (cold on both sides)"),
        file=sys.stderr)
    workers = [subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "_worker.py"),
                                 str(n), str(cheap_dir)], cwd=ROOT, env=env,
                                start_new_session=True) for n in range(1, count + 1)]
    pids = [w.pid for w in workers]
    try:
        time.sleep(8)  # the workers connect to Redis
        measure(args, cheap_dir, pids)
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
        from runners.lab.services import lab_down

        lab_down()
        owned.release()


def measure(args, cheap_dir: Path, pids: list[int]) -> None:
    import _cheap

    from runners.dispatch import gate_run_start
    from runners.lab.services import lab_down, lab_up
    from runners.models import GateRun, NodeJob

    def timed_g2(engagement) -> dict:
        engagement.gates.filter(code="G1").update(state="passed")
        engagement.gates.filter(code="G2").update(state="pending")
        engagement.state = "active"
        engagement.save(update_fields=["state"])
        cpu0, machine0, split0 = cpu_s(pids), machine_cpu_s(), cpu_by_command()
        start, start_cpu = time.perf_counter(), time.process_time()
        run = gate_run_start(gate=engagement.gates.get(code="G2"), started_by="benchmark")
        dispatch_cpu = time.process_time() - start_cpu
        nodes_done, deadline = None, time.monotonic() + args.deadline
        while True:
            if time.monotonic() > deadline:  # a job no worker took (a refused database
                # connection, 'too many clients'): stop rather than wait for the sweep
                raise SystemExit(f"gate run {run.id} not over after {args.deadline:g} s: "
                                 f"{run.node_jobs.exclude(state='done').count()} node jobs "
                                 f"not done")
            if nodes_done is None and not NodeJob.objects.filter(
                    gate_run=run, state__in=["queued", "connecting", "running"]).exists():
                nodes_done, cpu1 = time.perf_counter(), cpu_s(pids)
                machine1, split1 = machine_cpu_s(), cpu_by_command()
            run.refresh_from_db(fields=["state", "error"])
            if run.state in ("done", "failed", "cancelled"):
                break
            time.sleep(0.02)
        end, cpu2 = time.perf_counter(), cpu_s(pids)
        if nodes_done is None:
            nodes_done, cpu1, machine1, split1 = end, cpu2, machine_cpu_s(), cpu_by_command()
        # G2 repeated (--steps) is not a plan G2's derivations decide: its node phase counts
        assert run.state == "done" or args.steps > 1, run.error
        probes = run.probe_runs.count()
        failed = run.probe_runs.exclude(state="parsed").count()
        assert failed == 0, f"{failed} probe runs did not parse"
        return {"node_phase": nodes_done - start, "to_decision": end - start,
                "cpu_per_probe_ms": (cpu1 - cpu0 + dispatch_cpu) * 1000 / probes,
                "evaluation": end - nodes_done, "evaluation_cpu": cpu2 - cpu1,
                "probes": probes, "machine_cpu": machine1 - machine0,
                "dispatch_ms": dispatch_cpu * 1000, "workers_s": cpu1 - cpu0,
                "split": cpu_split(split0, split1, pids)}

    single, _ = lab_up(scenario_name="healthy", engagement_name="bench-single")
    first = timed_g2(single)  # real stand-ins: their outputs become the cheap ones
    _cheap.capture(GateRun.objects.get(gate__engagement=single, gate__code="G2"), cheap_dir)
    print(f"# one real G2 on one node: {first['to_decision']:.2f} s", file=sys.stderr)
    single.gates.filter(code="G2").update(probe_plan=_cheap.plan() * args.steps)
    timed_g2(single)  # warm-up of the cheap plan
    alone = [timed_g2(single) for _ in range(args.single_runs)]

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    anchor_nodes, anchor_decision = med(alone, "node_phase"), med(alone, "to_decision")
    print(f"# single node: node phase {sorted(r['node_phase'] for r in alone)}; load average "
          f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(figure("fanout_1_node_node_phase", anchor_nodes, "s", None, 3))
    print(figure("service_cpu_per_probe_1_node", med(alone, "cpu_per_probe_ms"), "ms", 5.0, 2))
    for n in args.nodes:
        engagement, _ = lab_up(scenario_name="healthy", nodes=n,
                               engagement_name=f"bench-fanout-{n}")
        engagement.gates.filter(code="G2").update(probe_plan=_cheap.plan() * args.steps)
        rows = [timed_g2(engagement) for _ in range(args.runs)]
        print(f"# {n} nodes: node phase {[round(r['node_phase'], 2) for r in rows]}, "
              f"{rows[0]['probes']} probe runs; dispatcher CPU "
              f"{[round(r['dispatch_ms']) for r in rows]} ms, workers' "
              f"{[round(r['workers_s'], 2) for r in rows]} s; load average "
              f"{os.getloadavg()[0]:.1f}; the "
              f"machine's CPU in the last node phase by command (s): {rows[-1]['split']}",
              file=sys.stderr, flush=True)
        print(figure(f"fanout_{n}_nodes_node_phase", med(rows, "node_phase"), "s",
                     anchor_nodes, 3))
        print(figure(f"fanout_{n}_nodes_to_decision", med(rows, "to_decision"), "s",
                     anchor_decision, 3))
        print(figure(f"service_cpu_per_probe_{n}_nodes", med(rows, "cpu_per_probe_ms"), "ms",
                     5.0, 2))
        print(figure(f"machine_cpu_{n}_nodes_node_phase", med(rows, "machine_cpu"), "s",
                     CORES * med(rows, "node_phase"), 3))
        print(figure(f"evaluation_report_{n}_nodes", med(rows, "evaluation"), "s", 3.0, 3))
        print(figure(f"evaluation_report_cpu_{n}_nodes", med(rows, "evaluation_cpu"), "s", 3.0,
                     3), flush=True)
        lab_down()


if __name__ == "__main__":
    main()
