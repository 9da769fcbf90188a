"""The run page's measurements a page at a time, by keyset (issue 17: every page ≤ 300 ms at
100 000 measurements).

The order is the run page's: metric, node (in the order the nodes were registered, the
service's own figures without a node after them), id — the index ``measurement_run_page``
(gate run, metric, node, id). A page is read as ``WHERE gate_run = … AND (metric, node, id) >
key ORDER BY … LIMIT n+1`` from the row the link names, never by ``OFFSET`` (the last of 500
pages read and threw away 99 800 rows: 546 ms p95). As in ``acceptance.api.pagination`` (the
measurements API's cursor pages) the links are opaque cursors and a cursor that is not one
(not base64 JSON of a direction and a key of the right types and bounds) is refused with one line
naming the parameter; a well-formed key that names no row (edited by hand) is read as a
position in the order, as the API's are, and shows what follows it. The key here has three
columns, not the primary key alone, so the cursor holds the whole key.

A row comparison never matches a row whose node is empty (SQL's ``NULL``), so the rows after
(or before) a key are read as up to three ranges, one after the other, each a range of the
index: the same metric with a later node, the same metric's rows without a node, the later
metrics. A run that carries other nodes' evidence from an earlier attempt reads each attempt's
ranges (``GateRun.evidence_measurement_sources``) and lets the database order the few rows
found. ``last`` is the end read backwards (``ORDER BY … DESC LIMIT n``), then reversed.

"rows X–Y of N": N is a ``COUNT`` of the run's index entries, X a ``COUNT`` of the rows before
the page (the same ranges), both index-only; the first and last pages need no second count.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from django.db.models import F, Q
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan

from runners.models import GateRun, Measurement

PER_PAGE = 200
PARAMETER = "measurements_cursor"
LAST = "last"
ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # ids are 64-bit signed in every database we use
METRIC_MAX = Measurement._meta.get_field("metric").max_length
TOKEN_MAX = 512  # a cursor holds a metric (≤ 64 characters) and two ids
REFUSED = (f"{PARAMETER}: not a cursor of this page: follow the First, Previous, Next or "
           f"Last link as given")

ASCENDING = (F("metric").asc(), F("node_id").asc(nulls_last=True), F("id").asc())
DESCENDING = (F("metric").desc(), F("node_id").desc(nulls_first=True), F("id").desc())


class BadCursor(ValueError):
    """A cursor this page did not give (its one-line message names the parameter)."""


@dataclass(frozen=True)
class Key:
    """Where a row stands in the page's order."""

    metric: str
    node_id: int | None
    id: int


@dataclass(frozen=True)
class Cursor:
    """A page: the rows after ``key`` (``forward``) or before it; no key: the first page
    (forward) or the last."""

    forward: bool = True
    key: Key | None = None

    def token(self) -> str:
        if self.key is None:
            return "" if self.forward else LAST
        k = self.key
        raw = json.dumps(["a" if self.forward else "b", k.metric, k.node_id, k.id],
                         separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_from(token: str | None) -> Cursor:
    """The cursor of a link (``None`` or "": the first page); ``BadCursor`` if it is not one."""
    if not token:
        return Cursor()
    if token == LAST:
        return Cursor(forward=False)
    if len(token) > TOKEN_MAX:  # nothing this page gives is longer (nor nested deeper)
        raise BadCursor(REFUSED)
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        direction, metric, node_id, row_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise BadCursor(REFUSED) from None
    if (direction not in ("a", "b") or not isinstance(metric, str)
            or not 0 < len(metric) <= METRIC_MAX or not metric.isprintable()
            or not all(v is None or (type(v) is int and ID_MIN <= v <= ID_MAX)
                       for v in (node_id, row_id)) or row_id is None):
        raise BadCursor(REFUSED)
    return Cursor(forward=direction == "a", key=Key(metric, node_id, row_id))


def _ranges(key: Key, *, after: bool) -> list[Q]:
    """The rows after (or before) ``key`` in the page's order as disjoint filters, each a range
    of the index, in the order they are read (ascending after, descending before)."""
    m, node, row = key.metric, key.node_id, key.id
    later = TupleGreaterThan if after else TupleLessThan
    if node is not None:
        same_metric = Q(later(Tuple(F("node_id"), F("id")), (node, row)), metric=m)
        unplaced = [Q(metric=m, node_id__isnull=True)] if after else []
        return [same_metric, *unplaced, Q(metric__gt=m) if after else Q(metric__lt=m)]
    unplaced_rest = Q(metric=m, node_id__isnull=True, **{"id__gt" if after else "id__lt": row})
    if after:
        return [unplaced_rest, Q(metric__gt=m)]
    return [unplaced_rest, Q(metric=m, node_id__isnull=False), Q(metric__lt=m)]


def _read(sources: list[Q], ranges: list[Q], forward: bool, wanted: int) -> list[Key]:
    """Up to ``wanted`` rows' keys in order (ascending ``forward``, else descending)."""
    order = ASCENDING if forward else DESCENDING
    found: list[tuple] = []
    for source in sources:
        taken: list[tuple] = []
        for where in ranges:
            taken += Measurement.objects.filter(source, where).order_by(*order).values_list(
                "metric", "node_id", "id")[:wanted - len(taken)]
            if len(taken) >= wanted:
                break
        found += taken
    if len(sources) > 1 and found:  # the database's order (its collation) merges them
        found = list(Measurement.objects.filter(id__in=[row[2] for row in found]).order_by(
            *order).values_list("metric", "node_id", "id")[:wanted])
    return [Key(*row) for row in found]


def _count(sources: list[Q], ranges: list[Q]) -> int:
    return sum(Measurement.objects.filter(source, where).count()
               for source in sources for where in ranges)


@dataclass
class MeasurementPage:
    """One page: its rows' ids in order, where they stand (``start``…``end`` of ``total``,
    from 1) and the cursors of the pages around it (None: no such page)."""

    ids: list[int]
    total: int
    start: int
    end: int
    first: Cursor | None
    previous: Cursor | None
    next: Cursor | None
    last: Cursor | None
    opened: bool  # a link was followed (the page shows the table open)


def measurement_page(gate_run: GateRun, cursor: Cursor,
                     per_page: int = PER_PAGE) -> MeasurementPage:
    """The page ``cursor`` names of ``gate_run``'s evidence measurements."""
    sources = gate_run.evidence_measurement_sources()
    ranges = [Q()] if cursor.key is None else _ranges(cursor.key, after=cursor.forward)
    keys = _read(sources, ranges, cursor.forward, per_page + 1)
    more = len(keys) > per_page  # rows beyond this page, in the direction read
    keys = keys[:per_page]
    if not cursor.forward:
        keys.reverse()
    total = _count(sources, [Q()])
    if not keys:  # an empty run, or a cursor past its end: only the first page to offer
        return MeasurementPage([], total, 0, 0, Cursor() if cursor.key else None, None, None,
                               None, cursor.key is not None)
    has_before = more if not cursor.forward else cursor.key is not None
    has_after = more if cursor.forward else cursor.key is not None
    if cursor.key is None:
        start = 1 if cursor.forward else total - len(keys) + 1
    else:
        start = _count(sources, _ranges(keys[0], after=False)) + 1
    return MeasurementPage(
        ids=[k.id for k in keys], total=total, start=start, end=start + len(keys) - 1,
        first=Cursor() if has_before else None,
        previous=Cursor(forward=False, key=keys[0]) if has_before else None,
        next=Cursor(forward=True, key=keys[-1]) if has_after else None,
        last=Cursor(forward=False) if has_after else None,
        opened=cursor.key is not None or not cursor.forward)
