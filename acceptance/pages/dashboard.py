"""The project managers' dashboard: one row per engagement (timeline, gates, next due, overdue,
stopped), sorted so what needs a person comes first.

The dashboard's queries do not grow with the number of engagements, and neither does its work:
the database ranks the engagements (``ranked_engagements``: each one's earliest open due date and
whether it is overdue, computed in SQL for the page's day), counts the summary in one aggregate
and cuts the page; only the page's engagements and their gates are read, as plain values. Built
rows are kept with their rendered section (see ``ROW_CACHE_SIZE``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date

from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    F,
    Func,
    IntegerField,
    Min,
    Q,
    QuerySet,
    Value,
    When,
)
from django.urls import reverse
from django.utils.html import conditional_escape as escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from acceptance.data_texts import stopped_reason_text
from acceptance.models import Engagement, Organisation
from acceptance.pages.timeline import timeline
from acceptance.pages.words import (
    ENGAGEMENT_STATE_WORDS,
    PageWords,
    day,
    days_text,
    gate_title,
    is_overdue,
    week_text,
)
from gates.models import Gate, gate_due_date_sql


@dataclass
class GateCell:
    code: str
    title: str
    state: str
    state_word: str
    due_date: str
    due_text: str
    overdue: bool
    due_line: str = ""  # "due 2026-12-14 · in 14 days" (no "in …" once passed)


@dataclass
class EngagementRow:
    name: str
    url: str
    customer: str
    state: str
    state_word: str
    is_lab: bool
    start_date: str
    end_date: str
    week_text: str
    timeline: SafeString
    gates: list[GateCell]
    next_due: str
    overdue: list[str]
    stopped: bool
    stopped_reason: str
    html: SafeString = field(repr=False, default=SafeString(""))  # the rendered section


@dataclass
class DashboardSummary:
    total: int
    stopped: int
    overdue: int
    accepted: int


def _next_due(engagement: Engagement, gates: list[Gate], today: date) -> str:
    if engagement.state == Engagement.State.ACCEPTED:
        return _("All gates passed: the engagement is accepted.")
    if engagement.state == Engagement.State.STOPPED:
        return _("Nothing runs until a project manager re-opens the engagement.")
    if not gates:
        return _("No gates: G1–G4 were never seeded for this engagement (the admin's action "
                 "\"Seed the default gates\" adds them).")
    upcoming = next((g for g in gates if g.state != Gate.State.PASSED), None)
    if upcoming is None:
        return _("Every gate has passed.")
    if upcoming.state == Gate.State.REVIEW:
        return _("%(gate)s awaits a person's review (due %(date)s, %(when)s).") % {
            "gate": gate_title(upcoming), "date": day(upcoming.due_date),
            "when": days_text(upcoming.due_date, today)}
    return _("%(gate)s, due %(date)s (%(when)s).") % {
        "gate": gate_title(upcoming), "date": day(upcoming.due_date),
        "when": days_text(upcoming.due_date, today)}


def dashboard_row(engagement: Engagement, today: date, words: PageWords | None = None,
                  gates: list[Gate] | None = None) -> EngagementRow:
    """One engagement's dashboard row; ``gates`` in order (default: its prefetched gates)."""
    words = words or PageWords()
    gates = list(engagement.gates.all()) if gates is None else gates
    cells, overdue = [], []
    for gate in gates:
        late = is_overdue(gate, today)
        word = words.state(gate.state)
        due = gate.due_date
        due_text = words.days(due, today)
        due_line = _("due %(date)s") % {"date": day(due)}
        if gate.state != Gate.State.PASSED:
            due_line += f" · {due_text}"
        cells.append(GateCell(
            code=gate.code, title=words.title(gate), state=gate.state, state_word=word,
            due_date=day(due), due_text=due_text, overdue=late, due_line=due_line))
        if late:
            overdue.append(_("%(gate)s was due %(date)s (%(when)s); it is %(state)s.") % {
                "gate": words.title(gate), "date": day(due),
                "when": words.days(due, today), "state": word})
    stopped = engagement.state == Engagement.State.STOPPED
    return EngagementRow(
        name=engagement.name, url=reverse("engagement-detail", args=[engagement.name]),
        customer=engagement.customer.name, state=engagement.state,
        state_word=str(ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state)),
        is_lab=engagement.is_lab, start_date=day(engagement.start_date),
        end_date=day(engagement.end_date), week_text=week_text(engagement, today),
        timeline=timeline(engagement, gates, today), gates=cells,
        next_due=_next_due(engagement, gates, today), overdue=overdue,
        stopped=stopped, stopped_reason=stopped_reason_text(engagement.stopped_reason),
    )


