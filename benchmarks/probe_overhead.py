"""One probe end to end through the service vs the same command through plain ``ssh``.

Figure (TARGETS.md): ``nvme smart-log`` (the lab's stand-in) on a lab node, through the whole
service path: ``gate_run_start`` of a one-step plan, the task through Redis to a real Celery
worker started with the shipped settings (``benchmarks/_worker.py``: the argv ``serve`` gives
its worker children), the claim, the SSH connection with the pinned host key, the tool-version
query, the raw output stored, parsed, the measurements stored, the job ended — timed from the
call to the job's ``finished_at``. Anchor: ``ssh -p PORT host CMD`` with OpenSSH's client and the
SAME key exchange, cipher, MAC and host-key algorithm as the service's paramiko negotiates
(read from its transport; OpenSSH's default post-quantum exchange alone is ~1.4× slower),
connection set-up included in both. Target ≤ 1.05×. Medians of ``--runs`` runs, interleaved.

Also the service's CPU (utime + stime of the worker process, all its threads: CPU time, not
wall time, since the machine is shared): ``probe_service_cpu_worker`` for a one-probe job
(connection set-up, claim, version query and job end included), ``probe_service_cpu_per_probe``
the marginal cost of one more probe on the job's open connection, from a ``--probes``-step plan:
(CPU of K probes − CPU of 1) ÷ (K − 1). Target ≤ 5 ms (issue 17; anchor 5). And the
dispatcher's CPU for ``gate_run_start``.

The headline and the CPU figures are measured with the SSH pool off (a worker started with
``ACCEPTANCE_SSH_POOL_IDLE_SECONDS=0``: every job sets up its own connection, as plain ssh does).
Then a second worker with the shipped pool: ``probe_end_to_end_warm_pool`` (each job reuses the
connection the last one kept) against ``ssh`` over an OpenSSH master connection it keeps
(``ControlMaster``, same algorithms), and ``probe_service_cpu_worker_warm_pool``.

Owns PostgreSQL ``bench_probe_overhead_<pid>`` and Redis index 14 (``benchmarks/_own.py``;
``--redis-index`` for another).

Run: ``.venv/bin/python benchmarks/probe_overhead.py [--runs 9] [--probes 20]``
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import figure, own  # noqa: E402

PLAN = [{"probe": "nvme_smart_log", "role": "array", "params": {"device": "/dev/nvme3"}}]


def negotiated(node) -> dict[str, str]:
    """The algorithms the service's paramiko agrees with the node: its first preferred key
    exchange that OpenSSH (the same build as the lab's sshd) offers, and the cipher, MAC and
    host-key type its transport is using."""
    from runners.transport import SSHConnection

    offered = set(subprocess.run(["ssh", "-Q", "kex"], capture_output=True, text=True,
                                 check=True).stdout.split())
    with SSHConnection(node.ssh_target()) as connection:
        transport = connection.client.get_transport()
        kex = next(k for k in transport.get_security_options().kex if k in offered)
        return {"KexAlgorithms": kex, "Ciphers": transport.local_cipher,
                "MACs": transport.local_mac, "HostKeyAlgorithms": transport.host_key_type}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--probes", type=int, default=20,
                        help="steps of the plan the per-probe CPU is measured with (>= 2)")
    parser.add_argument("--redis-index", type=int, default=14)
    args = parser.parse_args()
    if args.probes < 2:
        parser.error("--probes must be at least 2")
    owned = own("probe_overhead", redis_index=args.redis_index, postgres=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        for pool in ("cold", "warm"):
            env = dict(os.environ)
            if pool == "cold":  # every job opens its own SSH connection, as plain ssh does
                env["ACCEPTANCE_SSH_POOL_IDLE_SECONDS"] = "0"
            worker = subprocess.Popen(
                [sys.executable, str(ROOT / "benchmarks" / "_worker.py"), "1"], cwd=ROOT,
                env=env, start_new_session=True)
            try:
                time.sleep(8)
                measure(args, worker.pid) if pool == "cold" else measure_warm(args, worker.pid)
            finally:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=60)
    finally:
        from runners.lab.services import lab_down

        lab_down()
        owned.release()


def lab_node():
    """The bench engagement's array node and its lab server, up once (both phases)."""
    from runners.lab.services import lab_up

    if not _lab:
        _lab.extend(lab_up(scenario_name="healthy", engagement_name="bench-probe"))
    engagement, lab = _lab
    return engagement, lab


_lab: list = []


def ssh_argv(lab, algorithms: dict[str, str], command: str, *extra: str) -> list[str]:
    key = lab.directory / "client_key"
    known = lab.directory / "known_hosts"
    known.write_text(f"[127.0.0.1]:{lab.port} {lab.host_key}\n")
    return ["ssh", "-F", "/dev/null", "-T", "-i", str(key), "-p", str(lab.port),
            "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "Compression=no", *extra,
            *[x for name, value in algorithms.items() for x in ("-o", f"{name}={value}")],
            f"{lab.user}@127.0.0.1", command]


def service_run(gate, steps: int):
    """One run of ``steps`` × PLAN through the worker: (wall s to the job's end, the worker's
    CPU s, the dispatcher's CPU s, the run, its job, its start); the evaluation waited for,
    untimed."""
    from django.utils import timezone
    from fanout import cpu_s

    from runners.dispatch import gate_run_start
    from runners.models import NodeJob

    engagement = gate.engagement
    gate.probe_plan = PLAN * steps
    gate.save(update_fields=["probe_plan"])
    engagement.gates.filter(code="G1").update(state="pending")
    engagement.state = "active"
    engagement.save(update_fields=["state"])
    cpu0 = cpu_s([_worker_pid[0]])
    started_cpu = time.process_time()
    started = timezone.now()
    run = gate_run_start(gate=gate, started_by="benchmark")
    dispatch_cpu = time.process_time() - started_cpu
    while True:
        job = NodeJob.objects.get(gate_run=run)
        if job.finished_at is not None:
            break
        time.sleep(0.005)
    cpu1 = cpu_s([_worker_pid[0]])
    assert job.state == "done", job.error
    assert list(run.probe_runs.values_list("state", flat=True)) == ["parsed"] * steps
    while True:  # the evaluation and report, untimed, before the next run
        run.refresh_from_db(fields=["state"])
        if run.state in ("done", "failed", "cancelled"):
            break
        time.sleep(0.05)
    return ((job.finished_at - started).total_seconds(), cpu1 - cpu0, dispatch_cpu, run, job,
            started)


_worker_pid: list[int] = [0]


def measure_warm(args, worker_pid: int) -> None:
    """The shipped pool (a second worker): each job after the first reuses the connection the
    last one kept; anchored on plain ssh over an OpenSSH master connection it keeps
    (ControlMaster), the same kex and cipher."""
    from runners.probes import probe

    _worker_pid[0] = worker_pid
    engagement, lab = lab_node()
    gate = engagement.gates.get(code="G1")
    algorithms = negotiated(engagement.nodes.get(role="array"))
    control = Path(tempfile.mkdtemp(prefix="cm", dir="/tmp")) / "%C"  # a socket: short path
    mux = ("-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
           "-o", "ControlPersist=120")
    ssh = ssh_argv(lab, algorithms, probe("nvme_smart_log").command(PLAN[0]["params"]), *mux)

    def ssh_once() -> float:
        start = time.perf_counter()
        done = subprocess.run(ssh, capture_output=True, check=True)
        assert b"critical_warning" in done.stdout
        return time.perf_counter() - start

    service_run(gate, 1), ssh_once()  # the kept connection and the master made
    ours, anchor, cpu = [], [], []
    for _ in range(args.runs):
        wall, worker_cpu, *_ = service_run(gate, 1)
        ours.append(wall)
        cpu.append(worker_cpu)
        anchor.append(ssh_once())
    subprocess.run([*ssh[:-2], "-O", "exit", ssh[-2]], capture_output=True)
    print(f"# warm pool: service {sorted(round(x, 3) for x in ours)}; ssh over its master "
          f"connection {sorted(round(x, 3) for x in anchor)}; load average "
          f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(figure("probe_end_to_end_warm_pool", statistics.median(ours), "s",
                 statistics.median(anchor)))
    print(figure("probe_service_cpu_worker_warm_pool", statistics.median(cpu) * 1000, "ms",
                 None, 2))
    print(f"# mean worker CPU of a one-probe job on a kept connection: "
          f"{statistics.mean(cpu) * 1000:.1f} ms (the clock ticks are 10 ms)", file=sys.stderr)


def measure(args, worker_pid: int) -> None:
    """The headline, cold: the worker keeps no SSH connection
    (``ACCEPTANCE_SSH_POOL_IDLE_SECONDS=0``), so every job sets up its own, as plain ssh does."""
    from runners.probes import probe

    _worker_pid[0] = worker_pid
    engagement, lab = lab_node()
    node = engagement.nodes.get(role="array")
    gate = engagement.gates.get(code="G1")
    algorithms = negotiated(node)
    ssh = ssh_argv(lab, algorithms, probe("nvme_smart_log").command(PLAN[0]["params"]))
    print(f"# both sides: {algorithms}", file=sys.stderr)

    phases: list[dict[str, float]] = []

    def service_once(steps: int = 1) -> tuple[float, float, float]:
        wall, cpu, dispatch_cpu, run, job, started = service_run(gate, steps)
        if steps == 1:  # where the wall time goes, from the ledger's own timestamps
            probe_run = run.probe_runs.get()
            phases.append({
                "dispatch and queue": (job.started_at - started).total_seconds(),
                "connect": (probe_run.started_at - job.started_at).total_seconds(),
                "command": (probe_run.finished_at - probe_run.started_at).total_seconds(),
                "store and end": (job.finished_at - probe_run.finished_at).total_seconds()})
        return wall, cpu, dispatch_cpu

    def ssh_once() -> float:
        start = time.perf_counter()
        done = subprocess.run(ssh, capture_output=True, check=True)
        assert b"critical_warning" in done.stdout
        return time.perf_counter() - start

    service_once(), ssh_once()  # warm caches
    ours, anchor, worker_cpu, dispatch_cpu, per_probe = [], [], [], [], []
    for _ in range(args.runs):
        wall, cpu, dispatched = service_once()
        ours.append(wall)
        worker_cpu.append(cpu)
        dispatch_cpu.append(dispatched)
        anchor.append(ssh_once())
        _, cpu_k, _ = service_once(args.probes)
        per_probe.append((cpu_k - cpu) / (args.probes - 1))
    value, base = statistics.median(ours), statistics.median(anchor)
    print(f"# service {sorted(round(x, 3) for x in ours)}; ssh "
          f"{sorted(round(x, 3) for x in anchor)}; load average {os.getloadavg()[0]:.1f}",
          file=sys.stderr)
    print(figure("probe_end_to_end", value, "s", base))
    print("# the service's wall time (ms, medians): " + ", ".join(
        f"{name} {statistics.median(p[name] for p in phases) * 1000:.1f}"
        for name in phases[0]) + " (claim → probe start: SSH set-up with the job's move to "
        "running; command: the start transaction, channel, tool and output)", file=sys.stderr)
    print(f"# worker CPU per probe (ms, marginal over {args.probes} steps): "
          f"{sorted(round(x * 1000, 2) for x in per_probe)}; the clock ticks are 10 ms, so "
          f"each figure is ±{20 / (args.probes - 1):.1f} ms and the median is what counts",
          file=sys.stderr)
    print(figure("probe_service_cpu_per_probe", statistics.median(per_probe) * 1000, "ms",
                 5.0, 2))
    print(figure("probe_service_cpu_worker", statistics.median(worker_cpu) * 1000, "ms", None,
                 2))
    print(f"# means (the clock ticks are 10 ms): worker CPU of a one-probe job "
          f"{statistics.mean(worker_cpu) * 1000:.1f} ms, per probe "
          f"{statistics.mean(per_probe) * 1000:.2f} ms, so the fixed part of a job about "
          f"{(statistics.mean(worker_cpu) - statistics.mean(per_probe)) * 1000:.1f} ms",
          file=sys.stderr)
    print(figure("probe_service_cpu_dispatch", statistics.median(dispatch_cpu) * 1000, "ms",
                 None, 2))


if __name__ == "__main__":
    main()
