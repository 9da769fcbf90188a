"""Keyset (cursor) pagination for the ledger's big lists.

The measurements list reaches a million rows at site scale: ``LimitOffsetPagination`` counts
every row for each page and walks the offset (a deep page read and threw away the rows before
it). A cursor page is ``WHERE id > last ORDER BY id LIMIT n+1`` on the primary key: the same
cost on the first page and the ten-thousandth, no count; rows inserted while a client pages
have higher ids, so they come at the end and no row is skipped or repeated. ``next``/
``previous`` are opaque links; ``?limit=`` chooses the page size (at most ``max_page_size``).

A cursor that this list did not give, or a page size that is not a whole number, is refused
with a 400 naming the parameter (DRF answers 404 "Invalid cursor" for the first, ignores the
second, and a forged position reached the database: a 500 or a 503).
"""

import re

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, LimitOffsetPagination

# Ids are 64-bit signed integers in every database we use.
ID_MIN, ID_MAX = -(2**63), 2**63 - 1
CURSOR_REFUSED = "not a cursor of this list: follow the next or previous link as given"
_CURSOR_TEXT = re.compile(r"[A-Za-z0-9+/]+={0,2}")  # what DRF's encode_cursor writes


class LedgerCursorPagination(CursorPagination):
    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        size = int(raw) if raw.isascii() and raw.isdigit() else 0
        if size < 1:
            raise ValidationError({self.page_size_query_param: (
                f"expected a whole number 1 … {self.max_page_size}, not {raw!r}")})
        return min(size, self.max_page_size)

    def decode_cursor(self, request):
        raw = request.query_params.get(self.cursor_query_param)
        if raw is not None and not _CURSOR_TEXT.fullmatch(raw):
            # DRF's base64 reading skips what is not base64: "%00" or " " read as "no cursor",
            # the first page, instead of a refusal
            raise ValidationError({self.cursor_query_param: CURSOR_REFUSED})
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: CURSOR_REFUSED}) from None
        if cursor is not None and cursor.position is not None:
            try:
                position = int(cursor.position)
            except ValueError:
                position = None
            if position is None or not ID_MIN <= position <= ID_MAX:
                raise ValidationError({self.cursor_query_param: CURSOR_REFUSED})
        return cursor


def _whole_number(request, name: str, low: int, high: int | None, words: str) -> int | None:
    """The query parameter ``name`` as a whole number of ASCII digits, ``low`` … ``high`` (no
    upper bound when None), None when absent; 400 naming it otherwise (``int()`` alone took
    "1_0", "+2", " 3 " and other scripts' digits)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    value = int(raw) if raw.isascii() and raw.isdigit() else None
    if value is None or value < low or (high is not None and value > high):
        raise ValidationError({name: f"expected {words}, not {raw!r}"})
    return value


class LedgerLimitOffsetPagination(LimitOffsetPagination):
    """The other lists (engagements, gate runs, probe runs, decisions, reports): ``?limit=`` is
    a whole number from 1 (a page holds at most ``max_limit`` rows: more is that many) and
    ``?offset=`` 0 … 2^63 − 1; anything else is a 400 naming the parameter (DRF ignored a bad
    one, and a 20-digit limit reached the database as a 503)."""

    default_limit = 100
    max_limit = 1000

    def get_limit(self, request) -> int:
        limit = _whole_number(request, self.limit_query_param, 1, None,
                              f"a whole number from 1 (a page holds at most {self.max_limit})")
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request) -> int:
        offset = _whole_number(request, self.offset_query_param, 0, ID_MAX,
                               f"a whole number 0 … {ID_MAX}")
        return 0 if offset is None else offset
