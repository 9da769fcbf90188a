"""Launching a gate from the browser and watching it: on a lab engagement (real sshd nodes,
stand-in tools) with eager Celery, the launch POST runs the whole gate, then redirects to the run
page, which shows every state, the decision, the measurements and the plots; the live fragment
hands out log bytes from the offsets the page holds and stops the polling once the run is over
and its log complete."""

import re
from html import escape

import pytest
from django.urls import reverse
from django.utils import timezone

from gates.models import Gate
from runners.models import GateRun, NodeJob, OutputChunk, ProbeRun

pytestmark = pytest.mark.slow


def launch(client, engagement, code):
    return client.post(reverse("gate-run-start", args=[engagement.name, code]))


def messages_of(response):
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_it_launches_g1_on_a_lab_and_shows_the_finished_run(lab, people):
    engagement, _server = lab("healthy")
    persons = people("Lab")  # lab engagements belong to the organisation "Lab"

    response = launch(persons.engineer.client, engagement, "G1")

    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    assert response.status_code == 302
    assert response["Location"] == reverse("run-detail", args=[run.id])
    assert run.state == "done" and run.started_by == "eng-erin"
    page = persons.engineer.client.get(response["Location"])
    html = page.content.decode()
    assert page.status_code == 200
    assert '<span class="badge done" id="run-state">done</span>' in html
    assert "lab-array-controller" in html and "nvme_inventory" in html
    assert html.count('<span class="badge parsed">parsed</span>') == run.probe_runs.count()
    assert "SIMULATED EVIDENCE" in html  # a lab run is marked, always
    assert '<span class="badge passed">passed</span>' in html  # the decision
    assert "All drives of each array recognised" in html
    assert "drive_count" in html and "&gt;= 24" in html
    # The log is there from the first probe run on, and complete: no polling any more.
    inventory = run.probe_runs.get(probe="nvme_inventory")
    assert escape(inventory.raw()[:60].decode()) in html
    assert "── lab-array-controller · nvme_inventory ──" in html
    assert "hx-trigger" not in html
    assert reverse("run-rerun", args=[run.id]) in html  # engineers may re-run it
    assert reverse("run-cancel", args=[run.id]) not in html  # nothing left to cancel

    customer_page = persons.customer.client.get(response["Location"])
    assert customer_page.status_code == 200 and b"drive_count" in customer_page.content
    assert reverse("run-rerun", args=[run.id]).encode() not in customer_page.content


def test_the_live_fragment_returns_log_bytes_from_the_offset_the_page_holds(lab, people):
    engagement, _server = lab("healthy")
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    engineer = people("Lab").engineer
    launch(engineer.client, engagement, "G2")
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    inventory = run.probe_runs.get(probe="fio_seqread")
    stdout = inventory.raw()
    url = reverse("run-live", args=[run.id])

    response = engineer.client.get(url, {"probe": inventory.id, "out": 100, "err": 0, "pin": 1,
                                         "res": 1})

    html = response.content.decode()
    assert response.status_code == 200
    appended = re.search(r'<div hx-swap-oob="beforeend:#run-log">(.*?)</div>', html, re.S)
    assert appended is not None
    out = re.search(r'<span class="out">(.*?)</span>', appended.group(1), re.S).group(1)
    assert out == escape(stdout[100:].decode(), quote=True)  # from byte 100 on, nothing before
    # Caught up on the pinned run of a finished gate run: no more polling, no results resent.
    assert "hx-trigger" not in html and 'id="run-results"' not in html
    # Asking again from where it ended gives nothing new.
    again = engineer.client.get(url, {"probe": inventory.id, "out": len(stdout),
                                      "err": inventory.stderr_size, "pin": 1, "res": 1})
    assert "hx-swap-oob=\"beforeend" not in again.content.decode()
    bad = engineer.client.get(url, {"probe": inventory.id, "out": -1})
    assert bad.status_code == 400


def test_the_live_fragment_follows_a_running_probe_and_keeps_polling(lab, people):
    """Mid-run (as with a real worker): output stored as chunks is handed out from the offset,
    the next offset goes into the polling URL, and polling goes on while the run does."""
    engagement, _server = lab("healthy")
    engineer = people("Lab").engineer
    gate = engagement.gates.get(code="G1")
    node = engagement.nodes.get(role="array")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="eng-erin", state="running")
    NodeJob.objects.create(gate_run=run, node=node, state="running")
    probe = ProbeRun.objects.create(gate_run=run, node=node, probe="nvme_self_test",
                                    parser="nvme_self_test_log", parser_version="1",
                                    command="nvme device-self-test", started_at=timezone.now(),
                                    progress=42.0)
    OutputChunk.objects.create(probe_run=probe, stream="stdout", offset=0, end=12,
                               data=b"first line\n\n")
    OutputChunk.objects.create(probe_run=probe, stream="stderr", offset=0, end=26,
                               data="self-test progress: 42%\n✓\n".encode()[:26])
    url = reverse("run-live", args=[run.id])

    response = engineer.client.get(url, {"probe": "", "out": 0, "err": 0})

    html = response.content.decode()
    assert 'hx-trigger="every 1s"' in html
    assert "first line" in html and "self-test progress: 42%" in html
    assert 'style="width: 42%"' in html  # the progress bar
    # "✓" is cut in the middle by the chunk: held back until its last byte arrives.
    assert "✓" not in html and "\ufffd" not in html
    assert f"probe={probe.id}&amp;out=12&amp;err=24&amp;pin=0&amp;res=0" in html
    assert reverse("run-cancel", args=[run.id]) in html  # engineers may cancel a running run

    page = engineer.client.get(reverse("run-detail", args=[run.id]))
    assert b'hx-trigger="every 1s"' in page.content and b'id="run-log"' in page.content