# What a dashboard row is made of, read as plain values (no model instances per row).
ENGAGEMENT_VALUES = ("id", "name", "customer__name", "state", "stopped_reason", "is_lab",
                     "start_date")
GATE_VALUES = ("engagement_id", "code", "name", "due_week", "rescheduled_due_date", "state")

# Built rows with their rendered section, keyed on every stored value the row is made of (the
# engagement's and its gates' fields above), today's date and the language: a changed gate
# state, stop reason or day gives another key, so a row is never served stale. Building and
# rendering 200 rows through the template engine was most of the page's time.
ROW_CACHE_SIZE = 1024  # ~7 KB each: rows of the pages people look at, in two languages
_row_cache: OrderedDict[tuple, EngagementRow] = OrderedDict()
_row_cache_lock = threading.Lock()


DASHBOARD_PAGE_SIZE = 50  # rows read, built and rendered per request; the rest are ranked in SQL
DASHBOARD_PAGE_MAX = 10**9  # a page number past this is refused without a query


class _CodePointOrder(Func):
    """A text in code point order, as Python's ``str`` compares: SQLite's default (BINARY)
    already is; PostgreSQL's database collation may not be (``en_US`` puts "b" before "C")."""

    template = "%(expressions)s"

    def as_postgresql(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, template='%(expressions)s COLLATE "C"',
                              **extra)


def ranked_engagements(engagements: QuerySet[Engagement], today: date) -> QuerySet[Engagement]:
    """``engagements`` in the dashboard's order, ranked by the database:
    stopped, overdue, active, accepted; then the earliest due date of a gate not passed (none:
    last); then the name. Each is annotated with ``next_due`` (that date) and ``overdue``
    (``next_due`` before ``today``: the page's day, not the database's ``CURRENT_DATE``).

    One pass over the gates joined and grouped per engagement (a subquery per engagement would
    be run per row, and again for each place it is named)."""
    late = Q(next_due__lt=today)
    return engagements.annotate(
        next_due=Min(gate_due_date_sql("start_date", gate="gates__"),
                     filter=~Q(gates__state=Gate.State.PASSED)),
        overdue=Case(When(late, then=Value(True)), default=Value(False)),
        rank=Case(When(state=Engagement.State.STOPPED, then=Value(0)),
                  When(late, then=Value(1)),
                  When(state=Engagement.State.ACCEPTED, then=Value(3)), default=Value(2)),
    ).order_by("rank", F("next_due").asc(nulls_last=True), _CodePointOrder("name"))


def dashboard_summary(engagements: QuerySet[Engagement], today: date) -> DashboardSummary:
    """The counts over every engagement of ``engagements``, in one query: all, stopped, with
    a gate overdue on ``today`` (stopped ones too), accepted."""
    return DashboardSummary(**ranked_engagements(engagements, today).order_by().aggregate(
        total=Count("pk"), stopped=Count("pk", filter=Q(state=Engagement.State.STOPPED)),
        overdue=Count("pk", filter=Q(next_due__lt=today)),
        accepted=Count("pk", filter=Q(state=Engagement.State.ACCEPTED))))


