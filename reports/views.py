"""Report pages: download a signed report (whoever may see its engagement) and verify an
uploaded PDF (any logged-in user)."""

from __future__ import annotations

import hashlib
from datetime import UTC
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import FileResponse, Http404
from django.shortcuts import render
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods

from acceptance.pages import gate_title
from acceptance.permissions import engagements_for
from reports import forms
from reports.models import Report
from reports.signing import verify_pdf


def _visible_reports(user):
    return Report.objects.filter(decision__gate__engagement__in=engagements_for(user))


@login_required
@require_GET
def report_download(request, report_id: int):
    """The signed PDF as stored; 404 when the user may not see its engagement (or it is gone)."""
    report = _visible_reports(request.user).filter(pk=report_id).first()
    if report is None:
        raise Http404("no such report")
    path = Path(report.path)
    if path.suffix.lower() != ".pdf":
        raise Http404("no such report")
    try:
        handle = path.open("rb")
    except OSError:
        raise Http404("the report's file is missing") from None
    return FileResponse(handle, as_attachment=True, filename=path.name,
                        content_type="application/pdf")


class SizeLimitHandler(FileUploadHandler):
    """Drops an upload larger than ``forms.MAX_VERIFY_BYTES`` as it arrives instead of storing
    it; the view then says so. (The form checks the size again.)"""

    def __init__(self, request=None):
        super().__init__(request)
        self.too_large = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        # A little room for the other fields and the multipart framing.
        self.too_large = content_length > forms.MAX_VERIFY_BYTES + 64 * 1024

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        if self.too_large:
            raise SkipFile

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > forms.MAX_VERIFY_BYTES:
            self.too_large = True
            raise SkipFile
        return raw_data

    def file_complete(self, file_size):
        return None


def _result_words(result) -> tuple[str, str]:
    """(verdict class, the verdict in one plain sentence)."""
    if result.valid:
        return "pass", _("Genuine: the signature is intact, the signer is trusted and the "
                         "signature covers the whole document.")
    if result.intact and not result.trusted:
        return "review", _("The document is unchanged since it was signed, but the signer is "
                           "not one this service trusts. Do not rely on it.")
    if result.signer:
        return "fail", _("Not valid: the document was changed after it was signed, or the "
                         "signature does not cover all of it. Do not rely on it.")
    return "fail", _("Not valid: no signature this service can check.")


def _yes_no(value: bool) -> str:
    return _("yes") if value else _("no")


@csrf_exempt  # the size limit must be in place before the CSRF check reads the body
@login_required
@require_http_methods(["GET", "POST"])
def report_verify(request):
    limit = SizeLimitHandler(request)
    request.upload_handlers.insert(0, limit)
    return _report_verify(request, limit)


@csrf_protect
def _report_verify(request, limit: SizeLimitHandler):
    form = forms.VerifyForm()
    result = None
    status = 200
    if request.method == "POST":
        form = forms.VerifyForm(request.POST, request.FILES, too_large=limit.too_large)
        if not form.is_valid():
            status = 413 if limit.too_large else 200
        else:
            data = form.cleaned_data["pdf"].read()
            result = _verification(request, data, form.cleaned_data["pdf"].name)
    return render(request, "reports/verify.html", {"form": form, "result": result},
                  status=status)


def _verification(request, data: bytes, filename: str) -> dict:
    result = verify_pdf(data)
    verdict, words = _result_words(result)
    sha256 = hashlib.sha256(data).hexdigest()
    known = (_visible_reports(request.user).select_related("decision__gate__engagement")
             .filter(sha256=sha256).first())
    return {
        "filename": filename, "verdict": verdict, "words": words,
        "valid": _yes_no(result.valid), "intact": _yes_no(result.intact),
        "trusted": _yes_no(result.trusted), "signer": result.signer or "—",
        "signed_at": date_format(result.signed_at.astimezone(UTC), "Y-m-d H:i:s") + " UTC"
        if result.signed_at else "—",
        "summary": result.summary, "sha256": sha256,
        "known": _("This is the %(gate)s report of %(name)s issued here on %(date)s.") % {
            "gate": gate_title(known.decision.gate), "name": known.decision.gate.engagement.name,
            "date": date_format(known.signed_at, "Y-m-d")} if known else "",
    }
