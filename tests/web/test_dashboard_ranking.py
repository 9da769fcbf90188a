"""The dashboard's ranking in SQL (``ranked_engagements``, ``dashboard_summary``) gives exactly
the order and the counts of the ranking in Python (``_ranked``) on varied engagements:
rescheduled due dates, passed gates, no gates, every gate passed, ties on the date broken by the
name in code point order ("Zeta" before "alpha"), stopped and accepted ones, searched and
filtered querysets, the last page, and the day passed in (not the database's own date)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta

import pytest
from django.utils import timezone

from acceptance.filters import EngagementFilter
from acceptance.models import Engagement
from acceptance.pages.dashboard import (
    DASHBOARD_PAGE_SIZE,
    ENGAGEMENT_VALUES,
    GATE_VALUES,
    DashboardSummary,
    dashboard_row_cache_clear,
    dashboard_rows,
    dashboard_summary,
    ranked_engagements,
)
from gates.models import Gate, gate_due_date_sql
from gates.services import engagement_create


@dataclass
class _Ranked:
    """What sorting and the summary need of one engagement, from its stored values alone."""

    rank: tuple
    stopped: bool
    overdue: bool
    accepted: bool
    values: tuple
    gate_values: tuple


def _ranked(values: tuple, gate_values: tuple, today: date) -> _Ranked:
    """The ranking in Python, from an engagement's ``ENGAGEMENT_VALUES`` and its gates'
    ``GATE_VALUES`` (without the engagement id): the reference ``ranked_engagements`` is held
    equal to (the dashboard ranked this way before issue 17 moved it into SQL)."""
    _, name, _, state, _, _, start_date = values
    open_dues, overdue = [], False
    for _code, _name, due_week, rescheduled, gate_state in gate_values:
        if gate_state == Gate.State.PASSED:
            continue
        due = rescheduled if rescheduled is not None else start_date + timedelta(weeks=due_week)
        open_dues.append(due)
        overdue = overdue or due < today
    stopped = state == Engagement.State.STOPPED
    accepted = state == Engagement.State.ACCEPTED
    rank = (0 if stopped else 1 if overdue else 3 if accepted else 2,
            min(open_dues, default=date.max), name)
    return _Ranked(rank, stopped, overdue, accepted, values, gate_values)


TODAY = date(2026, 6, 15)  # not the database's day: the page's, passed in


def python_ranked(engagements, today: date) -> list:
    """Every engagement ranked by ``_ranked`` from the stored values, in its order."""
    gates_of: dict[int, list[tuple]] = {}
    for engagement_id, *values in Gate.objects.filter(
            engagement__in=engagements.values("id")).order_by(
            "engagement_id", "order").values_list(*GATE_VALUES):
        gates_of.setdefault(engagement_id, []).append(tuple(values))
    return sorted((_ranked(values, tuple(gates_of.get(values[0], ())), today)
                   for values in engagements.values_list(*ENGAGEMENT_VALUES)),
                  key=lambda r: r.rank)


def python_ranking(engagements, today: date) -> tuple[list[str], DashboardSummary]:
    """The order and the summary as ``_ranked`` makes them."""
    ranked = python_ranked(engagements, today)
    return [r.values[1] for r in ranked], DashboardSummary(
        total=len(ranked), stopped=sum(r.stopped for r in ranked),
        overdue=sum(r.overdue for r in ranked), accepted=sum(r.accepted for r in ranked))


def sql_ranking(engagements, today: date) -> tuple[list[str], DashboardSummary]:
    return (list(ranked_engagements(engagements, today).values_list("name", flat=True)),
            dashboard_summary(engagements, today))


@pytest.fixture
def varied(db):
    """71 engagements: starts spread over 20 weeks before and after TODAY; some stopped, some
    accepted; some gates passed, some rescheduled (earlier or later), one engagement without
    gates, one with every gate passed; and ten alike but for their names, whose code point
    order differs from a dictionary's (a tie on the date falls to the name)."""
    names = [f"site-{i:02d}" for i in range(60)] + [
        "Zeta", "alpha", "Alpha.2", "beta_1", "beta-1", "0-first", "Z.last", "a", "B", "b-2",
        "no-gates"]
    for i, name in enumerate(names):
        start = TODAY + timedelta(days=7 * ((i * 5) % 41 - 20))
        tied = i >= 60 and name != "no-gates"
        if tied:
            start = TODAY - timedelta(weeks=3)  # the same day and gates: ordered by name alone
        engagement = engagement_create(name=name, customer=f"Customer {i % 5}",
                                       start_date=start)
        gates = engagement.gates
        if tied:
            continue
        if i % 3 == 1:
            gates.filter(code="G1").update(state=Gate.State.PASSED)
        if i % 4 == 2:
            gates.filter(code="G2").update(rescheduled_due_date=TODAY + timedelta(days=i - 30))
        if i % 5 == 3:
            gates.filter(code="G3").update(state=Gate.State.REVIEW,
                                           rescheduled_due_date=TODAY - timedelta(days=i))
        if i % 9 == 4:
            Engagement.objects.filter(pk=engagement.pk).update(
                state=Engagement.State.STOPPED, stopped_reason="G2 stopped")
            gates.filter(code="G2").update(state=Gate.State.STOPPED)
        if i % 11 == 5:
            Engagement.objects.filter(pk=engagement.pk).update(state=Engagement.State.ACCEPTED)
            gates.update(state=Gate.State.PASSED)
        if i % 13 == 6:  # accepted on paper, a gate still open (an edited history)
            Engagement.objects.filter(pk=engagement.pk).update(state=Engagement.State.ACCEPTED)
        if name == "no-gates":
            gates.all().delete()
        if name == "site-07":  # active, every gate passed: no open due date
            gates.update(state=Gate.State.PASSED)
    dashboard_row_cache_clear()
    yield Engagement.objects.all()
    dashboard_row_cache_clear()


