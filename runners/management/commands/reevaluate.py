"""``manage.py reevaluate GATE_RUN``: re-parse a run's stored raw output with today's parsers.

Shows every difference from the recorded measurements and decision; writes nothing (the signed
record stays). Exit status 0 no difference, 1 differences found, 2 no such run.
"""

import sys

from django.core.management.base import BaseCommand

from runners.models import GateRun
from runners.reevaluation import gate_run_reevaluate


class Command(BaseCommand):
    help = "Re-parse a gate run's stored raw outputs and show differences (read-only)."

    def add_arguments(self, parser):
        parser.add_argument("gate_run", type=int, help="gate run id (run_gate prints it)")

    def handle(self, *args, gate_run, **options):
        run = GateRun.objects.select_related("gate__engagement").filter(id=gate_run).first()
        if run is None:
            self.stderr.write(f"error: no gate run with id {gate_run}")
            sys.exit(2)
        result = gate_run_reevaluate(gate_run=run)
        self.stdout.write(f"{run.gate} run #{run.attempt} (id {run.id}), "
                          f"{run.probe_runs.count()} stored raw outputs re-parsed")
        for line in result.parser_changes:
            self.stdout.write(f"  parser: {line}")
        for line in result.measurement_changes:
            self.stdout.write(f"  measurement: {line}")
        for line in result.verdict_changes:
            self.stdout.write(f"  verdict: {line}")
        self.stdout.write(f"recorded decision: {result.recorded_outcome}; "
                          f"with current parsers: {result.outcome}")
        if result.differs:
            self.stdout.write("DIFFERENT: the recorded, signed decision is left unchanged")
            sys.exit(1)
        self.stdout.write("same: current parsers reproduce the recorded measurements and decision")
        sys.exit(0)
