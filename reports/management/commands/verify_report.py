"""``manage.py verify_report FILE``: are a report's signatures intact and trusted, who signed
it and when, was it modified after signing, does its embedded evidence match its summary?
Exit 0 if valid, else 1. The first line is ``valid: …`` or ``NOT valid: …``; one line per
signature (with the party it chains to: vendor, customer ORG or untrusted) and one for the
evidence follow. Same answer as the verify page (``reports.services.report_verify``): the
vendor's signature against the vendor's roots only, the customer field against the customer
certificates of the report's engagement (and ``--customer-cert``) only."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import NoReturn

from django.core.management.base import BaseCommand, CommandParser

from reports.services import report_verify
from reports.signing import SigningSetupError, VerificationResult, trust_roots, tsa_trust_roots


def _when(value) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "?"


def detail_lines(result: VerificationResult) -> list[str]:
    """One line per signature, then the evidence and modification lines."""
    lines = []
    for n, sig in enumerate(result.signatures, start=1):
        parts = [f"signature {n}: field {sig.field}, {sig.party}, signed by {sig.signer} at "
                 f"{_when(sig.signed_at)}"]
        if sig.timestamp:
            parts.append(f"timestamp {_when(sig.timestamp)} "
                         f"({'valid' if sig.timestamp_ok else 'NOT valid'})")
        parts.append("intact" if sig.intact else "NOT intact")
        parts.append("trusted" if sig.trusted else "NOT trusted")
        parts.append("covers the whole document" if sig.whole_file else sig.later_changes)
        lines.append("; ".join(parts))
    if result.signatures:
        lines.append("modified after signing: "
                     + ("yes" if result.modified_after_signing else "no"))
    if result.evidence is not None:
        lines.append(f"evidence: {result.evidence.summary}")
        if getattr(result.evidence, "simulated", False):
            lines.append("evidence: simulated evidence (lab stand-in tools, not customer "
                         "hardware)")
    return lines


class Command(BaseCommand):
    help = "Check the digital signatures and the embedded evidence of a signed report (PDF)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the signed report PDF")
        parser.add_argument(
            "--trust-root",
            action="append",
            dest="trust_roots",
            metavar="PEM",
            help="certificate to trust (repeatable); default: REPORT_TRUST_ROOTS or the dev CA",
        )
        parser.add_argument(
            "--customer-cert", action="append", dest="customer_certs", metavar="PEM", default=[],
            help="also accept this certificate (a customer's signing certificate, not a CA) for "
                 "the customer's countersignature field only")
        parser.add_argument(
            "--tsa-root", action="append", dest="tsa_roots", metavar="PEM",
            help="timestamp authority root (repeatable); default: SIGNING_TSA_TRUST_ROOTS")

    def handle(self, *args: object, **options: object) -> None:
        path = Path(str(options["file"]))
        try:
            data = path.read_bytes()
        except OSError as e:
            self._fail(f"cannot read {path}: {e.strerror or e}")
        try:
            roots = trust_roots(paths=options["trust_roots"])  # type: ignore[arg-type]
            extra = (trust_roots(paths=options["customer_certs"])  # type: ignore[arg-type]
                     if options["customer_certs"] else [])
            tsa = tsa_trust_roots(paths=options["tsa_roots"])  # type: ignore[arg-type]
        except SigningSetupError as e:
            self._fail(str(e))
        result = report_verify(data=data, roots=roots, tsa_roots=tsa,
                               customer_certificates=extra)
        if not result.valid:
            self._fail(result.summary, detail_lines(result))
        self.stdout.write(f"valid: {result.summary}")
        for line in detail_lines(result):
            self.stdout.write(f"  {line}")

    def _fail(self, reason: str, details: list[str] = ()) -> NoReturn:  # type: ignore[assignment]
        # A plain exit, not CommandError: the first line on stdout is the answer.
        self.stdout.write(f"NOT valid: {reason}")
        for line in details:
            self.stdout.write(f"  {line}")
        raise SystemExit(1)