def test_the_sql_due_date_is_the_gates_due_date(varied):
    gates = Gate.objects.select_related("engagement").annotate(
        due=gate_due_date_sql("engagement__start_date"))
    assert len(gates) == 70 * 4
    assert [g.due for g in gates] == [g.due_date for g in gates]
    assert any(g.rescheduled_due_date for g in gates)


def test_the_data_holds_every_rank_and_ties_on_the_date(varied):
    ranked = python_ranked(varied, TODAY)
    assert {r.rank[0] for r in ranked} == {0, 1, 2, 3}
    assert any(r.rank[1] == date.max for r in ranked)  # no open gate: last in its rank
    assert any(a.rank[:2] == b.rank[:2] for a, b in zip(ranked, ranked[1:], strict=False))  # a tie
    order = [r.values[1] for r in ranked]
    tied = [name for name in order if name[0] in "ZAaBb0"]
    assert len(tied) == 10 and tied == sorted(tied) != sorted(tied, key=str.lower)


@pytest.mark.parametrize("today", [TODAY, TODAY - timedelta(weeks=30), TODAY + timedelta(weeks=9),
                                   TODAY + timedelta(weeks=40)])
def test_sql_and_python_rank_every_engagement_alike(varied, today):
    expected = python_ranking(varied, today)
    assert sql_ranking(varied, today) == expected
    assert len(expected[0]) == 71


@pytest.mark.parametrize("query", [{"state": "active"}, {"state": "stopped"},
                                   {"state": "accepted"}, {"q": "customer 2"}, {"q": "BETA"},
                                   {"q": "site-1", "state": "active"}, {"q": "nothing-here"}])
def test_sql_and_python_rank_searched_and_filtered_engagements_alike(varied, query):
    engagements_filter = EngagementFilter(query, queryset=Engagement.objects.all())
    assert engagements_filter.is_valid()
    engagements = engagements_filter.qs
    expected = python_ranking(engagements, TODAY)
    assert sql_ranking(engagements, TODAY) == expected
    assert expected[1].total == engagements.count()


def test_every_page_shows_its_slice_of_the_python_order_and_the_summary(varied):
    order, summary = python_ranking(varied, TODAY)
    pages = math.ceil(len(order) / DASHBOARD_PAGE_SIZE)
    assert pages == 2
    shown = []
    for number in range(1, pages + 1):
        rows, page_summary, page = dashboard_rows(varied, TODAY, page=number)
        assert page_summary == summary and page.paginator.count == len(order)
        assert [row.name for row in rows] == [values[1] for values in page.object_list]
        shown += [row.name for row in rows]
    assert shown == order
    assert len(rows) == len(order) - DASHBOARD_PAGE_SIZE  # the last page: the rest


def test_the_page_ranks_on_the_day_it_is_given_not_the_databases(varied):
    """A gate due between the database's day and the page's day is overdue only when the page's
    day is after it."""
    today = timezone.localdate()
    engagement = engagement_create(name="due-soon", customer="Customer 0",
                                   start_date=today + timedelta(weeks=5))
    engagement.gates.filter(code="G1").update(rescheduled_due_date=today + timedelta(days=3))
    one = Engagement.objects.filter(pk=engagement.pk)
    assert sql_ranking(one, today)[1].overdue == 0
    assert sql_ranking(one, today + timedelta(days=4))[1].overdue == 1
    assert ranked_engagements(one, today + timedelta(days=4)).get().overdue is True


def test_an_empty_or_refused_page_still_counts_every_engagement(varied):
    from django.core.paginator import EmptyPage, PageNotAnInteger

    summary = python_ranking(varied, TODAY)[1]
    none = Engagement.objects.filter(name="no-such-site")
    rows, empty, page = dashboard_rows(none, TODAY, page=1)
    assert rows == [] and empty == DashboardSummary(0, 0, 0, 0) and page.paginator.count == 0
    for refused, error in (("3", EmptyPage), ("0", EmptyPage), ("x", PageNotAnInteger)):
        with pytest.raises(error):
            dashboard_rows(varied, TODAY, page=refused)
    assert dashboard_rows(varied, TODAY, page="2")[1] == summary
