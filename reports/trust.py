"""Who may vouch for what in a report: the customer's registered certificates, the checks a
countersignature must pass (invisible, nothing else changed after the vendor's signature) and
a cheap look at a file's structure before any parsing or cryptography. Pure helpers of
``reports.signing``; they read pyHanko objects but never validate a signature themselves."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from asn1crypto import x509 as asn1_x509

CUSTOMER_SIGNATURE_FIELD = "CustomerSignature"


@dataclass(frozen=True)
class CustomerTrust:
    """The certificates a customer registered for one engagement: each trusts only a signature
    made with exactly that certificate, in the customer's field, after the vendor's revision."""

    name: str  # the customer organisation, as shown ("customer ACME")
    certificates: tuple[asn1_x509.Certificate, ...]


# Resolves the customer of a report from the bytes of the vendor's signed revision (which a
# trusted vendor signature vouches for); None when no customer certificate applies.
CustomerResolver = Callable[[bytes], "CustomerTrust | None"]

# A report carries the vendor's signature and at most one countersignature: a file with many
# more is refused before any of them is checked (each costs a validation).
MAX_SIGNATURES = 4
_HIDDEN, _NO_VIEW = 2, 32  # annotation flags


def pdf_structure_problem(data: bytes) -> str:
    """Why ``data`` is not worth handing to the PDF parser, "" when it looks like a PDF: the
    header, a final ``startxref`` pointing at a cross-reference section, and ``%%EOF`` at the
    end. Cheap (it reads the first and last kilobytes) so junk is refused before any parsing
    or cryptography."""
    if b"%PDF-" not in data[:1024]:
        return "not a PDF file"
    tail = data[-2048:]
    if b"%%EOF" not in tail[-1024:]:
        return "not a complete PDF file (no %%EOF marker at its end)"
    found = list(re.finditer(rb"startxref\s+(\d{1,12})\s+%%EOF", tail))
    match = found[-1] if found else None
    if match is None:
        return "not a complete PDF file (no startxref before its end)"
    offset = int(match.group(1))
    if offset >= len(data) or not re.match(rb"\s*(xref|\d+\s+\d+\s+obj)",
                                           data[offset:offset + 64]):
        return "not a well-formed PDF file (startxref does not point at a cross-reference table)"
    return ""


def widget_problem(embedded) -> str:
    """"" when the signature's widget cannot be seen (zero-size rect, hidden or no-view);
    else what it covers: a visible countersignature could paint over the report."""
    field = embedded.sig_field
    widgets = [k.get_object() for k in field.get("/Kids", ())] or [field]
    for widget in widgets:
        flags = int(widget.get("/F", 0))
        rect = [float(x) for x in widget.get("/Rect", (0, 0, 0, 0))]
        if flags & (_HIDDEN | _NO_VIEW) or len(rect) != 4:
            continue
        width, height = abs(rect[2] - rect[0]), abs(rect[3] - rect[1])
        if width > 0 and height > 0:
            return (f"the countersignature in {embedded.field_name!r} is visible (a "
                    f"{width:.0f}×{height:.0f} pt widget) and may paint over the report; only "
                    f"an invisible countersignature is accepted")
    return ""


def changes_after(embedded, level) -> str:
    """What pyHanko's difference analysis (StandardDiffPolicy) found after ``embedded``'s
    revision that a countersignature may not do; "" when only the customer's field was
    signed."""
    from pyhanko.sign.diff_analysis import DiffResult, ModificationLevel

    diff = embedded.diff_result
    if diff is None or not isinstance(diff, DiffResult):
        return f"content was changed after signing ({diff or 'unknown change'})"
    if diff.modification_level == ModificationLevel.ANNOTATIONS:
        return "annotations were added or changed after signing"
    if diff.modification_level > ModificationLevel.FORM_FILLING:
        return "content was changed after signing (other)"
    others = sorted(diff.changed_form_fields - {CUSTOMER_SIGNATURE_FIELD})
    if others:
        return ("form fields were filled or changed after signing: "
                + ", ".join(repr(f) for f in others))
    return ""
