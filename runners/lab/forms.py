"""The lab page's form: which scenario, how many inference nodes."""

from __future__ import annotations

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.translation import gettext_lazy as _

from runners.lab.services import MAX_NODES, scenario_names


class LabForm(forms.Form):
    scenario = forms.ChoiceField(label=_("Scenario"), choices=(), initial="healthy")
    nodes = forms.IntegerField(
        label=_("Inference nodes"), initial=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_NODES)])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["nodes"].help_text = _(
            "Each is its own sshd on 127.0.0.1 with its own host key (1 … %(max)s)"
        ) % {"max": MAX_NODES}
        self.fields["scenario"].choices = [(name, name) for name in scenario_names()]
