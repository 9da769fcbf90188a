"""Live log tail of a run printing 10 MB, through the service vs plain ``ssh`` to a file.

Figure (TARGETS.md): one command that prints ``--mib`` MiB (default 10) of log lines on
stdout, run on a lab node (a real sshd on loopback) two ways, interleaved, ``--runs`` times:

* through the service: ``runners.execution.probe_run_execute`` — SSH with the pinned host key,
  the output streamed to its live file as it arrives (flushed and its size on the row every
  0.5 s: what the live run page and ``tail_run --follow`` read), hashed on the way, then
  renamed to its sha256 name (``runners.outputs``);
* the anchor: OpenSSH's ``ssh -p PORT host CMD > file`` with the same command line.

The command prints its 10 MB of log lines on stderr, as tools print their progress and log, and
a small result on stdout. Every byte must be stored: the benchmark checks that the live chunks
carried all the bytes, and that the stored stderr has the length and sha256 of the file plain
ssh wrote. ``--postgres`` runs it on a throwaway database of the PostgreSQL on 127.0.0.1:5432
(the production database) instead of SQLite. Prints JSON
lines ``{"name", "value", "unit", "anchor", "ratio"}``: medians of the runs (s), and the
median number of live flushes per run. Target ≤ 1.1×.

The command is a benchmark-only probe registered in this process (``bench_live_tail``, a
``yes … | head -c N``): no probe of the service prints 10 MB.

Recorded here (2 shared cores, others' suites running; medians of 7 interleaved runs): SQLite
0.281 s vs plain ssh 0.228 s = 1.23× (with 256 KiB flushes, 40 per run, it was 1.96×);
PostgreSQL 0.544 s vs 0.255 s = 2.14×. Both MISS the 1.1× target: the service writes the
10 MB twice — as live chunks (the flush runs inside the SSH read loop, so the transfer waits
for it) and again when the run ends, folded into the probe run's own column (a write of 10 MB
costs 0.1–0.2 s on PostgreSQL here, as much as the whole plain ssh run). Meeting 1.1× needs
the chunks written from a thread that overlaps the transfer and kept as the stored copy
instead of being folded; not done.

Run: ``.venv/bin/python benchmarks/live_tail.py [--runs 7] [--mib 10]`` (scratch var dir,
SQLite; machines here are shared and noisy — read the medians, never one run).
"""

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _own import own  # noqa: E402

# Its own database: PostgreSQL bench_live_tail_<pid> with --postgres, else SQLite in a scratch
# directory; no broker (the probe runs in-process).
OWNED = own("live_tail", postgres="--postgres" in sys.argv)

import django  # noqa: E402

django.setup()

LINE = "acctest live tail: fio: (groupid=0, jobs=1): err= 0: pid=4711: read: IOPS=10.5k"
RESULT = '{"Devices": []}'


