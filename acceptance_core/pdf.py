"""The signed report as the verifier reads it: its signatures (pyHanko) and its embedded files
(pypdf). No Django: the vendor's trust roots are given (``--trust ROOT.pem``).

Trust rules (as ``reports.signing`` applies them): the first signature is the vendor's and must
chain to the given roots; every signature must be intact; the last one must cover the whole file
and any earlier one may be followed only by later signatures. A countersignature (the
customer's) is trusted when its certificate is among the given roots or chains to them; the
customer's registered certificates live in the service, so offline it is otherwise reported as
intact but not checked.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyhanko.keys import load_certs_from_pemder
from pyhanko.pdf_utils.reader import PdfFileReader
from pyhanko.sign.validation import SignatureCoverageLevel, validate_pdf_signature
from pyhanko_certvalidator import ValidationContext
from pypdf import PdfReader
from pypdf.errors import PyPdfError

SUMMARY_NAME = "summary.json"


class ReportUnreadable(Exception):
    """The file is not a report the verifier can read; the message says why."""


@dataclass(frozen=True)
class SignatureCheck:
    ok: bool
    lines: list[str] = field(default_factory=list)
    problem: str = ""


def load_roots(paths: Sequence[str]) -> list[Any]:
    """Certificates from PEM/DER files. Raises ReportUnreadable naming the file."""
    roots = []
    for path in paths:
        try:
            roots.extend(load_certs_from_pemder([path]))  # type: ignore[no-untyped-call]
        except (OSError, ValueError) as e:
            raise ReportUnreadable(f"cannot load trust root {path}: {e}") from e
    return roots


def check_signatures(data: bytes, roots: Sequence[Any]) -> SignatureCheck:
    """Whether the report's signatures are intact, trusted and cover it. Never raises."""
    try:
        embedded = list(PdfFileReader(io.BytesIO(data), strict=False).embedded_signatures)
        if not embedded:
            return SignatureCheck(False, problem="the document carries no signature")
        embedded.sort(key=lambda sig: sig.signed_revision)
        lines, problems = [], []
        for i, sig in enumerate(embedded):
            party = "vendor" if i == 0 else "countersignature"
            context = ValidationContext(trust_roots=list(roots), allow_fetching=False)
            status = validate_pdf_signature(sig, context)
            signer = status.signing_cert.subject.human_friendly
            intact = bool(status.intact and status.valid)
            whole = status.coverage == SignatureCoverageLevel.ENTIRE_FILE
            if not intact:
                problems.append(f"{party} signature ({signer}): the document was changed after "
                                f"signing (signature does not match)")
            elif not status.trusted and i == 0:
                problems.append(f"{party} signature: signer {signer!r} is not trusted by the "
                                f"given roots")
            if i == len(embedded) - 1 and not whole:
                problems.append(f"{party} signature: an unsigned update follows it")
            elif not whole and (status.coverage != SignatureCoverageLevel.ENTIRE_REVISION
                                or status.docmdp_ok is False):
                problems.append(f"{party} signature: content was changed after signing")
            trusted = "trusted" if status.trusted else "intact, its signer not checked offline"
            lines.append(f"{party} signature by {signer}: "
                         f"{trusted if intact else 'BROKEN'}")
        if problems:
            return SignatureCheck(False, lines, "; ".join(problems))
        return SignatureCheck(True, lines)
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
        raise ReportUnreadable(f"the report embeds no {SUMMARY_NAME}: it was issued before "
                               f"reports carried their evidence")
    try:
        summary = json.loads(raw)
    except ValueError as e:
        raise ReportUnreadable(f"the embedded {SUMMARY_NAME} is not JSON: {e}") from e
    if not isinstance(summary, dict):
        raise ReportUnreadable(f"the embedded {SUMMARY_NAME} is not a report summary")
    return summary, files