class _SumOverAll(Func):
    """``SUM(x) OVER ()``: a count over every ranked engagement, beside each row of the page
    (a window, not an aggregate: the page's rows stay rows)."""

    template = "SUM(%(expressions)s) OVER ()"
    output_field = IntegerField()
    contains_over_clause = True

    def get_group_by_cols(self) -> list:
        return []  # computed after the grouping, never grouped by


def _counted(ranked: QuerySet[Engagement], today: date) -> QuerySet:
    """``ranked``'s ``ENGAGEMENT_VALUES`` followed by the summary's four counts."""
    one = Value(1, IntegerField())

    def counted(condition: Q) -> _SumOverAll:
        return _SumOverAll(Case(When(condition, then=one), default=Value(0, IntegerField())))

    return ranked.annotate(
        count_total=_SumOverAll(one),
        count_stopped=counted(Q(state=Engagement.State.STOPPED)),
        count_overdue=counted(Q(next_due__lt=today)),
        count_accepted=counted(Q(state=Engagement.State.ACCEPTED)),
    ).values_list(*ENGAGEMENT_VALUES, "count_total", "count_stopped", "count_overdue",
                  "count_accepted")


class _PageRead:
    """What the paginator pages: one page's rows, already read (at ``offset``, of ``total``)."""

    def __init__(self, rows: list[tuple], offset: int, total: int):
        self.rows, self.offset, self.total = rows, offset, total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: slice) -> list[tuple]:
        if index.start != self.offset:
            raise IndexError(f"rows {index.start}… were not read (read: {self.offset}…)")
        return self.rows[: index.stop - index.start]


def _page_number(page: int | str | None) -> int | None:
    """``page`` as a page number from 1, or None when it is not one (the paginator says why)."""
    try:
        number = int(page or 1)
    except (TypeError, ValueError):
        return None
    # past any real page, and its OFFSET would overflow the database's 64-bit integer: the
    # paginator refuses it ("That page contains no results")
    return number if 1 <= number <= DASHBOARD_PAGE_MAX else None


def dashboard_rows(engagements: QuerySet[Engagement], today: date, *,
                   page: int | str | None = 1) -> tuple[list[EngagementRow], DashboardSummary,
                                                        Page]:
    """One page of rows sorted so what needs a person comes first: stopped, overdue, active,
    accepted; the summary counts every engagement of ``engagements``.

    Two queries whatever the number of engagements or the page: the page's engagements (ranked
    and cut in SQL), each with the summary's counts over all of them, and the page's gates (an
    empty or refused page asks for the counts alone instead); only the page's rows are built
    and rendered. ``page``: a page number (``InvalidPage`` when it is not one of the pages)."""
    words, language = PageWords(), get_language()
    number = _page_number(page)
    read: list[tuple] = []
    if number is not None:
        offset = (number - 1) * DASHBOARD_PAGE_SIZE
        read = list(_counted(ranked_engagements(engagements, today), today)[
            offset:offset + DASHBOARD_PAGE_SIZE])
    if read:
        summary = DashboardSummary(*read[0][-4:])
        pages = Paginator(_PageRead([values[:-4] for values in read], offset, summary.total),
                          DASHBOARD_PAGE_SIZE)
        shown = pages.page(number)
    else:
        summary = dashboard_summary(engagements, today)
        shown = Paginator(_PageRead([], 0, summary.total), DASHBOARD_PAGE_SIZE).page(page or 1)
    gates_of: dict[int, list[tuple]] = {}
    if shown.object_list:
        for engagement_id, *values in Gate.objects.filter(
                engagement_id__in=[values[0] for values in shown.object_list]).order_by(
                "engagement_id", "order").values_list(*GATE_VALUES):
            gates_of.setdefault(engagement_id, []).append(tuple(values))
    rows = []
    for values in shown.object_list:
        gate_values = tuple(gates_of.get(values[0], ()))
        key = (language, today, values[1:], gate_values)
        with _row_cache_lock:
            row = _row_cache.get(key)
            if row is not None:
                _row_cache.move_to_end(key)
        if row is None:
            row = _row_build(values, gate_values, today, words)
            with _row_cache_lock:
                _row_cache[key] = row
                while len(_row_cache) > ROW_CACHE_SIZE:
                    _row_cache.popitem(last=False)
        rows.append(row)
    return rows, summary, shown