def _register_probe(size: int):
    """N bytes of log lines on stderr (where tools print their progress and log), then a small
    result on stdout that the ``nvme_list`` parser reads (an empty inventory)."""
    from runners.probes import PROBES, Probe

    script = f"yes '{LINE}' | head -c {size} >&2; echo '{RESULT}'"
    spec = Probe(
        name="bench_live_tail", role="array", parser="nvme_list", version_argv=("true",),
        timeout_s=600, params={}, argv=lambda _p: ["sh", "-c", script],
        description="benchmark only: prints N bytes of log lines")
    PROBES[spec.name] = spec
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--postgres", action="store_true",
                        help="a throwaway database on 127.0.0.1:5432 instead of SQLite")
    args = parser.parse_args()
    size = args.mib << 20
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from runners import live
    from runners.execution import _JobContext, probe_run_execute
    from runners.lab.services import lab_down, lab_up
    from runners.models import GateRun, NodeJob
    from runners.transport import SSHConnection

    spec = _register_probe(size)
    flushed = {"bytes": 0, "flushes": 0}
    original_flush = live.OutputRecorder.flush

    def counting_flush(self):
        # bytes made readable to live readers so far (the live files' sizes at this flush)
        flushed["bytes"] = sum(f.size for f in self.files.values())
        flushed["flushes"] += 1
        original_flush(self)

    live.OutputRecorder.flush = counting_flush
    original_finish = live.OutputRecorder.finish

    def counting_finish(self):
        # the bytes after the last flush become readable when the files are finished (renamed
        # to their sha256 names): no flush is spent on them (issue 17: flushes off the hot path)
        flushed["bytes"] = sum(f.size for f in self.files.values())
        return original_finish(self)

    live.OutputRecorder.finish = counting_finish
    engagement, lab = lab_up(scenario_name="healthy")
    scratch = Path(tempfile.mkdtemp(prefix="bench-tail-"))
    try:
        node = engagement.nodes.get(role="array")
        gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                          started_by="benchmark")
        job = NodeJob.objects.create(gate_run=gate_run, node=node, state="running",
                                     lease="benchmark")
        command = spec.command({})
        known = lab.directory / "known_hosts"
        known.write_text(f"[127.0.0.1]:{lab.port} {lab.host_key}\n")
        ssh = ["ssh", "-F", "/dev/null", "-i", str(lab.directory / "client_key"),
               "-p", str(lab.port), "-o", f"UserKnownHostsFile={known}",
               "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
               f"{lab.user}@127.0.0.1", command]
        out, err = scratch / "out.log", scratch / "err.log"

        def ssh_once() -> tuple[float, str]:
            start = time.perf_counter()
            with open(out, "wb") as stdout, open(err, "wb") as stderr:
                subprocess.run(ssh, stdout=stdout, stderr=stderr, check=True)
            elapsed = time.perf_counter() - start
            data = err.read_bytes()
            assert len(data) == size, f"plain ssh wrote {len(data)} bytes, not {size}"
            assert out.read_text().strip() == RESULT
            return elapsed, hashlib.sha256(data).hexdigest()

        def service_once(expected_sha: str) -> tuple[float, int]:
            flushed.update(bytes=0, flushes=0)
            start = time.perf_counter()
            with SSHConnection(node.ssh_target()) as connection:
                run = probe_run_execute(ctx=_JobContext(job, connection, {}), spec=spec,
                                        values={})
            elapsed = time.perf_counter() - start
            run.refresh_from_db()
            assert run.exit_code == 0 and run.state == "parsed", (run.state, run.error)
            assert flushed["bytes"] == size + len(RESULT) + 1, (
                f"the live store received {flushed['bytes']} bytes, not {size + len(RESULT) + 1}")
            stored = run.raw("stderr")
            assert run.stderr_size == size and len(stored) == size
            assert hashlib.sha256(stored).hexdigest() == expected_sha, (
                "stored bytes differ from plain ssh's")
            return elapsed, flushed["flushes"]

        _, sha = ssh_once()
        service_once(sha)  # warm caches
        ours, anchor, flushes = [], [], []
        for _ in range(args.runs):
            elapsed, count = service_once(sha)
            ours.append(elapsed)
            flushes.append(count)
            anchor.append(ssh_once()[0])
        value, base = statistics.median(ours), statistics.median(anchor)
        print(f"# {args.mib} MiB, {args.runs} runs interleaved; service {sorted(ours)}; "
              f"plain ssh {sorted(anchor)}", file=sys.stderr)
        where = "postgres" if args.postgres else "sqlite"
        print(json.dumps({"name": f"live_tail_{args.mib}mib_{where}", "value": round(value, 4),
                          "unit": "s", "anchor": round(base, 4),
                          "ratio": round(value / base, 3)}))
        print(json.dumps({"name": f"live_tail_{args.mib}mib_{where}_flushes",
                          "value": statistics.median(flushes), "unit": "1",
                          "anchor": None, "ratio": None}))
    finally:
        live.OutputRecorder.flush = original_flush
        lab_down()
        OWNED.release()


if __name__ == "__main__":
    main()
