"""Forms of the evidence pages."""

from django import forms

from runners.evidence import MAX_BUNDLE_BYTES


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class BundleField(forms.FileField):
    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        cleaned = [super(BundleField, self).clean(f, initial) for f in files if f]
        if not cleaned:
            raise forms.ValidationError("choose at least one evidence bundle (.tar.gz)")
        for f in cleaned:
            if f.size > MAX_BUNDLE_BYTES:
                raise forms.ValidationError(
                    f"{f.name} is larger than {MAX_BUNDLE_BYTES >> 20} MiB")
        return cleaned


class EvidenceUploadForm(forms.Form):
    bundles = BundleField(widget=MultipleFileInput(attrs={"accept": ".tar.gz,.tgz"}),
                          help_text="One bundle per node, as written by the collection script")
