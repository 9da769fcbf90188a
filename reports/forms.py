"""The form of the verification page."""

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _


def max_verify_bytes() -> int:
    """The largest PDF checked or stored (setting REPORT_VERIFY_MAX_BYTES, default 20 MB: a
    gate report is a few hundred KB)."""
    return settings.REPORT_VERIFY_MAX_BYTES


def too_large_message() -> str:
    return str(_("The file is larger than %(mb)d MB; a gate report is far smaller. Nothing was "
                 "checked.") % {"mb": max_verify_bytes() // (1024 * 1024)})


class VerifyForm(forms.Form):
    pdf = forms.FileField(
        label=_("Signed report (PDF)"),
        widget=forms.ClearableFileInput(attrs={"accept": ".pdf,application/pdf"}),
        error_messages={"required": _("Choose a PDF file to check."),
                        "empty": _("The file is empty.")},
    )

    def __init__(self, *args, too_large: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.too_large = too_large  # the upload was dropped on arrival (views.SizeLimitHandler)

    def clean(self):
        cleaned = super().clean()
        if self.too_large:
            self._errors.pop("pdf", None)  # "choose a file": it was dropped, say why instead
            self.add_error("pdf", too_large_message())
        return cleaned

    def clean_pdf(self):
        upload = self.cleaned_data["pdf"]
        if upload.size > max_verify_bytes():
            raise forms.ValidationError(too_large_message())
        return upload


class SignOffForm(forms.Form):
    comment = forms.CharField(
        label=_("Comment"), required=False, max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("Optional; printed on the sign-off page of the report."))


MAX_CERTIFICATE_BYTES = 64 * 1024


class CertificateForm(forms.Form):
    certificate = forms.FileField(
        label=_("Your public certificate (PEM or DER)"),
        help_text=_("Only the certificate: never upload a private key or a PKCS#12 file."),
        error_messages={"required": _("Choose a certificate file."),
                        "empty": _("The file is empty.")})

    def clean_certificate(self):
        upload = self.cleaned_data["certificate"]
        if upload.size > MAX_CERTIFICATE_BYTES:
            raise forms.ValidationError(_("A certificate is a few kilobytes; this file is larger "
                                          "than 64 KB."))
        return upload


class CountersignedForm(forms.Form):
    pdf = forms.FileField(
        label=_("Countersigned report (PDF)"),
        help_text=_("The report as downloaded from here, with your signature added as an "
                    "incremental update (e.g. manage.py countersign_report)."),
        error_messages={"required": _("Choose a PDF file."), "empty": _("The file is empty.")})

    def clean_pdf(self):
        upload = self.cleaned_data["pdf"]
        if upload.size > max_verify_bytes():
            raise forms.ValidationError(too_large_message())
        return upload
