"""When a node may be re-run alone, and re-running a passed gate: refusals name what is wrong and
create nothing; a confirmed re-run is audited with who and why. (No node is contacted here: the
dispatch happens on commit, which these transactions never reach.)"""

from datetime import date

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from acceptance.models import AuditEntry, Credential, Node
from gates.services import GateRefused, engagement_create
from runners.dispatch import ConfirmationRequired, gate_run_rerun_node, gate_run_start
from runners.lab import server
from runners.models import GateRun, NodeJob, ProbeRun


def _node(engagement, name, role=Node.Role.INFERENCE):
    credential = Credential.from_secret(f"{engagement.name}-{name}", server.keypair()[0])
    credential.save()
    return Node.objects.create(
        engagement=engagement, name=name, role=role, address="127.0.0.1",
        port=server.free_port(), ssh_user="acctest", host_key=server.keypair()[1],
        credential=credential, interface="ens1f0", fio_target="/dev/nvme1n1")


def _attempt(gate, attempt, states: dict, run_state="failed"):
    """A finished attempt of ``gate``: one job per node in the given state, each with one
    parsed probe run when its job is done."""
    now = timezone.now()
    run = GateRun.objects.create(gate=gate, attempt=attempt, started_by="eng-erin",
                                 state=run_state, finished_at=now)
    for node, state in states.items():
        NodeJob.objects.create(gate_run=run, node=node, state=state, finished_at=now,
                               error_kind="" if state == "done" else "unreachable")
        if state == "done":
            ProbeRun.objects.create(gate_run=run, node=node, probe="fio_seqread", parser="fio",
                                    parser_version="1", command="fio", state="parsed",
                                    started_at=now, finished_at=now, exit_code=0)
    return run


@pytest.fixture
def acme(db):
    engagement = engagement_create(name="acme-rr", customer="ACME", start_date=date(2026, 11, 2))
    engagement.gates.filter(code="G1").update(state="passed")
    a, b = _node(engagement, "gpu-01"), _node(engagement, "gpu-02")
    g2 = engagement.gates.get(code="G2")
    return engagement, g2, a, b


def _refused(match: str, **kwargs):
    runs, audit = GateRun.objects.count(), AuditEntry.objects.count()
    with pytest.raises(GateRefused, match=match):
        gate_run_rerun_node(started_by="eng-erin", **kwargs)
    assert (GateRun.objects.count(), AuditEntry.objects.count()) == (runs, audit)


def test_it_refuses_a_node_re_run_without_a_reason(acme):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "failed", b: "done"})
    _refused("needs a reason", gate_run=run, node_name="gpu-01", reason="   ")


def test_it_refuses_while_the_attempt_is_still_running(acme):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "running", b: "done"}, run_state="running")
    _refused(r"G2 attempt #1 is still running", gate_run=run, node_name="gpu-01",
             reason="node back")


def test_it_refuses_a_superseded_attempt(acme):
    _engagement, g2, a, b = acme
    first = _attempt(g2, 1, {a: "failed", b: "done"})
    _attempt(g2, 2, {a: "failed", b: "done"})
    _refused(r"superseded by attempt #2", gate_run=first, node_name="gpu-01", reason="back")


def test_it_refuses_a_node_the_attempt_did_not_run_on(acme):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "failed", b: "done"})
    _refused(r"no node named 'gpu-09' \(its nodes: gpu-01, gpu-02\)", gate_run=run,
             node_name="gpu-09", reason="back")


def test_it_refuses_when_another_nodes_evidence_is_incomplete(acme):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "failed", b: "failed"})
    _refused(r"not for gpu-02 \(failed: unreachable\)\. Re-run the whole gate", gate_run=run,
             node_name="gpu-01", reason="back")


def test_it_refuses_a_node_whose_role_is_measured_all_at_once(acme):
    engagement, _g2, a, b = acme
    engagement.gates.filter(code="G2").update(state="passed")
    g3 = engagement.gates.get(code="G3")
    run = _attempt(g3, 1, {a: "failed", b: "done"})
    _refused(r"G3 measures every inference node at the same time", gate_run=run,
             node_name="gpu-01", reason="back")


