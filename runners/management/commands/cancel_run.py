"""``manage.py cancel_run GATE_RUN [--by NAME]``: stop a gate run and its remote commands.

Every running probe's process group is killed on its node and confirmed gone before the run
says "cancelled"; who cancelled is recorded. Exit status 0 cancelled, 1 not confirmed or
already over, 2 no such run.
"""

import getpass
import sys

from django.core.management.base import BaseCommand

from runners.control import gate_run_cancel
from runners.models import GateRun


class Command(BaseCommand):
    help = "Cancel a gate run: kill its remote commands (confirmed) and record who cancelled."

    def add_arguments(self, parser):
        parser.add_argument("gate_run", type=int, help="gate run id (run_gate prints it)")
        parser.add_argument("--by", default=getpass.getuser(), help="who cancels (recorded)")

    def handle(self, *args, gate_run, by, **options):
        run = GateRun.objects.filter(id=gate_run).first()
        if run is None:
            self.stderr.write(f"error: no gate run with id {gate_run}")
            sys.exit(2)
        report = gate_run_cancel(gate_run=run, cancelled_by=by)
        if report.already_over:
            self.stdout.write(f"{run}: already {run.state}; nothing to cancel")
            sys.exit(1)
        for line in report.killed:
            self.stdout.write(f"  {line}")
        run.refresh_from_db()
        confirmed = all("NOT confirmed" not in line for line in report.killed)
        self.stdout.write(f"{run}: {run.state} (cancel requested by {run.cancel_requested_by})")
        sys.exit(0 if confirmed and run.state == GateRun.State.CANCELLED else 1)
