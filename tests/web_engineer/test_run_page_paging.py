"""The run page shows its measurements 200 a page (metric, node as registered — the service's
own figures without a node after them — id), by keyset: First, Previous, Next and Last links
that visit every measurement once, "rows X–Y of N", the last page directly; a cursor the page
did not give answers 400 naming the parameter."""

import base64
import json
import re
from datetime import date
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.pages import MEASUREMENTS_PER_PAGE

HOST_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(36)).decode()
VALUE = re.compile(r'<td class="num" data-sort="([0-9.e+-]+)">')
LINK = re.compile(r'<a href="([^"]+)"(?: rel="\w+")?>(First|Previous|Next|Last)</a>')


@pytest.fixture
def big_run(db):
    """A finished G2 run on two nodes with 450 temperature readings (value i on gpu-1 for even
    i, gpu-2 for odd), two read bandwidths, and the service's own figures without a node: two
    temperatures (1000, 1001) and two baseline deviations (0.5, 0.25). 456 rows, every value
    distinct, so a value names its row."""
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
        Measurement(gate_run=run, node=n, metric="read_bandwidth", value=v, unit="B/s",
                    labels={"job": "seqread"})
        for n, v in zip(nodes, (11.0e9, 11.5e9), strict=True))
    Measurement.objects.bulk_create(
        [Measurement(gate_run=run, node=None, metric="temperature", value=v, unit="K",
                     derived=True) for v in (1000.0, 1001.0)]
        + [Measurement(gate_run=run, node=None, metric="baseline_deviation", value=v,
                       unit="ratio", derived=True) for v in (0.5, 0.25)])
    return run


# metric, node as registered (none last), id
IN_ORDER = ([0.5, 0.25, 11.0e9, 11.5e9] + [float(i) for i in range(0, 450, 2)]
            + [float(i) for i in range(1, 450, 2)] + [1000.0, 1001.0])


def values(response) -> list[float]:
    """The values of the measurements table (the page has other numeric cells)."""
    html = response.content.decode()
    if 'id="measurements"' not in html:
        return []
    card = html[html.index('id="measurements"'):]
    return [float(v) for v in VALUE.findall(card[:card.index("</details>")])]


def links(response) -> dict[str, str]:
    return {word: unescape(href) for href, word in LINK.findall(response.content.decode())}


def test_it_pages_the_measurements_two_hundred_at_a_time(big_run, people):
    client = people("Acme").engineer.client
    url = reverse("run-detail", args=[big_run.id])
    first = client.get(url)
    assert first.status_code == 200
    html = first.content.decode()
    assert "456 measurements" in html
    assert "rows 1–200 of 456" in html
    assert set(links(first)) == {"Next", "Last"}
    assert links(first)["Next"].startswith(f"{url}?measurements_cursor=")
    assert len(values(first)) == MEASUREMENTS_PER_PAGE == 200
    assert values(first) == IN_ORDER[:200]


def test_following_the_links_visits_every_measurement_once_both_ways(big_run, people):
    client = people("Acme").engineer.client
    page = client.get(reverse("run-detail", args=[big_run.id]))
    forward, shown = [], []
    while True:
        assert page.status_code == 200
        forward += values(page)
        shown.append(re.search(r"rows (\d+)–(\d+) of 456", page.content.decode()).groups())
        if "Next" not in links(page):
            break
        page = client.get(links(page)["Next"])
    assert forward == IN_ORDER
    assert shown == [("1", "200"), ("201", "400"), ("401", "456")]
    assert set(links(page)) == {"First", "Previous"}
    backward = []
    while True:
        backward = values(page) + backward
        if "Previous" not in links(page):
            break
        page = client.get(links(page)["Previous"])
    assert backward == IN_ORDER
    assert "rows 1–200 of 456" in page.content.decode()
    assert set(links(page)) == {"Next", "Last"}


def test_the_last_page_directly_and_back_from_it(big_run, people):
    client = people("Acme").engineer.client
    url = reverse("run-detail", args=[big_run.id])
    last = client.get(url, {"measurements_cursor": "last"})
    assert last.status_code == 200
    assert values(last) == IN_ORDER[-200:]
    assert "rows 257–456 of 456" in last.content.decode()
    assert set(links(last)) == {"First", "Previous"}
    assert links(last)["First"] == f"{url}#measurements"
    before = client.get(links(last)["Previous"])
    assert values(before) == IN_ORDER[56:256]
    assert "rows 57–256 of 456" in before.content.decode()
    assert values(client.get(links(before)["Previous"])) == IN_ORDER[:56]
    assert values(client.get(links(before)["Next"])) == IN_ORDER[256:]


def _token(payload) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize("bad", [
    "two", "e30", _token(["a", "temperature", 1]), _token(["x", "temperature", 1, 5]),
    _token(["a", "temperature", "1", 5]), _token(["a", "temperature", 1, 2**63]),
    _token(["b", "", None, 5]), _token(["a", "t" * 65, None, 5]),
    _token(["a", "temperature", 1.5, 5]), _token(["a", "temperature", None, None]),
    _token(["a", "temperature", True, 5]), _token(["a", "temp\x00", None, 5]),
    _token(["a", "temp\ud800", None, 5]),
    _token([[[[["a"]]]]] * 20), "A" * 600, "%%%"])
