"""Forms of the engagement pages: a reason for what is recorded in the audit trail, a
criterion's threshold(s), a new engagement with its arrays, a gate's due date, and the bill of
materials (an item, a CSV file)."""

from __future__ import annotations

import copy

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from acceptance.bom import CSV_MAX_BYTES, BomLineData, bom_line_check
from acceptance.models import (
    DEFAULT_REFERENCE_PROFILE,
    REFERENCE_PROFILES,
    Array,
    Engagement,
    Organisation,
)
from gates.models import Criterion
from gates.services import EDITABLE_BY_OPERATOR

REASON_MAX = 2000


class ReasonForm(forms.Form):
    """Re-opening an engagement or accepting a review: the reason goes into the audit trail."""

    reason = forms.CharField(
        label=_("Reason"), max_length=REASON_MAX, strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": _("Give a reason: it is recorded in the audit trail.")},
        help_text=_("Recorded in the audit trail with your name and the time."),
    )


FIELD_LABELS = {
    ("threshold", ">="): _("At least"),
    ("threshold", "<="): _("At most"),
    ("threshold", "between"): _("Low end (below it fails)"),
    ("threshold_high", "between"): _("High end (above it is outside the range)"),
    ("reference_value", "within"): _("Reference value"),
    ("tolerance", "within"): _("Tolerance as a ratio (0.1 = ±10 %)"),
}


def _unit_help(unit: str, field: str) -> str:
    if field == "tolerance" or unit == "ratio":
        return str(_("a ratio: 0.83 means 83 %"))
    if unit == "1":
        return str(_("a count"))
    return str(_("in %(unit)s") % {"unit": unit})


def _plain(value: float | None) -> str:
    """24.0 → "24", 0.83 → "0.83": the figure as a person would type it."""
    return "" if value is None else f"{value:.12g}"


class CriterionThresholdForm(forms.Form):
    """The editable figures of one criterion (those of its operator) and the reason."""

    def __init__(self, *args, criterion: Criterion, **kwargs):
        super().__init__(*args, **kwargs)
        self.criterion = criterion
        self.editable = EDITABLE_BY_OPERATOR[criterion.operator]
        for name in self.editable:
            self.fields[name] = forms.FloatField(
                label=FIELD_LABELS[(name, criterion.operator)],
                initial=_plain(getattr(criterion, name)),
                help_text=_unit_help(criterion.unit, name),
                error_messages={"invalid": _("Enter a number, e.g. 24 or 0.83."),
                                "required": _("Enter a number.")},
                widget=forms.TextInput(attrs={"inputmode": "decimal", "size": 12}),
            )
        self.fields["reason"] = copy.deepcopy(ReasonForm.base_fields["reason"])

    def clean(self):
        cleaned = super().clean()
        values = {name: cleaned.get(name) for name in self.editable}
        if any(v is None for v in values.values()):
            return cleaned  # the field's own error says what is wrong
        proposed = copy.copy(self.criterion)  # the model's rule judges the new values
        for name, value in values.items():
            setattr(proposed, name, value)
        try:
            proposed.clean()
        except ValidationError as error:
            for name, messages in error.message_dict.items():
                self.add_error(name if name in self.fields else None, messages)
        current = {name: getattr(self.criterion, name) for name in self.editable}
        if not self.errors and values == current:
            raise forms.ValidationError(
                _("Nothing changed: these are the current values."), code="unchanged")
        return cleaned

    def values(self) -> dict[str, float]:
        return {name: self.cleaned_data[name] for name in self.editable}


# --- A new engagement, its arrays, a gate's due date -------------------------------------------

class EngagementCreateForm(forms.Form):
    """A new engagement: the customer organisation is chosen from the list or named new."""

    name = forms.CharField(
        label=pgettext_lazy("the name of a thing, not a person", "Name"), max_length=63,
        help_text=_("Letters, digits, '.', '_' or '-', e.g. acme-prod: it names the engagement "
                    "in links, reports and commands."))
    organisation = forms.ModelChoiceField(
        label=_("Customer organisation"), required=False,
        queryset=Organisation.objects.order_by("name"),
        empty_label=_("— a new organisation (name it below) —"))
    new_organisation = forms.CharField(
        label=_("New organisation"), max_length=200, required=False,
        help_text=_("Only when the organisation is not in the list."))
    start_date = forms.DateField(
        label=_("Start date"), initial=timezone.localdate,  # today, which most engagements take
        # the ISO date an <input type="date"> reads in every language ("2026/12/04" it drops)
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        help_text=_("The gates are due at the end of weeks 2, 4, 7 and 10 from this day."),
        error_messages={"invalid": _("Enter a date as YYYY-MM-DD.")})
    report_language = forms.ChoiceField(label=_("Report language"),
                                        choices=Engagement.Language.choices)
    reference_profile = forms.ChoiceField(
        label=_("Reference profile"), choices=list(REFERENCE_PROFILES.items()),
        initial=DEFAULT_REFERENCE_PROFILE,  # not the list's first (R1 lacks G2's figures)
        help_text=_("The reference figures its G2 and G3 results are compared with."))

    def clean(self):
        cleaned = super().clean()
        chosen, new = cleaned.get("organisation"), (cleaned.get("new_organisation") or "").strip()
        if chosen and new:
            self.add_error("new_organisation",
                           _("Choose an organisation from the list or name a new one, not both."))
        elif not chosen and not new and "organisation" not in self.errors:
            self.add_error("organisation",
                           _("Choose the customer organisation or name a new one."))
        return cleaned

    def customer(self) -> str:
        chosen = self.cleaned_data.get("organisation")
        return chosen.name if chosen else self.cleaned_data["new_organisation"].strip()


