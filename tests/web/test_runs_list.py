"""An engagement's "Runs" list: filters by gate, state, who started a run and when
(django-filter), 25 a page, a bad filter or page refused with 400 naming it, for whoever may see
the engagement (another organisation's customer: 404). And the run page's progress: the plan's
total known from the start (probes per node), the elapsed time, each node's state and count."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Array, Credential, Node
from runners.models import GateRun, NodeJob, ProbeRun
from runners.pages import elapsed_text
from tests.web.conftest import G1_MISSING_DRIVE, decide

HOST_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl "
            "node")
DAY = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@pytest.fixture
def runs(engagement_a, engagement_b):
    """ACME: G1 #1 stopped (erin, 20 Nov), G1 #2 failed (pat, 22 Nov), G2 #1 running (erin,
    24 Nov); Globex: G1 #1 (bob)."""
    g1, g2 = engagement_a.gates.get(code="G1"), engagement_a.gates.get(code="G2")
    first = decide(g1, G1_MISSING_DRIVE, "stopped").gate_run
    second = GateRun.objects.create(gate=g1, attempt=2, started_by="pat-pm",
                                    state=GateRun.State.FAILED, error="lost\nmore")
    third = GateRun.objects.create(gate=g2, attempt=1, started_by="erin-engineer",
                                   state=GateRun.State.RUNNING)
    for run, days in ((first, 0), (second, 2), (third, 4)):
        GateRun.objects.filter(id=run.id).update(created_at=DAY + timedelta(days=days))
    GateRun.objects.filter(id=first.id).update(finished_at=DAY + timedelta(minutes=2, seconds=5))
    GateRun.objects.create(gate=engagement_b.gates.get(code="G1"), attempt=1,
                           started_by="bob-globex", state=GateRun.State.DONE)
    return first, second, third


def listed(client, user, query: str = "", name: str = "acme-1"):
    client.force_login(user)
    return client.get(reverse("run-list", args=[name]) + query)


def run_ids(response) -> list[int]:
    return [int(i) for i in re.findall(r'data-run="(\d+)"', response.content.decode())]


def test_it_lists_the_engagements_runs_newest_first(client, pm, runs):
    first, second, third = runs
    response = listed(client, pm)
    assert response.status_code == 200
    assert run_ids(response) == [third.id, second.id, first.id]
    html = response.content.decode()
    assert 'data-sort="125"' in html and "2 min 05 s" in html  # elapsed, sortable as a number
    assert "bob-globex" not in html
    assert 'class="stack sortable"' in html and "runners/sort.js" in html


@pytest.mark.parametrize("query,expected", [
    ("?gate=G1", [1, 0]),
    ("?state=failed", [1]),
    ("?started_by=erin-engineer", [2, 0]),
    ("?started_after=2026-11-21", [2, 1]),
    ("?started_before=2026-11-22", [1, 0]),
    ("?gate=G1&state=done&started_by=erin-engineer", [0]),
    ("?gate=G2&state=failed", []),
])
def test_filters(client, engineer, runs, query, expected):
    response = listed(client, engineer, query)
    assert response.status_code == 200
    assert run_ids(response) == [runs[i].id for i in expected]


@pytest.mark.parametrize("query,message", [
    ("?state=bogus", "state: Select a valid choice. bogus is not one of the available choices."),
    ("?gate=G9", "gate: Select a valid choice. G9 is not one of the available choices."),
    ("?started_after=yesterday", "started_after: Enter a valid date."),
    ("?started_by=bob-globex", "started_by: Select a valid choice."),
    ("?page=99", "page: That page contains no results"),
    ("?page=two", "page: That page number is not an integer"),
])
def test_bad_filters_answer_400_naming_the_field(client, pm, runs, query, message):
    response = listed(client, pm, query)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")


def test_it_pages_by_25_keeping_the_filters(client, pm, engagement_a):
    gate = engagement_a.gates.get(code="G1")
    GateRun.objects.bulk_create(
        GateRun(gate=gate, attempt=n, started_by="erin-engineer", state=GateRun.State.FAILED)
        for n in range(1, 31))
    first = listed(client, pm, "?state=failed")
    assert len(run_ids(first)) == 25
    html = first.content.decode()
    assert "page 1 of 2 (30 runs)" in html and "?state=failed&amp;page=2" in html
    assert len(run_ids(listed(client, pm, "?state=failed&page=2"))) == 5


def test_who_may_see_the_list(client, pm, engineer, customer_a, customer_b, nobody, runs):
    for user, status in ((pm, 200), (engineer, 200), (customer_a, 200), (customer_b, 404),
                         (nobody, 404)):
        assert listed(client, user).status_code == status, user.username
    assert listed(client, customer_b, name="globex-1").status_code == 200
    client.logout()
    assert client.get(reverse("run-list", args=["acme-1"])).status_code == 302


def test_the_engagement_page_links_the_runs_list(client, pm, engagement_a):
    client.force_login(pm)
    html = client.get(reverse("engagement-detail", args=[engagement_a.name])).content.decode()
    assert reverse("run-list", args=[engagement_a.name]) in html


# --- the run page's progress -----------------------------------------------------------------


def test_the_progress_bar_knows_the_plans_total_from_the_start(client, engineer, customer_a,
                                                               customer_b, engagement_a):
    array = Array.objects.create(engagement=engagement_a, serial="FX-0001",
                                 expected_drive_count=24)
    credential = Credential.from_secret("acme-key", "-----BEGIN OPENSSH PRIVATE KEY-----")
    credential.save()
    node = Node.objects.create(engagement=engagement_a, name="fx-ctl", role=Node.Role.ARRAY,
                               address="10.0.0.5", ssh_user="acctest", host_key=HOST_KEY,
                               credential=credential, array=array)
    gate = engagement_a.gates.get(code="G1")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="erin-engineer",
                                 state=GateRun.State.RUNNING)
    GateRun.objects.filter(id=run.id).update(created_at=timezone.now() - timedelta(seconds=75))
    NodeJob.objects.create(gate_run=run, node=node)
    url = reverse("run-detail", args=[run.id])
    client.force_login(engineer)
    html = client.get(url).content.decode()
    # G1 on an array of 24 drives: the inventory, then a self-test and a SMART log per drive.
    assert '<strong id="run-probes">0 / 49</strong>' in html
    assert 'data-finished="0" data-planned="49">0 / 49<' in html
    assert re.search(r'id="run-elapsed" data-seconds="7[5-9]">1 min 1[5-9] s<', html)
    assert 'aria-valuemax="49" aria-valuenow="0"' in html

    ProbeRun.objects.create(gate_run=run, node=node, probe="nvme_inventory", parser="nvme_list",
                            parser_version="1", command="nvme list -o json",
                            started_at=timezone.now(), state=ProbeRun.State.PARSED)
    html = client.get(url).content.decode()
    assert '<strong id="run-probes">1 / 49</strong>' in html and 'title="2 %"' in html
    assert "badge queued" in html  # the node's own state

    # The node found 23 drives and is done: its total is what it ran.
    NodeJob.objects.filter(gate_run=run).update(state=NodeJob.State.DONE)
    html = client.get(url).content.decode()
    assert '<strong id="run-probes">1 / 1</strong>' in html

    client.force_login(customer_a)
    assert client.get(url).status_code == 200
    client.force_login(customer_b)
    assert client.get(url).status_code == 404


def test_elapsed_text():
    assert [elapsed_text(s) for s in (0, 4.9, 125, 3720)] == [
        "0 s", "4 s", "2 min 05 s", "1 h 02 min"]
