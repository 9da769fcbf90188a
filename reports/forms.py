"""The form of the verification page."""

from django import forms
from django.utils.translation import gettext_lazy as _

MAX_VERIFY_BYTES = 50 * 1024 * 1024  # 50 MB: a gate report is a few hundred KB


def too_large_message() -> str:
    return str(_("The file is larger than %(mb)d MB; a gate report is far smaller. Nothing was "
                 "checked.") % {"mb": MAX_VERIFY_BYTES // (1024 * 1024)})


class VerifyForm(forms.Form):
    pdf = forms.FileField(
        label=_("Signed report (PDF)"),
        widget=forms.ClearableFileInput(attrs={"accept": ".pdf,application/pdf"}),
        help_text=_("Up to 50 MB."),
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
        if upload.size > MAX_VERIFY_BYTES:
            raise forms.ValidationError(too_large_message())
        return upload
