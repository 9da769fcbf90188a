"""The measurements list pages by cursor (keyset on id): every row exactly once in id order,
the same few queries on a deep page as on the first, no count, and a refused cursor or page
size named in a one-line 400."""

from urllib.parse import parse_qs, urlparse

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runners.models import Measurement


@pytest.fixture
def many(ledger):
    """250 more measurements on the ledger's run (252 in all, with the fixture's two)."""
    Measurement.objects.bulk_create(
        Measurement(gate_run=ledger.gate_run, probe_run=ledger.probe_run,
                    node=ledger.probe_run.node, metric="temperature", value=300.0 + i,
                    unit="K", labels={"device": f"/dev/nvme{i}n1"})
        for i in range(250))
    return ledger


def pages(client, url: str) -> list[dict]:
    bodies = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        bodies.append(response.json())
        url = bodies[-1]["next"]
    return bodies


def test_it_walks_every_measurement_once_in_id_order(many, client_for):
    bodies = pages(client_for("pm"), "/api/measurements/?limit=100")
    assert [len(b["results"]) for b in bodies] == [100, 100, 52]
    ids = [m["id"] for b in bodies for m in b["results"]]
    assert ids == sorted(Measurement.objects.values_list("id", flat=True))
    assert "count" not in bodies[0]
    assert bodies[0]["previous"] is None and bodies[1]["previous"] is not None


def test_it_goes_back_with_the_previous_link(many, client_for):
    client = client_for("pm")
    first, second = pages(client, "/api/measurements/?limit=100")[:2]
    back = client.get(second["previous"]).json()
    assert [m["id"] for m in back["results"]] == [m["id"] for m in first["results"]]


def test_it_keeps_the_filters_across_pages(many, client_for):
    bodies = pages(client_for("pm"), "/api/measurements/?metric=temperature&limit=100")
    values = [m["value"] for b in bodies for m in b["results"]]
    assert values == [300.0 + i for i in range(250)]
    assert all("metric=temperature" in b["next"] for b in bodies[:-1])


def test_a_deep_page_costs_the_queries_of_the_first(many, client_for):
    client = client_for("pm")
    urls, url = [], "/api/measurements/?limit=10"
    while url:
        urls.append(url)
        url = client.get(url).json()["next"]
    counts = []
    for url in (urls[0], urls[-1]):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
        assert not any("COUNT(" in q["sql"].upper() or "OFFSET" in q["sql"].upper()
                       for q in queries.captured_queries
                       if "measurement" in q["sql"].lower())
    assert counts[0] == counts[1]


def test_a_customer_pages_only_their_own(many, client_for):
    foreign = client_for("foreign").get("/api/measurements/").json()
    assert foreign["results"] == [] and foreign["next"] is None
    mine = pages(client_for("customer"), "/api/measurements/?limit=1000")
    assert len(mine[0]["results"]) == 252


def test_it_caps_the_page_size(many, client_for):
    body = client_for("pm").get("/api/measurements/?limit=5000").json()
    assert len(body["results"]) == 252  # max_page_size 1000 ≥ every row here
    assert len(client_for("pm").get("/api/measurements/?limit=7").json()["results"]) == 7


def test_it_refuses_a_forged_cursor_in_one_line(many, client_for):
    response = client_for("pm").get("/api/measurements/?cursor=not-a-cursor")
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid cursor"}


def test_the_next_link_carries_only_an_opaque_cursor(many, client_for):
    body = client_for("pm").get("/api/measurements/?limit=100").json()
    query = parse_qs(urlparse(body["next"]).query)
    assert set(query) == {"cursor", "limit"}


def test_the_written_rows_are_what_the_declared_fields_give(many, client_for):
    """``MeasurementSerializer`` writes its rows directly (for CPU); they must be exactly what
    DRF's declared fields give, for a plain row, one with a sample time and a derived figure
    with no node and two inputs."""
    from datetime import UTC, datetime

    from acceptance.api.serializers import MeasurementSerializer

    plain = Measurement.objects.filter(metric="temperature").order_by("id")[:2]
    timed = Measurement.objects.create(
        gate_run=many.gate_run, probe_run=many.probe_run, node=many.probe_run.node,
        metric="ttft_p50", value=0.125, unit="s", labels={"round": "1"}, arm="array",
        sampled_at=datetime(2026, 12, 3, 7, 45, 1, 250000, tzinfo=UTC))
    derived = Measurement.objects.create(gate_run=many.gate_run, metric="line_efficiency",
                                         value=1, unit="ratio", derived=True)
    derived.inputs.set(plain)
    rows = Measurement.objects.select_related("node").prefetch_related("inputs").filter(
        id__in=[plain[0].id, timed.id, derived.id]).order_by("id")
    serializer = MeasurementSerializer()
    for row in rows:
        assert serializer.to_representation(row) == serializer.declared_representation(row)
    written = {m["id"]: m for b in pages(client_for("pm"), "/api/measurements/?limit=1000")
               for m in b["results"]}
    assert written[derived.id]["inputs"] == [p.id for p in plain]
    assert written[derived.id]["node"] is None and written[derived.id]["value"] == 1.0
    assert written[timed.id]["sampled_at"] == "2026-12-03T07:45:01.250000Z"
