"""The measurements list pages by cursor (keyset on id): every row exactly once in id order,
the same few queries on a deep page as on the first, no count, and a refused cursor or page
size named in a one-line 400; rows inserted while a client pages never shift its pages."""

import base64
import re
from urllib.parse import parse_qs, quote, urlparse

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


def cursor_of(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("cursor", ["not-a-cursor", cursor_of("p=abc"), cursor_of("p=1e3"),
                                    cursor_of(f"p={2**63}"), cursor_of("o=-1&p=5"),
                                    cursor_of("r=x&p=5"), "\x00", " ", "", "cD0x\x00"])
def test_it_refuses_a_forged_cursor_in_one_line(many, client_for, cursor):
    response = client_for("pm").get(f"/api/measurements/?cursor={quote(cursor)}")
    assert response.status_code == 400
    assert response.json() == {
        "cursor": "not a cursor of this list: follow the next or previous link as given"}


@pytest.mark.parametrize("limit", ["0", "-5", "ten", "2.5"])
def test_it_refuses_a_page_size_that_is_not_a_whole_number_in_one_line(many, client_for,
                                                                       limit):
    response = client_for("pm").get(f"/api/measurements/?limit={limit}")
    assert response.status_code == 400
    assert response.json() == {"limit": f"expected a whole number 1 … 1000, not '{limit}'"}


def test_a_cursor_whose_row_is_gone_still_pages_after_it(many, client_for):
    """A cursor's position is an id, not a row: the next page starts after it even when that
    row was deleted since (with its run)."""
    ids = sorted(Measurement.objects.values_list("id", flat=True))
    first = client_for("pm").get("/api/measurements/?limit=10").json()
    Measurement.objects.filter(id=ids[9]).delete()
    second = client_for("pm").get(first["next"]).json()
    assert [m["id"] for m in second["results"]] == ids[10:20]


def test_pages_stay_stable_while_measurements_are_inserted(many, client_for):
    """Rows stored while a client pages (a run still measuring) never shift the pages: every
    row that was there is read exactly once, in id order, and the new rows come at the end."""
    client = client_for("pm")
    before = sorted(Measurement.objects.values_list("id", flat=True))
    seen, url, inserted = [], "/api/measurements/?limit=40", 0
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [m["id"] for m in body["results"]]
        url = body["next"]
        if inserted < 3:  # between pages: 30 new rows, then the next page
            Measurement.objects.bulk_create(
                Measurement(gate_run=many.gate_run, probe_run=many.probe_run,
                            node=many.probe_run.node, metric="temperature", value=400.0 + i,
                            unit="K", labels={}) for i in range(30))
            inserted += 1
    assert len(seen) == len(set(seen)) == len(before) + 90
    assert seen == sorted(seen)
    assert seen[:len(before)] == before
    # the previous link of a page read after the inserts still gives the page before it
    pages_ = pages(client, "/api/measurements/?limit=40")
    back = client.get(pages_[3]["previous"]).json()
    assert [m["id"] for m in back["results"]] == [m["id"] for m in pages_[2]["results"]]


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


def test_no_page_query_joins_up_to_the_engagement(many, client_for):
    """Staff see every engagement: their page is the measurements (and nodes) alone; a
    customer's is limited to the ids of their runs, read first. Either way the database walks
    the primary key to the page's rows whatever its statistics say (joined up to the
    engagement, a first page at 1 M rows before ANALYZE sorted every row of the runs)."""
    own_runs = {many.gate_run.id}
    for role, runs in (("pm", None), ("engineer", None), ("customer", own_runs)):
        with CaptureQueriesContext(connection) as queries:
            assert client_for(role).get("/api/measurements/?limit=10&metric=temperature"
                                        ).status_code == 200
        page = [q["sql"] for q in queries.captured_queries
                if q["sql"].lstrip().startswith('SELECT "runners_measurement"."id"')]
        assert len(page) == 1
        assert "acceptance_engagement" not in page[0] and "gates_gate" not in page[0], role
        limited = re.search(r'"gate_run_id" IN \(([0-9, ]+)\)', page[0])
        assert (runs is None) == (limited is None), (role, page[0])
        if runs is not None:
            assert {int(i) for i in limited.group(1).split(",")} == runs
