"""Report pages: download a signed report (whoever may see its engagement; logged), verify an
uploaded PDF (any logged-in user), an engagement's reports with their versions and sign-offs,
and the actions on them: sign off (the vendor's project manager, a customer of the engagement's
organisation), issue the final report (project managers), upload the customer's certificate and
a countersigned copy (customers of the engagement's organisation only: the customer alone names
the trust anchor of their signature and countersigns).

Every view finds its object through ``engagements_for(user)`` (404 when not visible) before it
checks the role (403)."""

from __future__ import annotations

import hashlib
from datetime import UTC
from pathlib import Path

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.api.throttles import upload_refused
from acceptance.pages.words import gate_title
from acceptance.permissions import Role, engagement_for, engagements_for, has_role
from reports import forms, services
from reports.models import Report, SignOff
from reports.pages import report_page
from reports.redecision import report_redecide as redecision_of


def _visible_reports(user):
    return Report.objects.filter(engagement__in=engagements_for(user))


def _visible_report(user, report_id: int) -> Report:
    report = (_visible_reports(user).select_related("engagement__customer", "about__gate")
              .filter(pk=report_id).first())
    if report is None:
        raise Http404("no such report")
    return report


def _page_url(engagement_name: str) -> str:
    return reverse("engagement-reports", args=[engagement_name])


@login_required
@require_GET
def report_download(request, report_id: int):
    """The signed PDF as stored; 404 when the user may not see its engagement (or it is gone)."""
    report = _visible_report(request.user, report_id)
    path = Path(report.path)
    if path.suffix.lower() != ".pdf":
        raise Http404("no such report")
    try:
        handle = path.open("rb")
    except OSError:
        raise Http404("the report's file is missing") from None
    services.download_record(report=report, user=request.user, via="web")
    return FileResponse(handle, as_attachment=True, filename=path.name,
                        content_type="application/pdf")


class SizeLimitHandler(FileUploadHandler):
    """Drops an upload larger than ``forms.max_verify_bytes()`` as it arrives instead of storing
    it; the view then says so. (The form checks the size again.)"""

    def __init__(self, request=None):
        super().__init__(request)
        self.too_large = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        # A little room for the other fields and the multipart framing.
        self.too_large = content_length > forms.max_verify_bytes() + 64 * 1024

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        if self.too_large:
            raise SkipFile

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > forms.max_verify_bytes():
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
    result = redecision = None
    status = 200
    if request.method == "POST":
        if refused := upload_refused(request):
            return refused
        form = forms.VerifyForm(request.POST, request.FILES, too_large=limit.too_large)
        if not form.is_valid():
            status = 413 if limit.too_large else 200
        else:
            data = form.cleaned_data["pdf"].read()
            result = _verification(request, data, form.cleaned_data["pdf"].name)
            if request.POST.get("redecide"):
                redecision = redecision_of(data=data)
    return render(request, "reports/verify.html",
                  {"form": form, "result": result, "redecision": redecision}, status=status)


@login_required
@require_GET
def report_redecide(request, report_id: int):
    """"Re-decide from the evidence" for a stored report: its signature checked, every criterion
    decided again from its embedded raw outputs (``reports.redecision``); 404 when the user may
    not see its engagement or the file is gone."""
    report = _visible_report(request.user, report_id)
    try:
        data = Path(report.path).read_bytes()
    except OSError:
        raise Http404("the report's file is missing") from None
    return render(request, "reports/redecide.html", {
        "report": report, "redecision": redecision_of(data=data),
        "reports_url": _page_url(report.engagement.name)})


def _verification(request, data: bytes, filename: str) -> dict:
    # Each signature against its own party only, as ``verify_report`` does: never the
    # visitor's customer certificates for the vendor's signature.
    result = services.report_verify(data=data)
    verdict, words = _result_words(result)
    sha256 = hashlib.sha256(data).hexdigest()
    known = (_visible_reports(request.user).select_related("decision__gate__engagement")
             .filter(sha256=sha256).first())
    # A file with no signature has nothing to be unchanged since, trusted or modified after:
    # "no" there would read as a judgement of a signature that is not there.
    unsigned = _("— (no signature)") if not result.signatures else ""
    return {
        "filename": filename, "verdict": verdict, "words": words,
        "valid": _yes_no(result.valid), "intact": unsigned or _yes_no(result.intact),
        "trusted": unsigned or _trust_words(result.intact, result.trusted),
        "signer": result.signer or "—",
        "signed_at": date_format(result.signed_at.astimezone(UTC), "Y-m-d H:i:s") + " UTC"
        if result.signed_at else "—",
        "summary": result.summary, "sha256": sha256,
        "signatures": [{
            "field": sig.field, "signer": sig.signer,
            "signed_at": date_format(sig.signed_at.astimezone(UTC), "Y-m-d H:i:s") + " UTC"
            if sig.signed_at else "—",
            "timestamp": date_format(sig.timestamp.astimezone(UTC), "Y-m-d H:i:s") + " UTC"
            if sig.timestamp else "", "intact": _yes_no(sig.intact),
            "trusted": _trust_words(sig.intact, sig.trusted),
            "party": _party_words(sig.party) if sig.intact else _("not judged"),
            "coverage": _("the whole document") if sig.whole_file else sig.later_changes,
        } for sig in result.signatures],
        "modified": unsigned or _yes_no(result.modified_after_signing),
        "evidence": result.evidence.summary if result.evidence is not None else "",
        "evidence_ok": bool(result.evidence is not None and result.evidence.ok),
        # a genuine file can still be a lab demonstration: said beside "Genuine", never hidden
        "simulated": bool(result.evidence is not None
                          and getattr(result.evidence, "simulated", False)),
        "known": _known_text(known) if known else "",
    }


