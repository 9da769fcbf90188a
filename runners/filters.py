"""The filters of an engagement's "Runs" list (django-filter): gate, state, who started it, and
when (started on or after / on or before a day). Choices come from the engagement's own gates
and runs, so an unknown value is refused by the form, naming the field."""

from __future__ import annotations

import django_filters
from django.utils.translation import gettext_lazy as _

from acceptance.models import Engagement
from runners.models import GateRun


class GateRunFilter(django_filters.FilterSet):
    gate = django_filters.ChoiceFilter(field_name="gate__code", label=_("Gate"))
    state = django_filters.ChoiceFilter(choices=GateRun.State.choices, label=_("State"))
    started_by = django_filters.ChoiceFilter(label=_("Started by"))
    started_after = django_filters.DateFilter(field_name="created_at", lookup_expr="date__gte",
                                              label=_("Started on or after"))
    started_before = django_filters.DateFilter(field_name="created_at", lookup_expr="date__lte",
                                               label=_("Started on or before"))

    class Meta:
        model = GateRun
        fields = ["gate", "state", "started_by", "started_after", "started_before"]

    def __init__(self, data=None, *, engagement: Engagement, **kwargs) -> None:
        queryset = GateRun.objects.filter(gate__engagement=engagement)
        super().__init__(data, queryset=queryset, **kwargs)
        self.filters["gate"].extra["choices"] = [
            (code, code) for code in engagement.gates.order_by("order").values_list(
                "code", flat=True)]
        self.filters["started_by"].extra["choices"] = [
            (who, who) for who in queryset.order_by("started_by").values_list(
                "started_by", flat=True).distinct()]

    def errors_text(self) -> str:
        """Every refused filter in one line, each naming its field: ``state: Select a valid
        choice. …``."""
        return "; ".join(f"{name}: {' '.join(messages)}"
                         for name, messages in self.form.errors.items())