def test_it_refuses_imported_evidence(acme):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "failed", b: "done"})
    GateRun.objects.filter(id=run.id).update(origin="imported")
    _refused("imported evidence", gate_run=run, node_name="gpu-01", reason="back")


def test_a_node_re_run_carries_the_other_nodes_jobs_and_is_audited(acme):
    engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "failed", b: "done"})
    new = gate_run_rerun_node(gate_run=run, node_name="gpu-01", started_by="eng-erin",
                              reason="sshd restarted")
    assert (new.attempt, new.rerun_of, new.rerun_node, new.reason) == (
        2, run, a, "sshd restarted")
    jobs = {j.node.name: j for j in new.node_jobs.all()}
    assert (jobs["gpu-01"].state, jobs["gpu-01"].carried_from) == ("queued", None)
    assert jobs["gpu-02"].state == "done"
    assert jobs["gpu-02"].carried_from == run.node_jobs.get(node=b)
    # Re-running again from the new attempt carries the job that really ran, not a carry.
    GateRun.objects.filter(id=new.id).update(state="failed")
    NodeJob.objects.filter(gate_run=new, node=a).update(state="failed", error_kind="timeout")
    third = gate_run_rerun_node(gate_run=new, node_name="gpu-01", started_by="eng-erin",
                                reason="again")
    assert third.node_jobs.get(node=b).carried_from == run.node_jobs.get(node=b)
    entries = AuditEntry.objects.filter(engagement=engagement, action="node re-run")
    assert [e.details["attempt"] for e in entries] == [2, 3]
    assert entries[0].details["carried"] == {"gpu-02": run.id}


def test_re_running_a_passed_gate_needs_confirmation_and_a_reason(acme):
    engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "done", b: "done"}, run_state="done")
    g2.state = "passed"
    g2.save()
    with pytest.raises(ConfirmationRequired, match="G2 has passed"):
        gate_run_start(gate=g2, started_by="eng-erin")
    with pytest.raises(ConfirmationRequired, match="needs a reason"):
        gate_run_start(gate=g2, started_by="eng-erin", confirmed=True, reason=" ")
    with pytest.raises(ConfirmationRequired):
        gate_run_rerun_node(gate_run=run, node_name="gpu-01", started_by="eng-erin",
                            reason="check")
    assert GateRun.objects.count() == 1 and not AuditEntry.objects.exists()
    new = gate_run_start(gate=g2, started_by="eng-erin", confirmed=True,
                         reason="customer asked for a second round")
    assert new.attempt == 2 and new.reason == "customer asked for a second round"
    entry = AuditEntry.objects.get(action="passed gate re-run")
    assert entry.actor == "eng-erin" and entry.reason == "customer asked for a second round"
    assert entry.details["gate"] == "G2" and entry.details["attempt"] == 2


def test_the_page_asks_for_confirmation_before_re_running_a_passed_gate(acme, people):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "done", b: "done"}, run_state="done")
    g2.state = "passed"
    g2.save()
    engineer = people("ACME").engineer.client
    url = reverse("run-rerun", args=[run.id])
    form = engineer.get(url).content.decode()
    assert 'name="confirm"' in form and "G2 has passed." in form
    refused = engineer.post(url, {"reason": "second round"})
    assert refused.status_code == 200
    assert "Tick the box to confirm" in refused.content.decode()
    no_reason = engineer.post(url, {"confirm": "on"})
    assert "Give a reason" in no_reason.content.decode()
    assert GateRun.objects.count() == 1
    done = engineer.post(url, {"reason": "second round", "confirm": "on"})
    new = GateRun.objects.get(attempt=2)
    assert done.status_code == 302 and done["Location"] == reverse("run-detail", args=[new.id])
    assert new.reason == "second round"
    assert AuditEntry.objects.get(action="passed gate re-run").actor == "eng-erin"
    GateRun.objects.filter(id=new.id).update(state="failed")  # over: the gate may run again
    launch = engineer.post(reverse("gate-run-start", args=["acme-rr", "G2"]), {})
    assert launch.status_code == 200 and "Tick the box to confirm" in launch.content.decode()
    assert GateRun.objects.count() == 2


