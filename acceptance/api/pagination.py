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

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

# Ids are 64-bit signed integers in every database we use.
ID_MIN, ID_MAX = -(2**63), 2**63 - 1
CURSOR_REFUSED = "not a cursor of this list: follow the next or previous link as given"


class LedgerCursorPagination(CursorPagination):
    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size < 1:
            raise ValidationError({self.page_size_query_param: (
                f"expected a whole number 1 … {self.max_page_size}, not {raw!r}")})
        return min(size, self.max_page_size)

    def decode_cursor(self, request):
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
