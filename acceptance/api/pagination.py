"""Keyset (cursor) pagination for the ledger's big lists.

The measurements list reaches a million rows at site scale: ``LimitOffsetPagination`` counts
every row for each page and walks the offset (a deep page read and threw away the rows before
it). A cursor page is ``WHERE id > last ORDER BY id LIMIT n+1`` on the primary key: the same
cost on the first page and the ten-thousandth, no count. ``next``/``previous`` are opaque
links; ``?limit=`` chooses the page size (at most ``max_page_size``).
"""

from rest_framework.pagination import CursorPagination


class LedgerCursorPagination(CursorPagination):
    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
