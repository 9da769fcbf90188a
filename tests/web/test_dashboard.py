"""The project managers' dashboard: every engagement's ten weeks, what is due, what is late,
what stopped and why — in a number of queries that does not grow with the engagements."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Engagement
from gates.models import Gate
from gates.services import engagement_create
from tests.web.conftest import G1_HEALTHY, G1_MISSING_DRIVE, decide


def make_engagements(count: int) -> None:
    today = timezone.localdate()
    for i in range(count):
        engagement = engagement_create(name=f"site-{i:03d}", customer=f"Customer {i % 7}",
                                       start_date=today - timedelta(days=5 * i))
        if i % 3 == 1:
            engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
        if i % 5 == 2:
            Engagement.objects.filter(pk=engagement.pk).update(
                state=Engagement.State.STOPPED, stopped_reason=f"G1 stopped on site {i}")


def dashboard_queries(client, pm, django_assert_max_num_queries, count: int, limit: int):
    make_engagements(count)
    client.force_login(pm)
    with django_assert_max_num_queries(limit) as captured:
        response = client.get(reverse("dashboard"))
    assert response.status_code == 200
    assert response.content.count(b'<svg class="timeline wide"') == count
    return len(captured.captured_queries)


def test_five_and_fifty_engagements_cost_the_same_queries(client, pm,
                                                          django_assert_max_num_queries):
    five = dashboard_queries(client, pm, django_assert_max_num_queries, 5, limit=6)
    Engagement.objects.all().delete()
    fifty = dashboard_queries(client, pm, django_assert_max_num_queries, 50, limit=6)
    assert five == fifty


@pytest.mark.parametrize("count", [5, 50])
def test_it_needs_the_same_queries_for_5_and_50_engagements(client, pm, count,
                                                           django_assert_max_num_queries):
    # session, user, membership, engagements + customers, gates: nothing per engagement
    assert dashboard_queries(client, pm, django_assert_max_num_queries, count, limit=6) <= 6


def test_it_places_each_gate_on_its_due_week_with_its_state_in_words(client, pm, engagement_a):
    decide(engagement_a.gates.get(code="G1"), G1_HEALTHY, "passed")
    client.force_login(pm)
    page = client.get(reverse("dashboard")).content.decode()
    assert "G1 Arrival acceptance: passed, due" in page  # the marker's title
    assert '<span class="badge passed">passed</span>' in page
    assert '<span class="badge pending">pending</span>' in page
    assert "today" in page
    assert "week 4 of 10" in page  # started three weeks ago
    assert "<strong>1</strong> engagement</li>" in page  # one, not "1 engagements"


def test_it_says_what_is_due_next(client, pm, engagement_a):
    engagement_a.gates.filter(code="G1").update(state=Gate.State.PASSED)
    client.force_login(pm)
    page = client.get(reverse("dashboard")).content.decode()
    due = engagement_a.start_date + timedelta(weeks=4)
    assert f"G2 Single-node baseline, due {due:%Y-%m-%d} (in 7 days)." in page


def test_it_lists_what_is_overdue(client, pm, engagement_a):
    client.force_login(pm)
    page = client.get(reverse("dashboard")).content.decode()
    due = engagement_a.start_date + timedelta(weeks=2)
    assert "Overdue:" in page
    assert f"G1 Arrival acceptance was due {due:%Y-%m-%d} (7 days overdue); it is pending." in page


def test_a_passed_gate_is_never_overdue(client, pm, engagement_a):
    engagement_a.gates.filter(code="G1").update(state=Gate.State.PASSED)
    client.force_login(pm)
    assert "Overdue:" not in client.get(reverse("dashboard")).content.decode()


def test_it_says_what_stopped_and_why_and_puts_it_first(client, pm, engagement_a, engagement_b):
    decide(engagement_b.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    client.force_login(pm)
    page = client.get(reverse("dashboard")).content.decode()
    assert page.index("globex-1") < page.index("acme-1")
    assert "Stopped:" in page
    assert "G1 stopped on" in page and "drive_count &gt;= 24 measured 23" in page
    assert "Nothing runs until a project manager re-opens the engagement." in page


def test_an_accepted_engagement_says_so(client, pm, engagement_a):
    engagement_a.gates.update(state=Gate.State.PASSED)
    Engagement.objects.filter(pk=engagement_a.pk).update(state=Engagement.State.ACCEPTED)
    client.force_login(pm)
    page = client.get(reverse("dashboard")).content.decode()
    assert "All gates passed: the engagement is accepted." in page


def test_it_is_empty_without_engagements(client, pm):
    client.force_login(pm)
    assert "No engagements yet." in client.get(reverse("dashboard")).content.decode()


def test_a_kept_section_is_never_shown_after_its_gate_changed(client, pm, engagement_a):
    """Rendered sections and timelines are kept between requests, keyed on what they show:
    a changed gate state, stop reason or language gives the new page at once."""
    client.force_login(pm)
    before = client.get(reverse("dashboard")).content.decode()
    assert "G1 Arrival acceptance: pending, due" in before
    again = client.get(reverse("dashboard")).content.decode()  # from the kept parts
    assert again.count("G1 Arrival acceptance: pending, due") == before.count(
        "G1 Arrival acceptance: pending, due")
    engagement_a.gates.filter(code="G1").update(state=Gate.State.STOPPED)
    Engagement.objects.filter(pk=engagement_a.pk).update(
        state=Engagement.State.STOPPED, stopped_reason="G1 stopped: 23 of 24 drives")
    after = client.get(reverse("dashboard")).content.decode()
    assert "G1 Arrival acceptance: stopped, due" in after
    assert '<span class="badge stopped">stopped</span>' in after
    assert "G1 stopped: 23 of 24 drives" in after
    assert "G1 Arrival acceptance: pending, due" not in after
    client.cookies["django_language"] = "zh-hans"
    chinese = client.get(reverse("dashboard")).content.decode()
    assert "G1 Arrival acceptance: stopped" not in chinese