def _trust_words(intact: bool, trusted: bool) -> str:
    """A broken signature's chain is not judged (pyHanko does not): "no" read as if the
    signer were a stranger when only the file was changed."""
    if not intact:
        return _("not judged: the signature does not match the file")
    return _yes_no(trusted)


def _party_words(party: str) -> str:
    if party == "vendor":
        return _("the vendor (this service)")
    if party.startswith("customer "):
        return _("the customer %(org)s") % {"org": party.removeprefix("customer ")}
    return _("untrusted")


def _known_text(report: Report) -> str:
    date = date_format(report.signed_at, "Y-m-d")
    if report.kind == Report.Kind.FINAL:
        text = _("This is the final acceptance report of %(name)s issued here on %(date)s.") % {
            "name": report.engagement.name, "date": date}
    else:
        text = _("This is the %(gate)s report of %(name)s issued here on %(date)s.") % {
            "gate": gate_title(report.about.gate), "name": report.engagement.name,
            "date": date}
    return f"{text} " + _("Version %(v)s") % {"v": report.version}


# --- an engagement's reports, sign-off and countersignature ----------------------------------


@login_required
@require_GET
def engagement_reports(request, name: str):
    """Every report version of the engagement, sign-offs, and the visitor's actions."""
    engagement = engagement_for(request.user, name)
    return _render_page(request, engagement)


def _render_page(request, engagement, *, status: int = 200, **forms_):
    context = report_page(engagement, request.user)
    context["signoff_form"] = forms_.get("signoff_form") or forms.SignOffForm()
    context["certificate_form"] = forms_.get("certificate_form") or forms.CertificateForm()
    context["countersigned_form"] = (forms_.get("countersigned_form")
                                     or forms.CountersignedForm())
    return render(request, "reports/engagement_reports.html", context, status=status)


@login_required
@require_POST
def report_signoff(request, report_id: int):
    """Approve the decision of the report's series as the visitor's party."""
    report = _visible_report(request.user, report_id)
    if services.signoff_party(request.user, report.engagement) is None:
        raise PermissionDenied("only the vendor's project manager or a customer of this "
                               "engagement's organisation may sign off")
    form = forms.SignOffForm(request.POST)
    if not form.is_valid():
        return _render_page(request, report.engagement, signoff_form=form)
    try:
        signoff, new = services.signoff_record(report=report, user=request.user,
                                               comment=form.cleaned_data["comment"])
    except services.ReportRefused as refusal:
        messages.error(request, str(refusal))
    else:
        party = SignOff.Party(signoff.party).label
        if new is not None:
            messages.success(request, _("Signed off as %(party)s. Both parties have approved: "
                                        "version %(v)s with the sign-off page filled was "
                                        "issued.") % {"party": party, "v": new.version})
        else:
            messages.success(request, _("Signed off as %(party)s; the other party's approval "
                                        "is awaited.") % {"party": party})
    return redirect(_page_url(report.engagement.name))


@login_required
@require_POST
def report_final(request, name: str):
    """Issue (or re-issue) the final acceptance report: project managers."""
    engagement = engagement_for(request.user, name)
    if not has_role(request.user, Role.PROJECT_MANAGER):
        raise PermissionDenied("only a project manager may issue the final report")
    try:
        report = services.final_report_issue(engagement=engagement,
                                             issued_by=request.user.get_username())
    except services.ReportRefused as refusal:
        messages.error(request, str(refusal))
    else:
        messages.success(request, _("Final acceptance report version %(v)s issued.")
                         % {"v": report.version})
    return redirect(_page_url(name))


def _may_countersign(user, engagement) -> bool:
    # Only the customer: whoever registers the anchor and uploads the copy could otherwise
    # forge "the customer's" countersignature.
    return services.signoff_party(user, engagement) == SignOff.Party.CUSTOMER


@login_required
@require_POST
def report_certificate(request, name: str):
    """Register the customer's public certificate as the trust anchor of their signatures."""
    engagement = engagement_for(request.user, name)
    if not _may_countersign(request.user, engagement):
        raise PermissionDenied("only the customer of this engagement may register the "
                               "customer's certificate")
    form = forms.CertificateForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            entry = services.customer_certificate_add(
                engagement=engagement, pem=form.cleaned_data["certificate"].read(),
                uploaded_by=request.user.get_username())
        except services.ReportRefused as refusal:
            form.add_error("certificate", str(refusal))
        else:
            messages.success(request, _("Certificate registered: %(subject)s.")
                             % {"subject": entry.subject})
            return redirect(_page_url(name))
    return _render_page(request, engagement, certificate_form=form)


@login_required
@require_POST
def report_countersigned(request, report_id: int):
    """Store the customer's countersigned copy of the latest version as a new version."""
    report = _visible_report(request.user, report_id)
    if not _may_countersign(request.user, report.engagement):
        raise PermissionDenied("only the customer of this engagement may upload a "
                               "countersigned report")
    if refused := upload_refused(request):
        return refused
    form = forms.CountersignedForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            new = services.countersigned_store(report=report, data=form.cleaned_data["pdf"].read(),
                                               uploaded_by=request.user.get_username())
        except services.ReportRefused as refusal:
            form.add_error("pdf", str(refusal))
        else:
            messages.success(request, _("Countersigned copy stored as version %(v)s.")
                             % {"v": new.version})
            return redirect(_page_url(report.engagement.name))
    return _render_page(request, report.engagement, countersigned_form=form)
