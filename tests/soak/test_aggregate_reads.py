"""The soak page and its poll read the window aggregates with a query count that does not grow
with the windows, and a chart with more windows than it may draw shows each bucket's worst
window (never hides a bad one)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runners.soak import queries
from runners.soak.models import SoakWindow

from .pages_fixtures import personas, recorded_soak


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


@pytest.mark.django_db
def test_page_and_poll_query_counts_do_not_grow_with_the_windows():
    people = personas("ACME")
    small = recorded_soak(windows=18, name="acme-small")
    large = recorded_soak(windows=36, name="acme-large")
    assert SoakWindow.objects.filter(soak=large).count() == 36
    for name in ("soak-detail", "soak-live"):
        counts = [queries_of(people.engineer.client, reverse(name, args=[soak.id]))
                  for soak in (small, large)]
        assert counts[0] == counts[1], (name, counts)
        assert counts[1] < 60, (name, counts)


@pytest.mark.django_db
def test_a_bounded_chart_shows_the_worst_window_of_each_bucket():
    soak = recorded_soak(windows=18)
    every = queries.soak_series(soak, "ttft_p99")["points"]
    bounded = queries.soak_series(soak, "ttft_p99", max_points=6)["points"]
    assert len(every) == 18 and {p["windows"] for p in every} == {1}
    assert len(bounded) == 6 and {p["windows"] for p in bounded} == {3}
    for k, point in enumerate(bounded):
        bucket = every[3 * k:3 * k + 3]
        assert point["value"] == max(p["value"] for p in bucket)
        assert point["window"] in {p["window"] for p in bucket}
    # throughput: a bucket shows its lowest window
    thr = queries.soak_series(soak, "output_throughput")["points"]
    low = queries.soak_series(soak, "output_throughput", max_points=6)["points"]
    assert [p["value"] for p in low] == [min(p["value"] for p in thr[3 * k:3 * k + 3])
                                         for k in range(6)]


@pytest.mark.django_db
def test_the_error_rate_series_from_the_aggregates_equals_the_one_from_the_samples():
    soak = recorded_soak(windows=18, drive_impact=True)
    stored = queries.soak_series(soak, "request_error_rate")["points"]
    SoakWindow.objects.filter(soak=soak).delete()
    scratch = queries.soak_series(soak, "request_error_rate")["points"]
    assert [(p["node"], p["window"], p["value"]) for p in stored] == [
        (p["node"], p["window"], p["value"]) for p in scratch]
    assert max(p["value"] for p in stored) == pytest.approx(5 / 16)