def _row_build(values: tuple, gate_values: tuple, today: date, words: PageWords) -> EngagementRow:
    pk, name, customer, state, stopped_reason, is_lab, start_date = values
    engagement = Engagement(id=pk, name=name, customer=Organisation(name=customer), state=state,
                            stopped_reason=stopped_reason, is_lab=is_lab, start_date=start_date)
    gates = [Gate(engagement=engagement, code=code, name=gate_name, due_week=due_week,
                  rescheduled_due_date=rescheduled, state=gate_state)
             for code, gate_name, due_week, rescheduled, gate_state in gate_values]
    row = dashboard_row(engagement, today, words, gates=gates)
    row.html = dashboard_row_html(row)
    return row


def dashboard_row_html(row: EngagementRow) -> SafeString:
    """The row's dashboard section, as ``acceptance/_dashboard_row.html`` would render it (the
    template stays as its readable reference; ``tests/web/test_dashboard_row_html.py`` holds the
    two equal). Plain string formatting, every data text escaped once: through the template
    engine 50 rows cost 40 ms of CPU on these machines, most of a page whose rows all changed."""
    e = escape
    lab = (f'<span class="badge simulated">{e(_("lab: simulated evidence"))}</span>'
           if row.is_lab else "")
    gates = "".join(
        f'\n    <li class="{e(g.state)}{" overdue" if g.overdue else ""}">\n'
        f'      <strong>{e(g.title)}</strong> <span class="badge {e(g.state)}">'
        f'{e(g.state_word)}</span>\n'
        f'      <span class="due">{e(g.due_line)}</span>\n'
        f"    </li>\n    " for g in row.gates)
    stopped = (f'\n  <div class="callout stopped"><p><strong>{e(_("Stopped:"))}</strong> '
               f'{e(row.stopped_reason) if row.stopped_reason else _("no reason recorded")}'
               f"</p></div>\n  " if row.stopped else "")
    overdue = (f'\n  <div class="callout review"><p><strong>{e(_("Overdue:"))}</strong></p>\n'
               f'    <ul>{"".join(f"<li>{e(line)}</li>" for line in row.overdue)}</ul></div>\n  '
               if row.overdue else "")
    html = (
        f'<section class="card" id="engagement-{e(row.name)}">\n'
        f'  <div class="row-head">\n'
        f'    <h2><a href="{e(row.url)}">{e(row.name)}</a></h2>\n'
        f"    <span>{e(row.customer)}</span>\n"
        f'    <span class="badge {e(row.state)}">{e(row.state_word)}</span>\n'
        f"    {lab}\n"
        f'    <span class="meta">{e(row.week_text)} \u00b7 {e(row.start_date)} \u2192 '
        f"{e(row.end_date)}</span>\n"
        f"  </div>\n"
        f"  {e(row.timeline)}\n"
        f'  <ul class="gate-list">\n'
        f"    {gates}\n"
        f"  </ul>\n"
        f"  {stopped}\n"
        f"  {overdue}\n"
        f'  <div class="callout {"pass" if row.state == "accepted" else "next"}"><p><strong>'
        f'{e(_("Next:"))}</strong> {e(row.next_due)}</p></div>\n'
        f"</section>\n")
    return mark_safe(html)  # noqa: S308  # nosec B308, B703 # every data text above is escaped


def dashboard_row_cache_clear() -> None:
    """Forget every kept row (benchmarks measure the page without them too)."""
    with _row_cache_lock:
        _row_cache.clear()
