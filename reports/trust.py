"""Who may vouch for what in a report: the customer's registered certificates, the checks a
countersignature must pass (invisible, nothing else changed after the vendor's signature) and
a cheap look at a file's structure before any parsing or cryptography. Pure helpers of
``reports.signing``; they read pyHanko objects but never validate a signature themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from asn1crypto import x509 as asn1_x509

from acceptance_core.pdf import structure_problem

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
    """Why ``data`` is not worth handing to the PDF parser, "" when it looks like a PDF (the
    verifier's cheap look, ``acceptance_core.pdf.structure_problem``: the same words in the
    service and on an auditor's laptop)."""
    return structure_problem(data)


# A countersignature whose customer has no registered certificate is neither trusted nor
# refused: it cannot be checked, and the report is then not valid (said so, in these words).
NOT_CHECKABLE = "cannot be checked: "


def countersignature_refusal(sig, index: int, vendor_sig, vendor_genuine: bool,
                             trust: CustomerTrust | None) -> str:
    """Why countersignature ``index`` (≥ 1) is not checked against the customer's registered
    certificates: another field or a second one, the vendor's signature before it not genuine,
    made with the vendor's key (refused whatever the customer registered), no customer
    certificate to check it with (``NOT_CHECKABLE``…), or visible; "" when it may be."""
    if sig.field_name != CUSTOMER_SIGNATURE_FIELD or index != 1:
        return (f"only one countersignature, in the field {CUSTOMER_SIGNATURE_FIELD!r}, "
                f"is accepted after the vendor's signature")
    if not vendor_genuine:
        return "the vendor's signature before it is not genuine"
    if sig.signer_cert.public_key.dump() == vendor_sig.signer_cert.public_key.dump():
        return "it was made with the vendor's key; only the customer countersigns"
    if trust is None or not trust.certificates:
        return NOT_CHECKABLE + "no customer certificate is registered for this report's engagement"
    return widget_problem(sig)


def revision_bytes(data: bytes, embedded) -> bytes:
    """The file as it was when ``embedded`` was signed (its byte range ends its revision)."""
    start, first, second, length = (int(x) for x in embedded.byte_range)
    return data[:second + length]


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


def _pages(root) -> list:
    found, stack = [], [root["/Pages"]]
    while stack and len(found) < 10_000:
        node = stack.pop().get_object()
        if "/Kids" in node:
            stack.extend(reversed(list(node["/Kids"])))
        else:
            found.append(node)
    return found


def _refs(array) -> dict:
    return {getattr(x, "idnum", id(x)): x for x in (array.get_object() if array else ())}


def _contents(page) -> bytes:
    contents = page.get("/Contents")
    if contents is None:
        return b""
    contents = contents.get_object()
    streams = contents if isinstance(contents, list) else [contents]
    return b"".join(s.get_object().data for s in streams)


def _fields(root) -> dict[str, object]:
    form = root.get("/AcroForm")
    found = {}
    for ref in (form.get_object().get("/Fields", ()) if form else ()):
        field = ref.get_object()
        found[str(field.get("/T", "?"))] = field.get("/V")
    return found


def named_changes(before: bytes, after) -> list[str]:
    """What a person would call the changes from the file ``before`` (the vendor's signed
    revision) to the reader ``after`` (the whole file): pages, their content and annotations,
    form fields. The countersignature's own field and widget are left out (checked by
    ``widget_problem``). Best effort: [] when the files cannot be compared."""
    from io import BytesIO

    from pyhanko.pdf_utils.reader import PdfFileReader

    try:
        old_root = PdfFileReader(BytesIO(before), strict=False).root
        old_pages, new_pages = _pages(old_root), _pages(after.root)
        changes = []
        if len(old_pages) != len(new_pages):
            changes.append(f"the page count changed from {len(old_pages)} to {len(new_pages)}")
        for n, (old, new) in enumerate(zip(old_pages, new_pages, strict=False), start=1):
            if _contents(old) != _contents(new):
                changes.append(f"the content of page {n} was changed")
            added = _refs(new.get("/Annots"))
            for idnum in set(added) - set(_refs(old.get("/Annots"))):
                annot = added[idnum].get_object()
                kind = str(annot.get("/Subtype", "?")).lstrip("/")
                if kind == "Widget" and str(annot.get("/T", "")) == CUSTOMER_SIGNATURE_FIELD:
                    continue
                changes.append(f"a {kind} annotation was added on page {n}")
        old_fields, new_fields = _fields(old_root), _fields(after.root)
        for name, value in new_fields.items():
            if name == CUSTOMER_SIGNATURE_FIELD:
                continue
            if name not in old_fields:
                changes.append(f"form field {name!r} was added")
            elif value != old_fields[name]:
                changes.append(f"form field {name!r} was filled or changed")
        return changes
    except Exception:  # naming is a courtesy; the verdict comes from pyHanko's analysis
        return []
