"""``manage.py redecide REPORT.pdf``: the auditor's check (``python -m acceptance_core
redecide``) with the service's trust: the signatures as ``verify_report`` checks them (vendor
roots, the engagement's registered customer certificates), then every criterion re-decided
from the embedded evidence. Prints recorded against recomputed per criterion and the decision.
Exit 0 everything matches, 1 a figure, verdict or decision differs (named), 2 the report cannot
be checked — a countersignature no registered (or ``--customer-cert``) customer certificate can
check included: the service trusts a countersignature only against the customer's own
certificates, never the vendor's roots. Every refusal is one line ``cannot check: …`` (exit 2);
output cut short by its reader (``| head -1``) ends as every ``manage.py`` command: status
141, no traceback."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from acceptance_core.__main__ import redecide_evidence
from acceptance_core.pdf import structure_problem
from reports.services import report_verify
from reports.signing import SigningSetupError, trust_roots


class Command(BaseCommand):
    help = "Re-decide a signed report from its embedded evidence (exit 0 match, 1 differs, 2 " \
           "cannot check)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the signed report PDF")
        parser.add_argument("--trust", action="append", dest="trust", metavar="ROOT.pem",
                            help="vendor trust root (repeatable); default: REPORT_TRUST_ROOTS "
                                 "or the dev CA")
        # --customer-trust as in ``python -m acceptance_core redecide``; --customer-cert kept
        parser.add_argument("--customer-trust", "--customer-cert", action="append",
                            dest="customer_certs",
                            metavar="PEM", default=[],
                            help="also accept this customer signing certificate, for the "
                                 "customer's countersignature only (repeatable)")

    def handle(self, *args: object, **options: object) -> None:
        path = Path(str(options["file"]))
        try:
            data = path.read_bytes()
        except OSError as e:
            self._exit(2, f"cannot check: cannot read {path}: {e.strerror or e}")
        problem = structure_problem(data)
        if problem:
            self._exit(2, f"cannot check: {path}: {problem}")
        try:
            roots = trust_roots(paths=options["trust"])  # type: ignore[arg-type]
            extra = (trust_roots(paths=options["customer_certs"])  # type: ignore[arg-type]
                     if options["customer_certs"] else [])
        except SigningSetupError as e:
            self._exit(2, f"cannot check: {e}")
        result = report_verify(data=data, roots=roots, customer_certificates=extra)
        if not result.valid:
            self._exit(2, f"cannot check: signature: {result.summary}")
        self.stdout.write(f"signature: {result.summary}")
        self.stdout.ending = ""  # the table is printed line by line, each with its own newline
        status = redecide_evidence(data, self.stdout)
        self.stdout.flush()  # a closed pipe is found here (manage.py: 141), not at exit
        raise SystemExit(status)

    def _exit(self, status: int, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
        raise SystemExit(status)