ARRAY_FORM_FIELDS = ["model", "serial", "expected_drive_count", "drive_model", "link_speed_mbps",
                     "layout"]


class ArrayForm(forms.ModelForm):
    """One array of a new engagement; a row left as it was is not an array."""

    class Meta:
        model = Array
        fields = ARRAY_FORM_FIELDS
        labels = {"model": _("Array model"), "serial": _("Serial number"),
                  "expected_drive_count": _("Drives expected"),
                  "drive_model": _("Drive model"),
                  "link_speed_mbps": _("Link speed (Mb/s)"), "layout": _("Layout")}
        help_texts = {"link_speed_mbps": _("Per port: 100 GbE = 100000."),
                      "drive_model": _("As nvme list prints it (its Model column); G1 counts "
                                       "only drives of this model. Empty: the model most of "
                                       "the controller's drives report."),
                      "layout": _("RAID0 has no redundancy: the G4 drive fault would lose "
                                  "data.")}


class ArrayFormSetBase(forms.BaseFormSet):
    def clean(self):
        serials: dict[str, int] = {}
        for number, form in enumerate(self.forms, start=1):
            serial = form.cleaned_data.get("serial") if form.has_changed() else None
            if not serial:
                continue
            if serial in serials:
                form.add_error("serial", _("Array %(other)d has this serial already.") % {
                    "other": serials[serial]})
            serials.setdefault(serial, number)

    def arrays(self) -> list[dict]:
        return [{f: form.cleaned_data[f] for f in ARRAY_FORM_FIELDS}
                for form in self.forms if form.has_changed()]


ArrayFormSet = forms.formset_factory(ArrayForm, formset=ArrayFormSetBase, extra=3, max_num=32,
                                     validate_max=True)


def form_errors_add(form: forms.Form, error: ValidationError, fields: dict[str, str]) -> None:
    """A service's ValidationError onto ``form``: ``fields`` maps its keys to the form's field
    names; other keys become non-field errors that name them."""
    for key, messages in error.message_dict.items():
        target = fields.get(key)
        if target in form.fields:
            form.add_error(target, messages)
        else:
            form.add_error(None, [f"{key}: {m}" for m in messages])


class DueDateForm(forms.Form):
    due_date = forms.DateField(label=_("New due date"),
                               widget=forms.DateInput(attrs={"type": "date"}),
                               error_messages={"invalid": _("Enter a date as YYYY-MM-DD.")})
    reason = copy.deepcopy(ReasonForm.base_fields["reason"])


class ReferenceProfileForm(forms.Form):
    profile = forms.ChoiceField(label=_("Reference profile"),
                                choices=list(REFERENCE_PROFILES.items()))
    reason = copy.deepcopy(ReasonForm.base_fields["reason"])


# --- The bill of materials ----------------------------------------------------------------------

class BomItemForm(forms.Form):
    """One bill-of-materials item (``acceptance.bom.bom_line_check`` checks it)."""

    description = forms.CharField(label=_("Item"), max_length=300)
    quantity = forms.IntegerField(label=_("Quantity"), min_value=1, initial=1,
                                  widget=forms.NumberInput(attrs={"size": 6}))
    part_number = forms.CharField(label=_("Part number"), max_length=100, required=False)
    serials = forms.CharField(label=_("Serial numbers"), required=False, max_length=5000,
                              help_text=_("Separated by spaces; at most one per unit."))

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            self.line = bom_line_check(**{f: cleaned.get(f, "") for f in
                                          ("description", "quantity", "part_number",
                                           "serials")})
        except ValidationError as error:
            for field, messages in error.message_dict.items():
                self.add_error(field, messages)
        return cleaned

    def bom_line(self) -> BomLineData:
        return self.line


class BomItemEditForm(BomItemForm):
    reason = copy.deepcopy(ReasonForm.base_fields["reason"])


class BomUploadForm(forms.Form):
    file = forms.FileField(
        label=_("CSV file"), allow_empty_file=True,  # the parser says what an empty one lacks
        help_text=_("A header line with the columns description, quantity, part number, "
                    "serials, then one line per item. A bad line refuses the whole file."),
        error_messages={"required": _("Choose a CSV file.")})

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > CSV_MAX_BYTES:
            raise ValidationError(_("The file has %(size)d bytes; at most %(max)d.") % {
                "size": upload.size, "max": CSV_MAX_BYTES})
        return upload
