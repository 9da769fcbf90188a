"""A run's node jobs are claimed for sending in batches (issue 17: one statement for as many as
the site's limit leaves room for, not three statements a node), each job sent once and in node
order; a broker that refuses a send leaves that job and the ones after it unsent again."""

import pytest
from django.utils import timezone

from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners import dispatch
from runners.doorbell import BrokerUnavailable
from runners.models import GateRun, NodeJob


def _run(nodes: int, *, limit: int = 128) -> GateRun:
    engagement = engagement_create(name="site", customer="Org", start_date=timezone.localdate())
    engagement.max_parallel_nodes = limit
    engagement.save(update_fields=["max_parallel_nodes"])
    credential = Credential.objects.create(name="c", private_key_encrypted=b"x")
    run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                 started_by="t", state=GateRun.State.RUNNING)
    for n in range(nodes):
        node = Node.objects.create(engagement=engagement, name=f"n{n:03d}", role="inference",
                                   address="127.0.0.1", port=22, ssh_user="root",
                                   host_key="ssh-ed25519 " + "A" * 68, credential=credential)
        NodeJob.objects.create(gate_run=run, node=node)
    return run


@pytest.fixture
def rung(monkeypatch):
    """The ids rung, as a broker (not in-process) would take them."""
    sent: list[int] = []
    monkeypatch.setattr(dispatch, "rings_in_process", lambda: False)
    monkeypatch.setattr(dispatch, "ring", lambda name, *, node_job_id: sent.append(node_job_id))
    return sent


def test_every_job_within_the_limit_is_sent_once_in_node_order(db, rung):
    run = _run(5, limit=3)
    ids = list(run.node_jobs.order_by("id").values_list("id", flat=True))
    assert dispatch.node_jobs_dispatch(gate_run_id=run.id) == 3
    assert rung == ids[:3]
    assert dispatch.node_jobs_dispatch(gate_run_id=run.id) == 0  # the limit holds
    sent = run.node_jobs.filter(dispatched_at__isnull=False)
    assert sorted(sent.values_list("id", "sends")) == [(i, 1) for i in ids[:3]]
    NodeJob.objects.filter(id=ids[0]).update(state=NodeJob.State.DONE)
    assert dispatch.node_jobs_dispatch(gate_run_id=run.id) == 1  # one ended: one more
    assert rung == ids[:4]


def test_a_job_already_sent_or_settled_is_not_claimed_again(db, rung):
    run = _run(4)
    ids = list(run.node_jobs.order_by("id").values_list("id", flat=True))
    NodeJob.objects.filter(id=ids[0]).update(dispatched_at=timezone.now(), sends=1)
    NodeJob.objects.filter(id=ids[1]).update(state=NodeJob.State.FAILED)
    assert dispatch._jobs_claim(run.id, 10) == ids[2:]
    assert dispatch._jobs_claim(run.id, 10) == []
    assert NodeJob.objects.get(id=ids[0]).sends == 1
    assert NodeJob.objects.get(id=ids[1]).dispatched_at is None


def test_a_refused_send_leaves_that_job_and_the_rest_unsent(db, monkeypatch):
    run = _run(4)
    ids = list(run.node_jobs.order_by("id").values_list("id", flat=True))
    sent: list[int] = []

    def ring(name, *, node_job_id):
        if len(sent) == 2:
            raise BrokerUnavailable("the task broker is not answering (refused)")
        sent.append(node_job_id)

    monkeypatch.setattr(dispatch, "rings_in_process", lambda: False)
    monkeypatch.setattr(dispatch, "ring", ring)
    with pytest.raises(BrokerUnavailable) as refused:
        dispatch.node_jobs_dispatch(gate_run_id=run.id)
    assert refused.value.gate_run_id == run.id
    assert sent == ids[:2]
    jobs = {j.id: j for j in run.node_jobs.all()}
    assert [(jobs[i].dispatched_at is not None, jobs[i].sends) for i in ids] == [
        (True, 1), (True, 1), (False, 0), (False, 0)]


def test_in_process_jobs_are_claimed_one_at_a_time(db, monkeypatch):
    """In-process a ring runs the job inside it: the next is claimed only after it ran."""
    run = _run(3)
    marked_before_ring: list[int] = []

    def ring(name, *, node_job_id):
        marked_before_ring.append(run.node_jobs.filter(dispatched_at__isnull=False).count())
        NodeJob.objects.filter(id=node_job_id).update(state=NodeJob.State.DONE)

    monkeypatch.setattr(dispatch, "rings_in_process", lambda: True)
    monkeypatch.setattr(dispatch, "ring", ring)
    assert dispatch.node_jobs_dispatch(gate_run_id=run.id) == 3
    assert marked_before_ring == [1, 2, 3]
