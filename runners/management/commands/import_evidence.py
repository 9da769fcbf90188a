"""``manage.py import_evidence ENGAGEMENT GATE BUNDLE [BUNDLE …]``.

Verifies the bundles whole (one per node of the gate), stores them as imported evidence and
evaluates the gate as ``run_gate`` does, printing the same table. Exit status: 0 passed,
1 stopped, 2 refused (nothing stored) or no decision.
"""

import getpass
import sys
from pathlib import Path

from acceptance.models import Engagement
from gates.services import GateRefused, gate_get
from runners.evidence import EvidenceRefused, evidence_import
from runners.management.commands.run_gate import EXIT_FAILED
from runners.management.commands.run_gate import Command as RunGateCommand


class Command(RunGateCommand):
    help = "Import evidence bundles made by a collection script and decide the gate."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("gate")
        parser.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
        parser.add_argument("--imported-by", default=getpass.getuser())

    def handle(self, *args, engagement, gate, bundles, imported_by, **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            self.fail(f"error: no engagement named {engagement!r}")
        data = []
        for path in bundles:
            try:
                data.append((path.name, path.read_bytes()))
            except OSError as error:
                self.fail(f"refused: cannot read {path}: {error.strerror}")
        try:
            gate_obj = gate_get(engagement=found, code=gate)
            gate_run = evidence_import(gate=gate_obj, bundles=data, imported_by=imported_by)
        except (GateRefused, EvidenceRefused) as refusal:
            self.stderr.write(f"refused: {refusal}")
            sys.exit(EXIT_FAILED)
        self.stdout.write(f"{found.name} {gate_obj.code}: imported run #{gate_run.attempt} "
                          f"from {len(data)} bundle(s)")
        self.finish(gate_run)
