"""``manage.py verify_report FILE``: is a gate report's signature valid? Exit 0 if so, else 1."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from django.core.management.base import BaseCommand, CommandParser

from reports.signing import SigningSetupError, trust_roots, verify_pdf


class Command(BaseCommand):
    help = "Check the digital signature of a signed gate report (PDF)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the signed report PDF")
        parser.add_argument(
            "--trust-root",
            action="append",
            dest="trust_roots",
            metavar="PEM",
            help="certificate to trust (repeatable); default: REPORT_TRUST_ROOTS or the dev CA",
        )

    def handle(self, *args: object, **options: object) -> None:
        path = Path(str(options["file"]))
        try:
            data = path.read_bytes()
        except OSError as e:
            self._fail(f"cannot read {path}: {e.strerror or e}")
        try:
            roots = trust_roots(paths=options["trust_roots"])  # type: ignore[arg-type]
        except SigningSetupError as e:
            self._fail(str(e))
        result = verify_pdf(data, roots=roots)
        if not result.valid:
            self._fail(result.summary)
        self.stdout.write(f"valid: {result.summary}")

    def _fail(self, reason: str) -> NoReturn:
        # A plain exit, not CommandError: the one line on stdout is the whole answer.
        self.stdout.write(f"NOT valid: {reason}")
        raise SystemExit(1)
