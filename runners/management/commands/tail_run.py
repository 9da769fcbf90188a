"""``manage.py tail_run PROBE_RUN [--stream stdout|stderr] [--offset N] [--follow]``.

Prints a probe run's output from byte ``--offset`` (default 0) as it is stored, following it
while the run goes on with ``--follow``; the last line on stderr says the offset to resume from,
so a reader that reconnects continues where it was. ``--gate-run ID`` follows every probe run of
a gate run in turn. Exit status 0, or 2 for no such run.
"""

import sys
import time

from django.core.management.base import BaseCommand

from runners.live import output_read
from runners.models import GateRun, ProbeRun

OFFSET_MAX = 2**63 - 1  # a file offset is a signed 64-bit integer (as the API's)


class Command(BaseCommand):
    help = "Print (and follow) a probe run's live output from a byte offset."

    def add_arguments(self, parser):
        parser.add_argument("probe_run", type=int, nargs="?")
        parser.add_argument("--gate-run", type=int, help="follow all probe runs of a gate run")
        parser.add_argument("--stream", choices=["stdout", "stderr"], default="stdout")
        parser.add_argument("--offset", type=int, default=0)
        parser.add_argument("--follow", action="store_true")
        parser.add_argument("--interval", type=float, default=0.5)

    def handle(self, *args, probe_run, gate_run, stream, offset, follow, interval, **options):
        if not 0 <= offset <= OFFSET_MAX:
            self.stderr.write(f"error: --offset must be 0 … {OFFSET_MAX} (a byte offset)")
            sys.exit(2)
        if gate_run is not None:
            if not GateRun.objects.filter(id=gate_run).exists():
                self.stderr.write(f"error: no gate run with id {gate_run}")
                sys.exit(2)
            self.follow_gate_run(gate_run, stream, follow, interval)
            return
        if probe_run is None or not ProbeRun.objects.filter(id=probe_run).exists():
            self.stderr.write(f"error: no probe run with id {probe_run}")
            sys.exit(2)
        offset = self.follow_one(probe_run, stream, offset, follow, interval)
        self.stderr.write(f"[probe run {probe_run} {stream}: resume with --offset {offset}]")

    def follow_one(self, run_id, stream, offset, follow, interval) -> int:
        out = sys.stdout.buffer
        while True:
            piece = output_read(run_id, stream=stream, offset=offset)
            if piece.data:
                out.write(piece.data)
                out.flush()
            offset = piece.next_offset
            if piece.finished or not follow:
                return offset
            if not piece.data:
                time.sleep(interval)

    def follow_gate_run(self, gate_run_id, stream, follow, interval) -> None:
        seen: set[int] = set()
        while True:
            runs = [r for r in ProbeRun.objects.filter(gate_run_id=gate_run_id).order_by("id")
                    if r.id not in seen]
            for run in runs:
                self.stderr.write(f"== probe run {run.id}: {run.probe} on "
                                  f"{run.node.name if run.node else 'service'}")
                self.follow_one(run.id, stream, 0, follow, interval)
                seen.add(run.id)
            state = GateRun.objects.get(id=gate_run_id).state
            if not follow or state in ("done", "failed", "cancelled"):
                if not [r for r in ProbeRun.objects.filter(gate_run_id=gate_run_id)
                        if r.id not in seen]:
                    self.stderr.write(f"[gate run {gate_run_id}: {state}]")
                    return
            time.sleep(interval)
