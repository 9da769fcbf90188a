"""The signed report as the verifier reads it: its signatures (pyHanko) and its embedded files
(pypdf). No Django: each party's trust roots are given (``--trust VENDOR-ROOT.pem``,
``--customer-trust CUSTOMER-ROOT.pem``).

Trust per party (as ``reports.signing`` applies them): the first signature is the vendor's and
is trusted only against the vendor's roots — a vendor signature whose certificate chains to a
customer root is refused; every signature must be intact; the last one must cover the whole
file and any earlier one may be followed only by later signatures. At most one
countersignature, in the field ``CustomerSignature``, is the customer's: it is trusted only
against the customer's roots, and refused when it was made with the vendor's key, chains to the
vendor's roots or (customer roots given) does not chain to the customer's. Without a customer
root it is reported as intact but *not checked* (``SignatureCheck.unchecked``), never as
trusted.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyhanko.keys import load_certs_from_pemder_data
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import SignatureCoverageLevel, validate_pdf_signature
from pyhanko_certvalidator import ValidationContext
from pypdf import PdfReader
from pypdf.errors import PyPdfError

SUMMARY_NAME = "summary.json"


class ReportUnreadable(Exception):
    """The file is not a report the verifier can read; the message says why."""


CUSTOMER_FIELD = "CustomerSignature"  # reports.trust.CUSTOMER_SIGNATURE_FIELD


@dataclass(frozen=True)
class SignatureCheck:
    """``ok``: every signature intact and none refused (the vendor's trusted); ``unchecked``:
    the countersignature that could not be checked for want of a customer root ("" if none)."""

    ok: bool
    lines: list[str] = field(default_factory=list)
    problem: str = ""
    unchecked: str = ""


def certificates_in(path: str) -> list[Any]:
    """The certificates of one PEM/DER file, each parsed whole. Raises ReportUnreadable naming
    the file and what is wrong with it (unreadable, not a certificate, none in it)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ReportUnreadable(f"cannot load trust root {path}: {e.strerror or e}") from e
    try:
        certificates = list(load_certs_from_pemder_data(data))
        # asn1crypto parses lazily: a damaged certificate fails only when read whole
        parsed = [certificate.native for certificate in certificates]
    except Exception as e:  # asn1crypto's errors are many; every one means the same here
        raise ReportUnreadable(f"cannot load trust root {path}: not a PEM/DER certificate")\
            from e
    if not parsed:
        raise ReportUnreadable(f"cannot load trust root {path}: it holds no certificate (a "
                               f"PEM/DER certificate is expected)")
    return certificates


def load_roots(paths: Sequence[str]) -> list[Any]:
    """Certificates from PEM/DER files. Raises ReportUnreadable naming the file."""
    roots = []
    for path in paths:
        roots.extend(certificates_in(path))
    return roots


def structure_problem(data: bytes) -> str:
    """Why ``data`` is not worth handing to the PDF parser, "" when it looks like a PDF: empty,
    no ``%PDF-`` header, no ``%%EOF`` near its end (truncated), no ``startxref`` pointing at a
    cross-reference section. Cheap (it reads the first and last kilobytes) so junk is refused
    before any parsing or cryptography."""
    if not data:
        return "the file is empty (0 bytes), not a PDF file"
    if b"%PDF-" not in data[:1024]:
        return "not a PDF file (no %PDF- header in its first kilobyte)"
    tail = data[-2048:]
    if b"%%EOF" not in tail[-1024:]:
        return "not a complete PDF file (no %EOF marker at its end: truncated?)"
    found = list(re.finditer(rb"startxref\s+(\d{1,12})\s+%%EOF", tail))
    if not found:
        return "not a complete PDF file (no startxref before its end)"
    offset = int(found[-1].group(1))
    if offset >= len(data) or not re.match(rb"\s*(xref|\d+\s+\d+\s+obj)",
                                           data[offset:offset + 64]):
        return "not a well-formed PDF file (startxref does not point at a cross-reference table)"
    return ""


def _chains(sig: Any, roots: Sequence[Any]) -> bool:
    """Whether ``sig``'s signer chains to one of ``roots`` (nothing given: no)."""
    if not roots:
        return False
    context = ValidationContext(trust_roots=list(roots), allow_fetching=False)
    return bool(validate_pdf_signature(sig, context).trusted)


def _party_problem(i: int, sig: Any, vendor: Any, vendor_roots: Sequence[Any],
                   customer_roots: Sequence[Any]) -> str:
    """Why signature ``i`` is refused for the party it stands for ("" when it is not)."""
    if i == 0:
        if _chains(sig, customer_roots):
            return ("its signer chains to the customer's root; the vendor's signature is "
                    "trusted only against the vendor's roots")
        return ""
    if i > 1 or sig.field_name != CUSTOMER_FIELD:
        return (f"only one countersignature, in the field {CUSTOMER_FIELD!r}, is accepted "
                f"after the vendor's signature (this one is in {sig.field_name!r})")
    if sig.signer_cert.public_key.dump() == vendor.signer_cert.public_key.dump():
        return "it was made with the vendor's key; only the customer countersigns"
    if _chains(sig, vendor_roots):
        return "its signer chains to the vendor's root; only the customer countersigns"
    return ""


def check_signatures(data: bytes, roots: Sequence[Any],
                     customer_roots: Sequence[Any] = ()) -> SignatureCheck:
    """Whether the report's signatures are intact, each trusted by its own party's roots
    (``roots`` the vendor's, ``customer_roots`` the customer's) and cover it. Never raises."""
    try:
        embedded = list(PdfFileReader(io.BytesIO(data), strict=False).embedded_signatures)
        if not embedded:
            return SignatureCheck(False, problem="the document carries no signature")
        embedded.sort(key=lambda sig: sig.signed_revision)
        lines, problems, unchecked = [], [], ""
        for i, sig in enumerate(embedded):
            party = "vendor signature" if i == 0 else "countersignature"
            own = roots if i == 0 else customer_roots
            context = ValidationContext(trust_roots=list(own), allow_fetching=False)
            status = validate_pdf_signature(sig, context)
            signer = status.signing_cert.subject.human_friendly
            intact = bool(status.intact and status.valid)
            whole = status.coverage == SignatureCoverageLevel.ENTIRE_FILE
            refused = _party_problem(i, sig, embedded[0], roots, customer_roots) \
                if intact else ""
            if not intact:
                problems.append(f"{party} ({signer}): the document was changed after "
                                f"signing (signature does not match)")
            elif refused:
                problems.append(f"{party} ({signer}) refused: {refused}")
            elif not status.trusted and (i == 0 or customer_roots):
                whose = "vendor's" if i == 0 else "customer's"
                problems.append(f"{party}: signer {signer!r} is not trusted by the "
                                f"given roots (the {whose})")
            elif not status.trusted:
                unchecked = (f"countersignature by {signer} is intact but not checked: no "
                             f"customer root given (--customer-trust CUSTOMER-ROOT.pem)")
            if i == len(embedded) - 1 and not whole:
                problems.append(f"{party}: an unsigned update follows it")
            elif not whole and (status.coverage != SignatureCoverageLevel.ENTIRE_REVISION
                                or status.docmdp_ok is False):
                problems.append(f"{party}: content was changed after signing")
            if not intact:
                said = "BROKEN"
            elif refused:
                said = "REFUSED"
            elif status.trusted:
                said = f"trusted ({'vendor' if i == 0 else 'customer'}'s root)"
            elif i > 0 and not customer_roots:
                said = "intact, NOT CHECKED (no customer root given)"
            else:
                said = "NOT TRUSTED"
            lines.append(f"{party} by {signer}: {said}")
        if problems:
            return SignatureCheck(False, lines, "; ".join(problems))
        return SignatureCheck(True, lines, unchecked=unchecked)
    except Exception as e:  # a verifier answers; it does not crash on hostile input
        return SignatureCheck(False, problem=f"the signature cannot be checked: "
                                             f"{type(e).__name__}: {e}")


def embedded(data: bytes) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(summary.json parsed, every embedded file by name). Raises ReportUnreadable."""
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        files: dict[str, bytes] = {}
        for name, contents in reader.attachments.items():
            if len(contents) > 1 and any(c != contents[-1] for c in contents):
                raise ReportUnreadable(f"two embedded files are named {name} with different "
                                       f"contents")
            files[name] = contents[-1]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ReportUnreadable(f"cannot read the PDF's embedded files: {e}") from e
    raw = files.get(SUMMARY_NAME)
    if raw is None:
        raise ReportUnreadable(f"the PDF embeds no {SUMMARY_NAME}: a signed PDF but not a gate "
                               f"report of the service, or one issued before reports carried "
                               f"their evidence")
    try:
        summary = json.loads(raw)
    except ValueError as e:
        raise ReportUnreadable(f"the embedded {SUMMARY_NAME} is not JSON: {e}") from e
    if not isinstance(summary, dict):
        raise ReportUnreadable(f"the embedded {SUMMARY_NAME} is not a report summary")
    return summary, files
