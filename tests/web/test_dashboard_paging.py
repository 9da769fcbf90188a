"""The dashboard pages, searches and filters: 50 rows a page in the order that needs a person
first (stopped, overdue, active, accepted) across pages; the summary counts every matching
engagement; a refused filter or page answers 400 naming it; the queries do not grow with the
engagements or the page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Engagement
from acceptance.pages.dashboard import DASHBOARD_PAGE_SIZE, dashboard_row_cache_clear
from gates.models import Gate
from gates.services import engagement_create

NAME = re.compile(rb'<a href="/engagements/([^/"]+)/"')


def names(response) -> list[str]:
    """The engagement names of the page's rows, in order (each row links its engagement once
    from its heading)."""
    seen: list[str] = []
    for name in NAME.findall(response.content):
        if name.decode() not in seen:
            seen.append(name.decode())
    return seen


@pytest.fixture
def many(db):
    """120 engagements: every 10th stopped, every 7th started 30 days ago with G1 overdue, the
    rest starting in the future (nothing due yet), each with its customer."""
    today = timezone.localdate()
    for i in range(120):
        start = today - timedelta(days=30) if i % 7 == 0 else today + timedelta(days=i)
        engagement = engagement_create(name=f"site-{i:03d}", customer=f"Customer {i % 4}",
                                       start_date=start)
        if i % 10 == 3:
            Engagement.objects.filter(pk=engagement.pk).update(
                state=Engagement.State.STOPPED, stopped_reason="G1 stopped")
    dashboard_row_cache_clear()
    yield
    dashboard_row_cache_clear()


def test_it_shows_fifty_rows_a_page_and_counts_them_all(client, pm, many):
    client.force_login(pm)
    first = client.get(reverse("dashboard"))
    assert first.status_code == 200
    assert first.content.count(b'<svg class="timeline wide"') == DASHBOARD_PAGE_SIZE == 50
    assert b"<strong>120</strong> engagements" in first.content
    assert b"<strong>12</strong> stopped" in first.content
    assert b"page 1 of 3 (120 engagements)" in first.content
    last = client.get(reverse("dashboard") + "?page=3")
    assert last.content.count(b'<svg class="timeline wide"') == 20


def test_the_order_runs_across_pages_stopped_then_overdue_first(client, pm, many):
    client.force_login(pm)
    order = [n for page in (1, 2, 3)
             for n in names(client.get(reverse("dashboard") + f"?page={page}"))]
    assert len(order) == 120 == len(set(order))
    stopped = sorted(f"site-{i:03d}" for i in range(120) if i % 10 == 3)
    overdue = sorted(f"site-{i:03d}" for i in range(120) if i % 7 == 0 and i % 10 != 3)
    # inside a rank the earliest open due date comes first (site-063 started 30 days ago)
    assert order[:12] == ["site-063"] + [n for n in stopped if n != "site-063"]
    assert order[12:12 + len(overdue)] == overdue  # same start: by name


def test_it_searches_names_and_customers(client, pm, many):
    client.force_login(pm)
    response = client.get(reverse("dashboard") + "?q=site-01")
    assert sorted(names(response)) == [f"site-{i:03d}" for i in range(10, 20)]
    assert b"<strong>10</strong> engagements" in response.content
    customer = client.get(reverse("dashboard") + "?q=customer+2")
    assert sorted(names(customer)) == [f"site-{i:03d}" for i in range(2, 120, 4)]
    nothing = client.get(reverse("dashboard") + "?q=no-such-site")
    assert b"No engagement matches." in nothing.content


def test_it_filters_by_state_and_keeps_the_filter_in_the_page_links(client, pm, many):
    client.force_login(pm)
    response = client.get(reverse("dashboard") + "?state=active")
    assert b"<strong>108</strong> engagements" in response.content
    assert b"<strong>0</strong> stopped" in response.content
    assert b'href="?state=active&amp;page=2"' in response.content


def test_it_refuses_an_unknown_state_or_page_naming_it(client, pm, many):
    client.force_login(pm)
    state = client.get(reverse("dashboard") + "?state=finished")
    assert state.status_code == 400
    assert b"state: Select a valid choice. finished is not one of the available" in \
        state.content
    page = client.get(reverse("dashboard") + "?page=9")
    assert page.status_code == 400
    assert b"page: That page contains no results" in page.content
    assert b"page 1 of 3" in page.content  # the first page instead
    for huge in ("184467440737095518", str(2**63 - 1), "9" * 400):  # OFFSET past 64 bits
        past = client.get(reverse("dashboard") + f"?page={huge}")
        assert past.status_code == 400
        assert b"page: That page contains no results" in past.content


def test_a_deep_page_costs_the_queries_of_the_first(client, pm, many,
                                                    django_assert_max_num_queries):
    client.force_login(pm)
    counts = []
    for query in ("", "?page=3", "?q=site&state=active&page=2"):
        with django_assert_max_num_queries(6) as captured:
            assert client.get(reverse("dashboard") + query).status_code == 200
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1] == counts[2]


def test_a_customer_still_gets_403(client, customer_a, many):
    client.force_login(customer_a)
    assert client.get(reverse("dashboard") + "?page=2").status_code == 403


def test_a_changed_gate_moves_its_row_at_once(client, pm, many):
    client.force_login(pm)
    assert "site-118" not in names(client.get(reverse("dashboard")))
    assert "site-118" in names(client.get(reverse("dashboard") + "?page=3"))
    Engagement.objects.filter(name="site-118").update(state=Engagement.State.STOPPED,
                                                      stopped_reason="G1 stopped")
    Gate.objects.filter(engagement__name="site-118", code="G1").update(state=Gate.State.STOPPED)
    assert "site-118" in names(client.get(reverse("dashboard")))[:13]


def test_the_queries_do_not_grow_with_the_engagements_even_when_every_row_changed(client, pm,
                                                                                  db):
    """55 engagements (two pages) and 160 (four): the same queries for the first page, a search
    with a state filter and a later page, with every gate's due date moved before each request
    so no kept row can be served."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    today = timezone.localdate()
    client.force_login(pm)

    def counts(flip: list[int]) -> list[int]:
        found = []
        for query in ("", "?q=site&state=active", "?page=2"):
            flip[0] ^= 1
            Gate.objects.update(rescheduled_due_date=today + timedelta(days=200 + flip[0]))
            with CaptureQueriesContext(connection) as captured:
                response = client.get(reverse("dashboard") + query)
            assert response.status_code == 200, query
            found.append(len(captured.captured_queries))
        return found

    flip = [0]
    for i in range(55):
        engagement_create(name=f"site-{i:03d}", customer=f"Customer {i % 4}",
                          start_date=today - timedelta(days=i))
    client.get(reverse("dashboard"))  # the session and content types read once, as served
    few = counts(flip)
    for i in range(55, 160):
        engagement_create(name=f"site-{i:03d}", customer=f"Customer {i % 4}",
                          start_date=today - timedelta(days=i))
    many = counts(flip)
    assert len(set(few + many)) == 1 and few[0] <= 6, (few, many)