def test_the_api_needs_an_explicit_confirm_flag_for_a_passed_gate(acme, people):
    _engagement, g2, a, b = acme
    run = _attempt(g2, 1, {a: "done", b: "done"}, run_state="done")
    g2.state = "passed"
    g2.save()
    client = APIClient()
    client.force_authenticate(people("ACME").engineer.user)
    start = "/api/engagements/acme-rr/gates/G2/runs/"
    response = client.post(start, {"reason": "again"}, format="json")
    assert response.status_code == 400 and "G2 has passed" in response.json()["confirm"][0]
    response = client.post(f"/api/gate-runs/{run.id}/rerun/",
                           {"node": "gpu-01", "reason": "again"}, format="json")
    assert response.status_code == 400 and "confirm" in response.json()
    response = client.post(f"/api/gate-runs/{run.id}/rerun/", {"node": "gpu-01"},
                           format="json")
    assert response.status_code == 400 and "reason" in response.json()
    assert GateRun.objects.count() == 1
    response = client.post(f"/api/gate-runs/{run.id}/rerun/",
                           {"node": "gpu-01", "reason": "again", "confirm": True},
                           format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["attempt"], body["rerun_of"], body["rerun_node"], body["reason"]) == (
        2, run.id, "gpu-01", "again")
    assert response["Location"] == f"/api/gate-runs/{body['id']}/"
    conflict = client.post(f"/api/gate-runs/{run.id}/rerun/",
                           {"node": "gpu-01", "reason": "again", "confirm": True},
                           format="json")
    assert conflict.status_code == 409 and "superseded by attempt #2" in conflict.json()[
        "detail"]


def test_run_gate_refuses_a_passed_gate_without_confirm(acme):
    import io

    from django.core.management import call_command

    _engagement, g2, a, b = acme
    _attempt(g2, 1, {a: "done", b: "done"}, run_state="done")
    g2.state = "passed"
    g2.save()
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", "acme-rr", "G2", stdout=io.StringIO(), stderr=err)
    assert exit_info.value.code == 2
    assert "refused: G2 has passed" in err.getvalue() and "--confirm --reason" in err.getvalue()
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", "acme-rr", "G2", "--node", "gpu-01", stdout=io.StringIO(),
                     stderr=err)
    assert exit_info.value.code == 2
    assert "refused: G2 attempt #1: re-running one node needs a reason" in err.getvalue()
    assert GateRun.objects.count() == 1


def test_the_run_page_offers_a_node_re_run_on_the_latest_finished_attempt_only(acme, people):
    _engagement, g2, a, b = acme
    first = _attempt(g2, 1, {a: "failed", b: "done"})
    GateRun.objects.filter(id=first.id).update(
        error="the run did not produce the evidence needed to decide:\ngpu-01: unreachable")
    crowd = people("ACME")
    engineer = crowd.engineer.client
    link = reverse("run-rerun", args=[first.id]) + "?node=gpu-01"
    page = engineer.get(reverse("run-detail", args=[first.id])).content.decode()
    assert page.count(link) == 2  # next to "No decision" and on the node's row
    assert reverse("run-rerun", args=[first.id]) + "?node=gpu-02" not in page  # it did not fail
    second = _attempt(g2, 2, {a: "failed", b: "done"})
    assert "?node=gpu-01" in engineer.get(reverse("run-detail", args=[second.id])).content.decode()
    superseded = engineer.get(reverse("run-detail", args=[first.id])).content.decode()
    assert "?node=" not in superseded
    form = engineer.get(link).content.decode()  # a link kept from before says so at once
    assert "Attempt #1 is superseded by attempt #2" in form and 'name="reason"' not in form
    customer = crowd.customer.client  # never offered to who may not act
    assert "?node=" not in customer.get(reverse("run-detail", args=[second.id])).content.decode()
