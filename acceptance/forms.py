"""Forms of the engagement pages: a reason for what is recorded in the audit trail, and a
criterion's threshold(s)."""

from __future__ import annotations

import copy

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

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
