"""``manage.py import_evidence ENGAGEMENT GATE BUNDLE [BUNDLE …] [--confirm --reason '…']``.

Verifies the bundles whole (one per node of the gate, at most ``runners.evidence.MAX_BUNDLES``),
stores them as imported evidence and evaluates the gate as ``run_gate`` does (with a broker a
worker decides it, and the command waits for that, ``--timeout``), printing the same table. On
a gate that has passed the import is a re-run: it needs ``--confirm`` and ``--reason``
(recorded in the audit trail), as ``run_gate`` does. Exit status: 0 passed, 1 stopped,
2 refused (nothing stored) or no decision.
"""

import getpass
import sys
from contextlib import ExitStack
from pathlib import Path

from acceptance.models import Engagement
from gates.services import GateRefused, gate_get
from runners.dispatch import ConfirmationRequired
from runners.evidence import MAX_BUNDLES, EvidenceRefused, evidence_import
from runners.management.commands.run_gate import EXIT_FAILED
from runners.management.commands.run_gate import Command as RunGateCommand


class Command(RunGateCommand):
    help = "Import evidence bundles made by a collection script and decide the gate."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("gate")
        parser.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
        parser.add_argument("--imported-by", default=getpass.getuser())
        parser.add_argument("--confirm", action="store_true",
                            help="confirm importing on a gate that has passed (a re-run: the "
                                 "new decision replaces the pass)")
        parser.add_argument("--reason", default="",
                            help="why a passed gate is decided again (the audit trail)")
        parser.add_argument("--timeout", type=float, default=3600,
                            help="seconds to wait for the decision when a worker evaluates "
                                 "it (a broker is configured; default 1 h)")

    def handle(self, *args, engagement, gate, bundles, imported_by, confirm, reason, timeout,
               **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            self.fail(f"error: no engagement named {engagement!r}")
        if len(bundles) > MAX_BUNDLES:
            self.fail(f"refused: {len(bundles)} bundles: at most {MAX_BUNDLES} in one import")
        with ExitStack() as stack:
            data = []
            for path in bundles:  # opened here, read by the import one piece at a time
                try:
                    data.append((path.name, stack.enter_context(path.open("rb"))))
                except OSError as error:
                    self.fail(f"refused: cannot read {path}: {error.strerror}")
            try:
                gate_obj = gate_get(engagement=found, code=gate)
                gate_run = evidence_import(gate=gate_obj, bundles=data, imported_by=imported_by,
                                           confirmed=confirm, reason=reason)
            except ConfirmationRequired as refusal:
                self.stderr.write(f"refused: {refusal} (import_evidence … --confirm "
                                  f"--reason '…')")
                sys.exit(EXIT_FAILED)
            except (GateRefused, EvidenceRefused) as refusal:
                self.stderr.write(f"refused: {refusal}")
                sys.exit(EXIT_FAILED)
        self.stdout.write(f"{found.name} {gate_obj.code}: imported run #{gate_run.attempt} "
                          f"from {len(data)} bundle(s)")
        self.wait(gate_run, timeout)  # with a broker a worker decides it: wait as run_gate does
        self.finish(gate_run)