def test_it_refuses_a_cursor_it_did_not_give(big_run, people, bad):
    response = people("Acme").engineer.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_cursor": bad})
    assert response.status_code == 400
    text = response.content.decode()
    assert text.startswith("measurements_cursor: not a cursor of this page")
    assert "\n" not in text.strip()


def test_a_numbered_page_of_before_is_refused_with_the_way_now(big_run, people):
    response = people("Acme").engineer.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_page": "2"})
    assert response.status_code == 400
    assert response.content.decode().startswith("measurements_page: ")
    assert "Next" in response.content.decode()


def test_a_cursor_past_the_end_shows_no_rows_and_the_way_back(big_run, people):
    client = people("Acme").engineer.client
    url = reverse("run-detail", args=[big_run.id])
    page = client.get(url, {"measurements_cursor": _token(["a", "zz", None, 1])})
    assert page.status_code == 200
    assert values(page) == []
    assert set(links(page)) == {"First"}


def test_every_page_is_a_walk_of_the_run_index_not_an_offset(big_run, people):
    client = people("Acme").engineer.client
    url = reverse("run-detail", args=[big_run.id])
    page = client.get(url)
    page = client.get(links(page)["Next"])
    with CaptureQueriesContext(connection) as queries:
        client.get(links(page)["Next"])
    reads = [q["sql"] for q in queries.captured_queries
             if 'FROM "runners_measurement"' in q["sql"] and "LIMIT" in q["sql"]]
    assert reads and not any("OFFSET" in sql for sql in reads)


def test_the_charts_do_not_read_the_uncharted_measurements(big_run, people):
    client = people("Acme").engineer.client
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("run-detail", args=[big_run.id]))
    assert 'id="charts"' in page.content.decode()  # the read bandwidths' chart
    chart_reads = [q["sql"] for q in queries.captured_queries
                   if "read_bandwidth" in q["sql"] and "temperature" not in q["sql"]]
    assert chart_reads  # the charts' query names its metrics


def test_a_customer_of_another_organisation_gets_404_on_any_page(big_run, people):
    response = people("Acme").outsider.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_cursor": "last"})
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


def test_a_re_run_pages_its_own_and_the_carried_measurements_in_one_order(big_run, people):
    """A per-node re-run (attempt 2 on gpu-1) carries gpu-2's read figures from attempt 1: the
    pages merge both runs' rows in one order, each once, with the carried ones marked."""
    gpu1, gpu2 = Node.objects.filter(engagement=big_run.gate.engagement).order_by("id")
    probe = ProbeRun.objects.create(gate_run=big_run, node=gpu2, probe="nvme_smart",
                                    parser="nvme_smart", parser_version="1", command="smart",
                                    started_at=timezone.now(), state="parsed")
    Measurement.objects.filter(gate_run=big_run, node=gpu2).update(probe_run=probe)
    rerun = GateRun.objects.create(gate=big_run.gate, attempt=2, state=GateRun.State.DONE,
                                   started_by="engineer", finished_at=timezone.now(),
                                   rerun_of=big_run, rerun_node=gpu1)
    NodeJob.objects.create(gate_run=rerun, node=gpu1, state="done")
    NodeJob.objects.create(gate_run=rerun, node=gpu2, state="done",
                           carried_from=NodeJob.objects.get(gate_run=big_run, node=gpu2))
    Measurement.objects.bulk_create(
        Measurement(gate_run=rerun, node=gpu1, metric="temperature", value=2000.0 + i, unit="K")
        for i in range(150))
    Measurement.objects.create(gate_run=rerun, node=None, metric="baseline_deviation",
                               value=0.125, unit="ratio", derived=True)
    expected = ([0.125, 11.5e9] + [2000.0 + i for i in range(150)]
                + [float(i) for i in range(1, 450, 2)])
    client = people("Acme").engineer.client
    page = client.get(reverse("run-detail", args=[rerun.id]))
    assert f"{len(expected)} measurements" in page.content.decode()
    seen = values(page)
    while "Next" in links(page):
        page = client.get(links(page)["Next"])
        seen += values(page)
    assert seen == expected
    assert "carried from attempt #1" in page.content.decode()
    last = client.get(reverse("run-detail", args=[rerun.id]), {"measurements_cursor": "last"})
    assert values(last) == expected[-200:]
    assert values(client.get(links(last)["Previous"])) == expected[:-200]


def test_a_page_past_the_end_offers_no_previous_link_to_itself(big_run, people):
    client = people("Acme").engineer.client
    past = _token(["a", "zzz", None, 2**62])  # after every metric: an empty page
    response = client.get(reverse("run-detail", args=[big_run.id]),
                          {"measurements_cursor": past})
    assert response.status_code == 200
    assert values(response) == []
    assert 'href=""' not in response.content.decode()
    assert "First" in links(response)


def test_a_bad_cursor_is_refused_while_the_run_is_not_over(big_run, people):
    GateRun.objects.filter(id=big_run.id).update(state=GateRun.State.RUNNING, finished_at=None)
    response = people("Acme").engineer.client.get(
        reverse("run-detail", args=[big_run.id]), {"measurements_cursor": "two"})
    assert response.status_code == 400
    assert response.content.decode().startswith("measurements_cursor: not a cursor of this page")