def test_it_shows_a_refused_launch_as_a_message_and_creates_nothing(lab, people):
    engagement, _server = lab("healthy")
    engineer = people("Lab").engineer

    response = engineer.client.post(reverse("gate-run-start", args=[engagement.name, "G2"]),
                                    follow=True)

    assert response.status_code == 200
    assert any("Not started, nothing was created" in m and "G1" in m
               for m in messages_of(response))
    assert not GateRun.objects.filter(gate__engagement=engagement).exists()


def test_g2_shows_bandwidth_line_efficiency_and_ttft_plots_and_reruns_as_a_new_attempt(
        lab, people):
    engagement, _server = lab("healthy")
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    engineer = people("Lab").engineer

    response = launch(engineer.client, engagement, "G2")
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    html = engineer.client.get(response["Location"]).content.decode()

    assert run.state == "done"
    assert 'id="chart-bandwidth"' in html and "11.00 GB/s" in html
    assert "line rate 12.50 GB/s" in html
    assert 'id="chart-line-efficiency"' in html and "88.0 %" in html and "83 % line" in html
    assert 'id="chart-ttft"' in html and "R2 17.31 s" in html
    assert html.count('<span class="badge simulated">SIMULATED</span>') == 3  # each plot
    assert "0.880 (88.0 %)" in html  # measurements in the units people read

    # G2 has passed: a re-run needs the confirmation and a reason.
    refused = engineer.client.post(reverse("run-rerun", args=[run.id]), {"reason": "again"})
    assert refused.status_code == 200 and GateRun.objects.filter(gate=run.gate).count() == 1
    rerun = engineer.client.post(reverse("run-rerun", args=[run.id]),
                                 {"reason": "second round", "confirm": "on"}, follow=True)
    second = GateRun.objects.get(gate__engagement=engagement, gate__code="G2", attempt=2)
    assert rerun.redirect_chain[-1][0] == reverse("run-detail", args=[second.id])
    assert any("Attempt #2 of G2 started on every node" in m for m in messages_of(rerun))
    assert second.reason == "second round" and second.rerun_node is None
    assert GateRun.objects.get(id=run.id).state == "done"  # the first attempt stays as it was


def test_cancel_asks_the_runners_to_stop_and_records_who(lab, people):
    engagement, _server = lab("healthy")
    engineer = people("Lab").engineer
    gate = engagement.gates.get(code="G1")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="eng-erin", state="running")
    NodeJob.objects.create(gate_run=run, node=engagement.nodes.get(role="array"))

    response = engineer.client.post(reverse("run-cancel", args=[run.id]), follow=True)

    run.refresh_from_db()
    assert run.state == "cancelled" and run.cancel_requested_by == "eng-erin"
    assert run.node_jobs.get().state == "cancelled"
    assert any("Cancel requested by eng-erin" in m for m in messages_of(response))
    assert b"Cancelled by eng-erin." in response.content
    again = engineer.client.post(reverse("run-cancel", args=[run.id]), follow=True)
    assert any("already over" in m for m in messages_of(again))


def test_the_lab_page_starts_a_scenario_and_goes_to_its_engagement(transactional_db, people):
    engineer = people("Lab").engineer

    response = engineer.client.post(reverse("lab"), {"scenario": "kv-gain", "nodes": 2})

    assert response.status_code == 302
    assert response["Location"] == "/engagements/lab-kv-gain/"
    from acceptance.models import Engagement

    engagement = Engagement.objects.get(name="lab-kv-gain")
    assert engagement.is_lab and engagement.nodes.filter(role="inference").count() == 2
    nodes = engineer.client.get(reverse("node-list", args=["lab-kv-gain"]))
    assert b"lab-inference-2" in nodes.content and b"SHA256:" in nodes.content
    bad = engineer.client.post(reverse("lab"), {"scenario": "no-such", "nodes": 1})
    assert bad.status_code == 200 and b"Select a valid choice" in bad.content
