"""The dashboard's filters (django-filter): a search over engagement and customer names and the
engagement's state. An unknown state is refused by the form, naming the field."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _

from acceptance.models import Engagement


class EngagementFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", max_length=100, label=_("Search"))
    state = django_filters.ChoiceFilter(choices=Engagement.State.choices, label=_("State"))

    class Meta:
        model = Engagement
        fields = ["q", "state"]

    def search(self, queryset: QuerySet[Engagement], name: str, value: str):
        """Engagements whose name or customer's name contains the text (any case)."""
        text = value.strip()
        return queryset.filter(Q(name__icontains=text) | Q(customer__name__icontains=text))

    def errors_text(self) -> str:
        """Every refused filter in one line, each naming its field."""
        return "; ".join(f"{name}: {' '.join(messages)}"
                         for name, messages in self.form.errors.items())
