"""``cancel_run`` and the node job both kill a cancelled probe's process group: the job reads
the request every second over its open connection, ``cancel_run`` opens a fresh one, so the job
is often first, and the node then answers ``cancel_run`` "absent". The report says what the job
recorded the node saying ("gone") instead of leaving "absent", which also means "never started"."""

from django.utils import timezone

from runners import control
from runners.models import GateRun, ProbeRun
from tests.runners.test_barrier import g3_run, g3_site


def running_probe():
    run = g3_run(g3_site(1))
    GateRun.objects.filter(id=run.id).update(state=GateRun.State.RUNNING)
    probe = ProbeRun.objects.create(
        gate_run=run, node=run.node_jobs.get().node, probe="fio_seqread", parser="fio_json",
        parser_version="1", command="fio", started_at=timezone.now(), remote_token="a" * 32,
        state=ProbeRun.State.RUNNING)
    return run, probe


def test_a_process_its_job_killed_first_is_reported_gone(db, monkeypatch):
    run, probe = running_probe()

    def node_says_absent(target):  # the job got there first and recorded what the node said
        ProbeRun.objects.filter(id=target.id).update(
            state=ProbeRun.State.CANCELLED,
            error="cancelled by eng-bob; remote process group: gone")
        return "absent"

    monkeypatch.setattr(control, "_kill", node_says_absent)
    report = control.gate_run_cancel(gate_run=run, cancelled_by="eng-bob", wait_s=0)
    assert report.killed == [
        f"{probe.node.name}: fio_seqread (probe run {probe.id}): gone (killed by its node job, "
        "which saw the request first)"]


def test_a_process_nobody_killed_stays_absent(db, monkeypatch):
    run, probe = running_probe()
    monkeypatch.setattr(control, "_kill", lambda target: "absent")
    report = control.gate_run_cancel(gate_run=run, cancelled_by="eng-bob", wait_s=0)
    assert report.killed == [f"{probe.node.name}: fio_seqread (probe run {probe.id}): absent"]
