"""Fan-out across a site: every node's result stands on its own; a dead node is one clear error.
"""

import io

import pytest
from django.core.management import call_command

from runners.lab import server
from runners.lab.services import lab_directory
from runners.models import GateRun, Measurement, NodeJob

pytestmark = pytest.mark.slow


def test_it_gives_seven_results_and_one_clear_error_when_one_of_eight_nodes_is_down(lab):
    engagement, _ = lab("healthy", nodes=8)
    engagement.gates.filter(code="G1").update(state="passed")
    dead = engagement.nodes.get(name="lab-inference-3")
    assert server.server_stop(lab_directory(engagement.name) / dead.name)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=out, stderr=err)
    assert exit_info.value.code == 2  # no decision: evidence from one node is missing
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    states = dict(run.node_jobs.values_list("node__name", "state"))
    assert sorted(states.values()) == ["done"] * 7 + ["failed"]
    failed = run.node_jobs.get(state=NodeJob.State.FAILED)
    assert failed.node == dead and failed.error_kind == "unreachable"
    assert f"lab-inference-3 (127.0.0.1:{dead.port})" in failed.error
    assert "gave up after" in failed.error  # retried with back-off, a bounded number of times
    # The single-array read runs on one inference node per array (issue 16: eight nodes never
    # share one array port in G2); every other live node still gave its own engine figures.
    efficiency = Measurement.objects.filter(gate_run=run, metric="read_bandwidth")
    assert list(efficiency.values_list("node__name", flat=True)) == ["lab-inference-1"]
    engines = Measurement.objects.filter(gate_run=run, metric="output_throughput")
    assert sorted(set(engines.values_list("node__name", flat=True))) == sorted(
        f"lab-inference-{i}" for i in (1, 2, 4, 5, 6, 7, 8))
    assert "lab-inference-3: unreachable" in err.getvalue()
    assert engagement.gates.get(code="G2").state == "pending"


def test_it_keeps_at_most_the_sites_parallel_limit_in_flight(lab, monkeypatch):
    from runners import execution

    engagement, _ = lab("healthy", nodes=4)
    engagement.gates.filter(code="G1").update(state="passed")
    engagement.max_parallel_nodes = 2
    engagement.save(update_fields=["max_parallel_nodes"])
    in_flight = []
    original = execution.node_job_execute

    def watched(*, node_job_id):
        job = NodeJob.objects.get(id=node_job_id)
        in_flight.append(NodeJob.objects.filter(
            gate_run=job.gate_run, dispatched_at__isnull=False,
            state__in=["queued", "connecting", "running"]).count())
        original(node_job_id=node_job_id)

    monkeypatch.setattr(execution, "node_job_execute", watched)
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=io.StringIO())
    assert exit_info.value.code == 0
    assert len(in_flight) == 4 and max(in_flight) <= 2


def _stack_depth() -> int:
    import sys

    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_in_process_node_jobs_run_one_after_another_not_one_inside_another(lab, monkeypatch):
    """With tasks run in-process (the embedded default) a node job runs inside its send and
    asks for the next when it ends: each must start at the same stack depth, or a site-scale
    run (128 nodes) ends in RecursionError."""
    from runners import execution

    engagement, _ = lab("healthy", nodes=4)
    engagement.gates.filter(code="G1").update(state="passed")
    depths = []
    original = execution.node_job_execute

    def watched(*, node_job_id):
        depths.append(_stack_depth())
        original(node_job_id=node_job_id)

    monkeypatch.setattr(execution, "node_job_execute", watched)
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=io.StringIO())
    assert exit_info.value.code == 0
    assert len(depths) == 4 and len(set(depths)) == 1, depths
