"""The run page shows its measurements 200 a page (metric, node as registered, id order) with
the total, and links the next and previous page; the charts read only the figures they draw;
a page that is not one answers 400 naming the parameter."""

import base64
import re
from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners.models import GateRun, Measurement, NodeJob
from runners.pages import MEASUREMENTS_PER_PAGE

HOST_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(36)).decode()
VALUE = re.compile(r'<td class="num" data-sort="([0-9.e+]+)">')


@pytest.fixture
def big_run(db):
    """A finished G2 run on two nodes with 450 temperature readings and 2 read bandwidths."""
    engagement = engagement_create(name="paging-site", customer="Acme",
                                   start_date=date(2026, 9, 1))
    credential = Credential.from_secret("k", "PRIVATE KEY TEXT")
    credential.save()
    nodes = [Node.objects.create(engagement=engagement, name=f"gpu-{k}", role=Node.Role.INFERENCE,
                                 address=f"10.0.0.{k}", ssh_user="acctest", host_key=HOST_KEY,
                                 credential=credential) for k in (1, 2)]
    run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                 state=GateRun.State.DONE, started_by="engineer",
                                 finished_at=timezone.now())
    NodeJob.objects.bulk_create(NodeJob(gate_run=run, node=n, state="done") for n in nodes)
    Measurement.objects.bulk_create(
        Measurement(gate_run=run, node=nodes[i % 2], metric="temperature", value=float(i),
                    unit="K", labels={"device": f"/dev/nvme{i}n1"}) for i in range(450))
    Measurement.objects.bulk_create(
        Measurement(gate_run=run, node=n, metric="read_bandwidth", value=11.0e9, unit="B/s",
                    labels={"job": "seqread"}) for n in nodes)
    return run


def values(response) -> list[float]:
    return [float(v) for v in VALUE.findall(response.content.decode())]


def test_it_pages_the_measurements_two_hundred_at_a_time(big_run, people):
    client = people("Acme").engineer.client
    url = reverse("run-detail", args=[big_run.id])
    first = client.get(url)
    assert first.status_code == 200
    html = first.content.decode()
    assert "452 measurements" in html
    assert "measurements 1–200, page 1 of 3" in html
    assert f'href="{url}?measurements_page=2#measurements"' in html
    assert len(values(first)) == MEASUREMENTS_PER_PAGE == 200
    # metric, node, id: both read bandwidths first, then gpu-1's temperatures (even values)
    assert values(first)[:3] == [11.0e9, 11.0e9, 0.0]
    assert values(first)[2:] == [float(v) for v in range(0, 396, 2)]
    last = client.get(url, {"measurements_page": 3})
    assert "measurements 401–452, page 3 of 3" in last.content.decode()
    assert len(values(last)) == 52
    assert values(last)[-1] == 449.0
    everything = [v for p in (1, 2, 3) for v in values(client.get(url,
                                                                 {"measurements_page": p}))]
    assert sorted(everything) == sorted([11.0e9, 11.0e9] + [float(i) for i in range(450)])


def test_the_charts_do_not_read_the_uncharted_measurements(big_run, people):
    client = people("Acme").engineer.client
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("run-detail", args=[big_run.id]))
    assert 'id="charts"' in page.content.decode()  # the read bandwidths' chart
    chart_reads = [q["sql"] for q in queries.captured_queries
                   if "read_bandwidth" in q["sql"] and "temperature" not in q["sql"]]
    assert chart_reads  # the charts' query names its metrics


@pytest.mark.parametrize("bad", ["4", "0", "two"])
def test_it_refuses_a_page_that_is_not_one(big_run, people, bad):
    response = people("Acme").engineer.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_page": bad})
    assert response.status_code == 400
    assert response.content.decode().startswith("measurements_page: ")
    assert "\n" not in response.content.decode().strip()


def test_a_customer_of_another_organisation_gets_404_on_any_page(big_run, people):
    response = people("Acme").outsider.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_page": 2})
    assert response.status_code == 404


def _g2_run_on(nodes: int, name: str) -> GateRun:
    """A finished G2 run on ``nodes`` inference nodes (G2 reads the array on the first node of
    each array only: the plan's per-node selection is what the page asks for each node)."""
    engagement = engagement_create(name=name, customer="Acme", start_date=date(2026, 9, 1))
    credential = Credential.from_secret(f"k-{name}", "PRIVATE KEY TEXT")
    credential.save()
    made = [Node.objects.create(engagement=engagement, name=f"gpu-{k:03d}",
                                role=Node.Role.INFERENCE, address=f"10.{nodes}.1.{k}",
                                ssh_user="acctest", host_key=HOST_KEY, credential=credential)
            for k in range(1, nodes + 1)]
    run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                 state=GateRun.State.DONE, started_by="engineer",
                                 finished_at=timezone.now())
    NodeJob.objects.bulk_create(NodeJob(gate_run=run, node=n, state="done") for n in made)
    Measurement.objects.bulk_create(
        Measurement(gate_run=run, node=n, metric="read_bandwidth", value=11.0e9, unit="B/s",
                    labels={"job": "seqread"}) for n in made)
    return run


def test_the_run_page_asks_the_same_queries_for_2_or_24_nodes(db, people):
    """The run page's queries do not grow with the nodes (128 nodes asked 258 more before:
    G2's one-reader-per-array step looked up the first node twice per node)."""
    client = people("Acme").engineer.client
    counts, plans = [], []
    for nodes in (2, 24):
        run = _g2_run_on(nodes, f"site-{nodes}")
        url = reverse("run-detail", args=[run.id])
        client.get(url)  # warm the session and content types
        with CaptureQueriesContext(connection) as queries:
            page = client.get(url)
        assert page.status_code == 200
        assert f"gpu-{nodes:03d}" in page.content.decode()
        counts.append(len(queries))
        plans.append(sum(1 for q in queries.captured_queries
                         if 'FROM "acceptance_node"' in q["sql"]))
    assert counts[0] == counts[1], counts
    assert plans[0] == plans[1] <= 3, plans
