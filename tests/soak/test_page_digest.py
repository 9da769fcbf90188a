"""What the soak page reads is folded once at collection (``runners.soak.digest``): its query
count grows neither with the windows nor with the nodes, the chart buckets show each bucket's
worst window, and the folded reads (chart buckets, latest answers, fault checks) equal what the
page would find from the ledger itself."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from acceptance.models import Node
from runners.models import Measurement
from runners.soak import charts, presentation, queries
from runners.soak.digest import digest_rebuild, window_values
from runners.soak.evaluation import soak_checks_update, soak_windows_rebuild, soak_windows_stored
from runners.soak.models import Soak, SoakAgent, SoakChartBucket, SoakWindow

from .pages_fixtures import personas, recorded_soak


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


def with_nodes(soak: Soak, extra: int) -> Soak:
    """``soak`` with ``extra`` more inference nodes, each a copy of the first node's rows
    (windows and answers), folded again as the collection folds them."""
    agent = soak.agents.get()
    rows = list(Measurement.objects.filter(gate_run_id=soak.gate_run_id, node=agent.node,
                                           derived=False))
    for k in range(extra):
        node = Node.objects.get(pk=agent.node_id)
        node.pk, node.name = None, f"lab-inference-{k + 2}"
        node.save()
        SoakAgent.objects.create(soak=soak, node=node, remote_dir=f"/tmp/soak-x/n{k + 2}",
                                 token=f"t{k}", state="running", simulated=True,
                                 last_window=agent.last_window)
        Measurement.objects.bulk_create([Measurement(
            gate_run_id=soak.gate_run_id, node=node, metric=m.metric, value=m.value,
            unit=m.unit, labels=m.labels, sampled_at=m.sampled_at) for m in rows])
    SoakWindow.objects.filter(soak=soak).delete()
    Soak.objects.filter(id=soak.id).update(chart_bucket_windows=0)
    soak.refresh_from_db()
    soak_windows_rebuild(soak)
    soak_checks_update(soak=soak)
    soak.refresh_from_db()
    return soak


@pytest.mark.django_db
def test_page_and_poll_query_counts_grow_neither_with_windows_nor_with_nodes():
    people = personas("ACME")
    soaks = [recorded_soak(windows=18, name="acme-small"),
             recorded_soak(windows=36, name="acme-long"),
             with_nodes(recorded_soak(windows=36, name="acme-wide"), 3)]
    assert SoakWindow.objects.filter(soak=soaks[2]).count() == 4 * 36
    assert SoakChartBucket.objects.filter(soak=soaks[2]).count() == 4 * 36
    for name in ("soak-detail", "soak-live"):
        counts = [queries_of(people.engineer.client, reverse(name, args=[soak.id]))
                  for soak in soaks]
        assert counts[0] == counts[1] == counts[2], (name, counts)
        assert counts[0] < 60, (name, counts)
    wide = people.engineer.client.get(reverse("soak-detail", args=[soaks[2].id])).content
    assert b"lab-inference-4" in wide  # every node is drawn and listed


@pytest.mark.django_db
def test_a_chart_bucket_shows_the_worst_window_of_its_windows():
    soak = recorded_soak(windows=18, drive_impact=True)
    Soak.objects.filter(id=soak.id).update(chart_bucket_windows=4)
    soak.refresh_from_db()
    digest_rebuild(soak)
    windows = soak_windows_stored(soak)
    series = queries.soak_chart_series(soak)
    assert series is not None
    for metric, low_is_worse in (("ttft_p99", False), ("output_throughput", True),
                                 ("request_error_rate", False), ("completion_gap_max", False)):
        points = series[metric]["points"]
        assert len(points) == 5  # windows 1-4, 5-8, 9-12, 13-16, 17-18
        for point in points:
            bucket = (int(point["window"]) - 1) // 4
            members = [(window_values(w)[metric], w.index) for w in windows
                       if (w.index - 1) // 4 == bucket]
            worst = (min if low_is_worse else max)(v for v, _i in members)
            assert point["value"] == worst
            assert int(point["window"]) == min(i for v, i in members if v == worst)
            assert point["windows"] == len(members)
    errors = series["request_error_rate"]["points"]
    assert max(p["value"] for p in errors) == pytest.approx(5 / 16)  # windows 9-11


@pytest.mark.django_db
def test_the_folded_reads_equal_what_the_ledger_gives():
    soak = recorded_soak(windows=18, drive_impact=True)
    folded = presentation.correctness_latest(soak)
    folded_faults = queries.soak_fault_rows(soak)
    assert any(row["last_mismatch"] == "diverges at token 5" for row in folded)
    assert soak.fault_checks is not None and folded_faults[0]["verdict"] in ("pass", "fail")
    # an agent whose answers were collected before the fold existed: the ledger is read
    SoakAgent.objects.filter(soak=soak).update(answers_latest=None,
                                               offsets={"probes.jsonl": 4096})
    Soak.objects.filter(id=soak.id).update(fault_checks=None)
    soak.refresh_from_db()
    assert presentation.correctness_latest(soak) == folded
    assert queries.soak_fault_rows(soak) == folded_faults
    # the charts from the buckets equal the unbounded series from the window aggregates
    series = queries.soak_chart_series(soak)
    assert series is not None
    for metric in series:
        assert [(p["node"], p["window"], p["value"]) for p in series[metric]["points"]] == [
            (p["node"], p["window"], p["value"])
            for p in queries.soak_series(soak, metric)["points"]]


def test_a_chart_marks_its_points_only_while_they_are_few():
    def svg(nodes: int, per_node: int) -> str:
        points = [{"epoch": 100.0 + i, "value": 0.3 + 0.01 * (i % 3), "node": f"n{n:03d}"}
                  for n in range(nodes) for i in range(per_node)]
        return charts.series_svg({"metric": "ttft_p99", "unit": "s", "points": points},
                                 title="TTFT p99", axis=charts.Axis(start=100.0, end=200.0))

    few = svg(4, 18)
    assert few.count("<circle") == 72 and few.count("<polyline") == 4
    many = svg(128, 19)  # a 128-node soak's bounded chart: lines only, one per node
    assert many.count("<circle") == 0 and many.count("<polyline") == 128
