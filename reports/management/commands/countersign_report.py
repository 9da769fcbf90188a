"""``manage.py countersign_report FILE --pkcs12 KEY.p12 --out OUT``: the customer's
countersignature, with their own key, on a report the service signed.

Appends a PAdES signature in the field "CustomerSignature" as an incremental update: the
service's signature stays valid and the service accepts the result (as a new version) only
because its first bytes are the file it signed. The key is read from the local file and used
here; it is never sent anywhere or stored. Exit 0 written, 1 with ``CommandError`` on bad input.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reports.signing import (
    CUSTOMER_SIGNATURE_FIELD,
    SigningSetupError,
    load_signer,
    sign_pdf,
    trust_roots,
    verify_pdf,
)


class Command(BaseCommand):
    help = "Countersign a signed report with a local PKCS#12 key (the customer's)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the report PDF signed by the service")
        parser.add_argument("--pkcs12", required=True, help="the signer's PKCS#12 (.p12) file")
        parser.add_argument("--passphrase-file", help="file holding the PKCS#12 passphrase")
        parser.add_argument("--passphrase-env", default="COUNTERSIGN_PASSPHRASE",
                            help="environment variable holding the passphrase "
                                 "(default COUNTERSIGN_PASSPHRASE)")
        parser.add_argument("--out", required=True, help="where to write the countersigned PDF")
        parser.add_argument("--reason", default="Customer countersignature: decision approved")
        parser.add_argument(
            "--trust-root", action="append", dest="trust_roots", metavar="PEM",
            help="vendor certificate the report must verify against before it is countersigned "
                 "(repeatable); default: REPORT_TRUST_ROOTS or the dev CA")
        parser.add_argument("--tsa-url", default="",
                            help="RFC 3161 timestamp authority (default: none)")

    def handle(self, *args: object, **options: object) -> None:
        source, out = Path(str(options["file"])), Path(str(options["out"]))
        try:
            data = source.read_bytes()
        except OSError as e:
            raise CommandError(f"cannot read {source}: {e.strerror or e}") from None
        if not data.startswith(b"%PDF-"):
            raise CommandError(f"{source} is not a PDF file")
        if out.exists():
            raise CommandError(f"{out} exists; name a new file")
        if not out.parent.is_dir():
            raise CommandError(f"{out.parent} is not a directory; name a file in one")
        # Never put a signature on a report that does not verify (changed, unsigned, untrusted):
        # it would vouch for a document the vendor's signature no longer covers.
        try:
            roots = trust_roots(paths=options["trust_roots"])  # type: ignore[arg-type]
        except SigningSetupError as e:
            raise CommandError(str(e)) from None
        check = verify_pdf(data, roots=roots)
        if not check.valid:
            raise CommandError(f"{source} does not verify, nothing countersigned: "
                               f"{check.summary}")
        passphrase = None
        if options["passphrase_file"]:
            try:
                passphrase = Path(str(options["passphrase_file"])).read_bytes().strip()
            except OSError as e:
                raise CommandError(f"cannot read the passphrase file: {e.strerror}") from None
        elif os.environ.get(str(options["passphrase_env"])):
            passphrase = os.environ[str(options["passphrase_env"])].encode()
        try:
            signer = load_signer(pkcs12_path=str(options["pkcs12"]), passphrase=passphrase)
        except SigningSetupError as e:
            raise CommandError(str(e)) from None
        timestamper = None
        if options["tsa_url"]:
            from pyhanko.sign.timestamps.requests_client import RequestsHTTPTimeStamper

            timestamper = RequestsHTTPTimeStamper(str(options["tsa_url"]))
        try:
            signed = sign_pdf(data, signer=signer, reason=str(options["reason"]),
                              location="customer", field_name=CUSTOMER_SIGNATURE_FIELD,
                              timestamper=timestamper)
        except Exception as e:  # pyHanko's errors for an unreadable PDF or a taken field
            raise CommandError(f"cannot countersign {source}: {type(e).__name__}: {e}") from None
        with open(out, "xb") as handle:
            handle.write(signed)
        self.stdout.write(f"countersigned: {out}")
