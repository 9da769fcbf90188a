"""A plan step every node starts at the same time (G3's shared read-back) waits behind a
barrier until every node of the run has reached it, breaks with a one-line reason when one
cannot come, and a gate run with more such nodes than can run at once refuses to start."""

import base64
import threading
import time
from datetime import date

import pytest

from acceptance.models import Credential, Node
from gates.services import GateRefused, engagement_create
from runners.barrier import BarrierBroken, barrier_wait
from runners.dispatch import gate_run_start
from runners.models import BarrierArrival, GateRun, NodeJob
from runners.plans import node_steps

HOST_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(36)).decode()


@pytest.fixture
def workers(settings):
    """As with a broker and workers: tasks are not run in-process one after another."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.NODE_JOB_SLOTS = 128
    return settings


def g3_site(nodes: int):
    engagement = engagement_create(name="barrier-site", customer="Acme",
                                   start_date=date(2026, 9, 1))
    engagement.gates.filter(code__in=["G1", "G2"]).update(state="passed")
    credential = Credential.from_secret("k", "PRIVATE KEY TEXT")
    credential.save()
    for k in range(1, nodes + 1):
        Node.objects.create(engagement=engagement, name=f"gpu-{k:02d}", role=Node.Role.INFERENCE,
                            address=f"10.0.0.{k}", ssh_user="acctest", host_key=HOST_KEY,
                            credential=credential)
    return engagement


def g3_run(engagement) -> GateRun:
    run = GateRun.objects.create(gate=engagement.gates.get(code="G3"), attempt=1,
                                 started_by="engineer", state=GateRun.State.RUNNING)
    NodeJob.objects.bulk_create(NodeJob(gate_run=run, node=n, state=NodeJob.State.RUNNING)
                                for n in engagement.nodes.order_by("name"))
    return run


def job_of(run, name):
    return NodeJob.objects.select_related("node", "gate_run__gate").get(gate_run=run,
                                                                       node__name=name)


def test_the_shared_read_back_starts_behind_the_barrier(db):
    engagement = g3_site(2)
    steps = node_steps(engagement.gates.get(code="G3"), engagement.nodes.get(name="gpu-01"))
    barriers = [(s["probe"], s["labels"]) for s in steps if s.get("barrier") == "readback"]
    assert barriers == [("rdma_counter_series", {"phase": "readback", "arm": "array",
                                                 "round": "1"})]
    after = steps[[s.get("barrier") for s in steps].index("readback") + 1]
    assert (after["probe"], after["labels"]["pass"]) == ("kv_bench_pass", "measured")


def test_it_refuses_a_run_the_site_limit_cannot_hold_at_once(db, workers):
    engagement = g3_site(3)
    engagement.max_parallel_nodes = 2
    engagement.save(update_fields=["max_parallel_nodes"])
    with pytest.raises(GateRefused) as refused:
        gate_run_start(gate=engagement.gates.get(code="G3"), started_by="engineer")
    assert str(refused.value) == (
        "G3 starts its readback step on 3 nodes at the same time, but only 2 node jobs can run "
        "at once (the site's max_parallel_nodes 2; the workers' node-job slots, "
        "ACCEPTANCE_NODE_JOB_SLOTS, 128): raise them to at least 3 before starting it.")
    assert not GateRun.objects.exists()


def test_it_refuses_a_run_the_workers_cannot_hold_at_once(db, workers):
    workers.NODE_JOB_SLOTS = 2
    engagement = g3_site(3)
    with pytest.raises(GateRefused, match="only 2 node jobs can run at once .* slots, "
                                          "ACCEPTANCE_NODE_JOB_SLOTS, 2"):
        gate_run_start(gate=engagement.gates.get(code="G3"), started_by="engineer")
    assert not NodeJob.objects.exists()


def test_a_run_that_fits_starts(db, workers, django_capture_on_commit_callbacks):
    engagement = g3_site(3)
    with django_capture_on_commit_callbacks(execute=False):
        run = gate_run_start(gate=engagement.gates.get(code="G3"), started_by="engineer")
    assert run.node_jobs.count() == 3


def test_g2_has_no_barrier_and_is_not_limited(db, workers, django_capture_on_commit_callbacks):
    workers.NODE_JOB_SLOTS = 1
    engagement = g3_site(3)
    engagement.gates.filter(code="G2").update(state="pending")
    with django_capture_on_commit_callbacks(execute=False):
        run = gate_run_start(gate=engagement.gates.get(code="G2"), started_by="engineer")
    assert run.node_jobs.count() == 3


def test_each_node_waits_until_the_last_arrives(transactional_db, workers):
    engagement = g3_site(3)
    run = g3_run(engagement)
    for name in ("gpu-01", "gpu-02"):
        BarrierArrival.objects.create(gate_run=run, node=job_of(run, name).node,
                                      name="readback")
    last = job_of(run, "gpu-03")

    def arrive_late():
        time.sleep(0.6)
        BarrierArrival.objects.create(gate_run=run, node=last.node, name="readback")

    late = threading.Thread(target=arrive_late)
    late.start()
    try:
        waited = barrier_wait(job=job_of(run, "gpu-01"), name="readback", timeout_s=20)
    finally:
        late.join()
    assert 0.4 < waited < 10
    # the last one through finds everyone there and goes at once
    assert barrier_wait(job=last, name="readback", timeout_s=20) < 0.3


def test_it_breaks_when_a_node_ended_before_arriving(db, workers):
    engagement = g3_site(3)
    run = g3_run(engagement)
    NodeJob.objects.filter(gate_run=run, node__name="gpu-02").update(
        state=NodeJob.State.FAILED, error_kind="unreachable")
    with pytest.raises(BarrierBroken) as broken:
        barrier_wait(job=job_of(run, "gpu-01"), name="readback", timeout_s=20)
    assert str(broken.value) == ("readback: gpu-02 ended failed before reaching the step that "
                                 "every node starts at the same time, so it cannot start "
                                 "together")


def test_it_breaks_after_the_wait_naming_who_is_missing(db, workers):
    engagement = g3_site(3)
    run = g3_run(engagement)
    with pytest.raises(BarrierBroken) as broken:
        barrier_wait(job=job_of(run, "gpu-02"), name="readback", timeout_s=0.3)
    assert str(broken.value) == ("readback: 2 of 3 nodes had not reached the step that every "
                                 "node starts at the same time after 0.3 s (gpu-01, gpu-03)")


def test_it_stops_waiting_at_a_cancel(db, workers):
    from django.utils import timezone

    engagement = g3_site(2)
    run = g3_run(engagement)
    GateRun.objects.filter(id=run.id).update(cancel_requested_at=timezone.now())
    with pytest.raises(BarrierBroken, match="cancelled while waiting"):
        barrier_wait(job=job_of(run, "gpu-01"), name="readback", timeout_s=20)


def test_without_workers_each_node_goes_through_alone(db, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    engagement = g3_site(3)
    run = g3_run(engagement)
    assert barrier_wait(job=job_of(run, "gpu-01"), name="readback", timeout_s=0.1) == 0.0
    assert BarrierArrival.objects.filter(gate_run=run).count() == 1
