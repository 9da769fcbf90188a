"""The shared read-back's plan values (``planned_nodes``, ``min_overlap_s`` of G3's
``shared_readback`` step) that the plan cannot run with: the launch is refused in one line
naming the step and the value, before any run is created (a worker used to raise PlanError
and the job was declared lost after its heartbeat ran out). A plan changed after its launch
was checked fails the node's job naming the step. Through ``manage.py run_gate`` on a real
lab (sshd on loopback)."""

from __future__ import annotations

import pytest

from gates.models import Gate
from runners import dispatch
from runners.execution import node_job_execute
from runners.models import GateRun, NodeJob
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow


def _readback_set(gate: Gate, **values) -> None:
    for step in gate.probe_plan:
        if step.get("expand") == "shared_readback":
            step.update(values)
    gate.save(update_fields=["probe_plan"])


@pytest.mark.parametrize(("values", "says"), [
    ({"planned_nodes": 0}, "planned_nodes must be a whole number 1 … 4096, not 0"),
    ({"planned_nodes": -2}, "planned_nodes must be a whole number 1 … 4096, not -2"),
    ({"planned_nodes": "8"}, "planned_nodes must be a whole number 1 … 4096, not '8'"),
    ({"planned_nodes": 2.5}, "planned_nodes must be a whole number 1 … 4096, not 2.5"),
    ({"min_overlap_s": 0}, "min_overlap_s must be seconds above 0 (at most 86400), not 0"),
    ({"min_overlap_s": "x"}, "min_overlap_s must be seconds above 0 (at most 86400), not 'x'"),
    ({"min_overlap_s": 1e9}, "min_overlap_s must be seconds above 0 (at most 86400), "
                             "not 1000000000.0"),
])
def test_a_readback_plan_it_cannot_run_is_refused_at_launch(lab, values, says):
    engagement, _ = lab("healthy")
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    g3 = engagement.gates.get(code="G3")
    _readback_set(g3, **values)
    code, out, err = run_gate(engagement.name, "G3")
    assert code != 0 and out == ""
    assert err.splitlines() == [f"error: G3's probe plan: shared_readback: {says}"], err
    assert not GateRun.objects.filter(gate=g3).exists()


def test_more_planned_nodes_than_the_lab_has_runs_and_cannot_count(lab):
    """9 planned of 1: a plan the run can follow; the figure cannot count, naming the counts,
    and the run ends without a decision (never a pass)."""
    engagement, _ = lab("healthy")
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    g3 = engagement.gates.get(code="G3")
    _readback_set(g3, planned_nodes=9)
    code, out, err = run_gate(engagement.name, "G3")
    assert code == 2, out + err
    assert ("cannot count: 1 of the 9 planned nodes read back from LAB-HEALTHY "
            "(lab-inference-1)") in err


def test_a_plan_changed_after_launch_fails_the_job_naming_the_step(lab, monkeypatch):
    engagement, _ = lab("healthy")
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    g3 = engagement.gates.get(code="G3")
    monkeypatch.setattr(dispatch, "ring", lambda *args, **kwargs: None, raising=False)
    run = dispatch.gate_run_start(gate=g3, started_by="erin", reason="", confirmed=True,
                                  probe_timeouts={})
    _readback_set(g3, planned_nodes=0)
    job = NodeJob.objects.get(gate_run=run)
    node_job_execute(node_job_id=job.id)
    job.refresh_from_db()
    assert (job.state, job.error_kind) == (NodeJob.State.FAILED, "plan")
    assert job.error == ("the gate's probe plan: shared_readback: planned_nodes must be a "
                         "whole number 1 … 4096, not 0")
