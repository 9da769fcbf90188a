"""``?format=csv`` on the API's ledger lists (measurements, decisions with their verdicts, the
audit trail): a DRF renderer for ``text/csv`` and a mixin that, when CSV was asked for, answers
the list — filtered as the JSON one, every row, not paginated — with the rows of
``runners.exports`` (the same columns as the pages' download buttons, formula-escaped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.db.models import QuerySet
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response

from runners.exports import csv_text


@dataclass(frozen=True)
class CSVTable:
    header: Sequence[str]
    rows: Iterable[Sequence]


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, CSVTable):
            return csv_text(data.header, data.rows).encode()
        if isinstance(data, dict):  # an error ({"detail": …}) or one object: one row
            return csv_text(list(data), [list(data.values())]).encode()
        return csv_text(["value"], [[data]]).encode()


class CSVListMixin:
    """Lists that also answer ``?format=csv`` (or ``Accept: text/csv``). ``csv_name``: the
    file's name; ``csv_rows(queryset) -> (header, rows)``."""

    csv_name = "export"
    csv_rows: Callable[[QuerySet], tuple[Sequence[str], Iterable[Sequence]]]

    def get_renderers(self):
        return [*super().get_renderers(), CSVRenderer()]

    def list(self, request, *args, **kwargs):
        if request.accepted_renderer.format != "csv":
            return super().list(request, *args, **kwargs)
        header, rows = type(self).csv_rows(self.get_queryset())
        response = Response(CSVTable(header, rows))
        response["Content-Disposition"] = f'attachment; filename="{self.csv_name}.csv"'
        return response
