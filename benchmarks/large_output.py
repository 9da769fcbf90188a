"""Worker memory and time for one probe printing 256 MiB (and 300 MB), vs plain ssh.

Figure (issue 17 "outputs as streams", issue 15 "a tool printing 300 MB"): a command on a lab
node (a real sshd on loopback) prints N random bytes on stdout. Through the service
(``runners.execution.probe_run_execute``: pinned host key, the output streamed to its live file
as it arrives, hashed, renamed to its sha256 name) in a fresh worker process each time:

* ``large_output_256mib_rss``: the worker's peak RSS above its idle RSS (the process warmed by a
  small probe on the same connection first; the peak is reset through ``/proc/self/clear_refs``
  before the big one), against the target of 64 MiB (ratio = value ÷ 64 MiB);
* ``large_output_256mib_seconds``: the probe's wall time, against plain OpenSSH
  ``ssh -p PORT host CMD > /dev/null`` with the same command line (the anchor).

256 MiB is exactly the stated cap: it is stored whole (and, larger than the parsers read, failed
as ``parse`` without being read back). 300 MB goes beyond it: the run ends as ``output_cap``
with the first 268 435 456 bytes kept and hashed (checked against ``head -c`` of the same
stream: the command is seeded, so each run prints the same bytes), the remote command killed.

The command is a benchmark-only probe registered in this process (``bench_large_output``:
``python3`` on the node printing a seeded random stream): no probe of the service prints
300 MB; the output is synthetic, never evidence. ``--postgres``: a throwaway database on the
PostgreSQL of 127.0.0.1:5432 instead of SQLite. Prints JSON lines ``{"name", "value", "unit",
"anchor", "ratio"}``, medians of ``--runs`` (default 3).

Recorded here (2 shared cores, others' suites running; medians of 3): SQLite — 256 MiB: 2.5 MiB
above idle (target 64 MiB), 7.37 s vs plain ssh 8.29 s (0.89×); 300 MB: 2.3 MiB above idle,
18.6 s vs 10.2 s (1.83×). PostgreSQL (1 run) — 256 MiB: 2.6 MiB, 12.6 s vs 8.0 s. The capped
run is the slow one: after the cap the executor kills the remote group and waits for the node
to confirm it gone (``kill_command`` polls up to 6 s); that wait, not the storing, is the gap.

Run: ``.venv/bin/python benchmarks/large_output.py [--runs 3] [--postgres]``.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["ACCEPTANCE_VAR_DIR"] = os.environ.get("BENCH_VAR_DIR") or tempfile.mkdtemp(
    prefix="bench-var-")
os.environ.pop("CELERY_BROKER_URL", None)
if "--postgres" not in sys.argv and "BENCH_DATABASE_URL" not in os.environ:
    os.environ.pop("DATABASE_URL", None)
elif "BENCH_DATABASE_URL" in os.environ:
    os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
else:
    os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/postgres"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

import django  # noqa: E402

django.setup()

MIB = 1 << 20
SIZES = {"256mib": 256 * MIB, "300mb": 300_000_000}
# A seeded stream (the same bytes every run), printed in 1 MiB blocks: random bytes, so no
# layer can shrink them.
SCRIPT = ("import random,sys; r=random.Random(17); n={n}; o=sys.stdout.buffer\n"
          "while n > 0:\n    k=min(n, 1<<20); o.write(r.randbytes(k)); n-=k\n")


def _register_probe():
    from runners.probes import PROBES, Param, Probe

    spec = Probe(
        name="bench_large_output", role="array", parser="nvme_list", version_argv=("true",),
        timeout_s=900, params={"bytes": Param(int, 1, 1, 1 << 31)},
        argv=lambda p: ["python3", "-c", SCRIPT.format(n=p["bytes"])],
        description="benchmark only: prints N seeded random bytes")
    PROBES[spec.name] = spec
    return spec


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} missing from /proc/self/status")


def child(size: int, gate_run_id: int) -> None:
    """One worker process: warm up, reset the peak, run the big probe, say what it cost."""
    from runners.execution import _JobContext, probe_run_execute
    from runners.models import NodeJob
    from runners.transport import SSHConnection

    spec = _register_probe()
    job = NodeJob.objects.select_related("node", "gate_run").get(gate_run_id=gate_run_id)
    with SSHConnection(job.node.ssh_target()) as connection:
        ctx = _JobContext(job, connection, {})
        probe_run_execute(ctx=ctx, spec=spec, values={"bytes": 4 * MIB})  # warm
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        idle = _status("VmRSS")
        start = time.perf_counter()
        run = probe_run_execute(ctx=ctx, spec=spec, values={"bytes": size})
        elapsed = time.perf_counter() - start
        peak = _status("VmHWM")
    run.refresh_from_db()
    print(json.dumps({"rss_above_idle": peak - idle, "seconds": elapsed, "state": run.state,
                      "error_kind": run.error_kind, "size": run.stdout_size,
                      "sha256": run.stdout_sha256, "file": run.stdout_file}))


def _first_bytes_sha256(argv: list[str], limit: int) -> str:
    """sha256 of the first ``limit`` bytes plain ssh receives (read in blocks)."""
    digest, left = hashlib.sha256(), limit
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while left > 0 and (block := proc.stdout.read(min(left, MIB))):
            digest.update(block)
            left -= len(block)
        proc.stdout.read()  # drain: let it end on its own
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    original_db = None
    if args.postgres:
        original_db = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    else:
        call_command("migrate", verbosity=0)
    from runners.lab.services import lab_down, lab_up
    from runners.models import GateRun, NodeJob

    spec = _register_probe()
    cap = int(settings.OUTPUT_CAP_BYTES)
    engagement, lab = lab_up(scenario_name="healthy")
    try:
        node = engagement.nodes.get(role="array")
        gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                          started_by="benchmark")
        NodeJob.objects.create(gate_run=gate_run, node=node, state=NodeJob.State.RUNNING)
        known = lab.directory / "known_hosts"
        known.write_text(f"[127.0.0.1]:{lab.port} {lab.host_key}\n")
        ssh = ["ssh", "-F", "/dev/null", "-i", str(lab.directory / "client_key"),
               "-p", str(lab.port), "-o", f"UserKnownHostsFile={known}",
               "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
               f"{lab.user}@127.0.0.1"]
        env = {**os.environ, "BENCH_VAR_DIR": os.environ["ACCEPTANCE_VAR_DIR"],
               "BENCH_DATABASE_URL": (f"postgres://postgres@127.0.0.1:5432/"
                                      f"{connection.settings_dict['NAME']}")
               if args.postgres else ""}
        if not args.postgres:
            env.pop("BENCH_DATABASE_URL")
        where = "postgres" if args.postgres else "sqlite"
        for label, size in SIZES.items():
            command = spec.command({"bytes": size})
            expected = _first_bytes_sha256([*ssh, command], cap)
            ours, anchor, memory = [], [], []
            for _ in range(args.runs):
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(size), str(gate_run.id)],
                    env=env, capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                kind = "output_cap" if size > cap else "parse"
                assert result["error_kind"] == kind, result
                assert result["size"] == min(size, cap) and result["sha256"] == expected, result
                stored = Path(settings.OUTPUTS_DIR) / result["file"]
                assert stored.stat().st_size == min(size, cap)
                ours.append(result["seconds"])
                memory.append(result["rss_above_idle"])
                start = time.perf_counter()
                with open(os.devnull, "wb") as sink:
                    subprocess.run([*ssh, command], stdout=sink, check=True)
                anchor.append(time.perf_counter() - start)
            print(f"# {label} ({where}): service {sorted(round(x, 2) for x in ours)} s, "
                  f"plain ssh {sorted(round(x, 2) for x in anchor)} s, rss above idle "
                  f"{sorted(round(m / MIB, 1) for m in memory)} MiB", file=sys.stderr)
            rss = statistics.median(memory) / MIB
            print(json.dumps({"name": f"large_output_{label}_{where}_rss", "value": round(rss, 1),
                              "unit": "MiB", "anchor": 64, "ratio": round(rss / 64, 3)}))
            value, base = statistics.median(ours), statistics.median(anchor)
            print(json.dumps({"name": f"large_output_{label}_{where}_seconds",
                              "value": round(value, 3), "unit": "s", "anchor": round(base, 3),
                              "ratio": round(value / base, 3)}))
    finally:
        lab_down()
        if original_db is not None:
            connection.creation.destroy_test_db(original_db, verbosity=0)


if __name__ == "__main__":
    if "--child" in sys.argv:
        at = sys.argv.index("--child")
        child(int(sys.argv[at + 1]), int(sys.argv[at + 2]))
    else:
        main()
