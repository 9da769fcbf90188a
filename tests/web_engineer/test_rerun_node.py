"""Re-running one node of a finished attempt, on the real sshd lab: the node runs again alone and
the gate is decided over its new evidence plus the other nodes' evidence carried by reference."""

import io
import subprocess

import pytest
from django.core.management import call_command
from django.urls import reverse

from acceptance.models import AuditEntry
from runners.lab import server
from runners.lab.services import lab_directory
from runners.models import GateRun, Measurement, NodeJob, ProbeRun

pytestmark = pytest.mark.slow


def _sshd_back(directory) -> None:
    """Start the stopped lab sshd again with its own config: same port, same host key."""
    subprocess.run([server.SSHD, "-f", str(directory / "sshd_config"),
                    "-E", str(directory / "sshd.log")], check=True, timeout=30)
    server._wait_for_banner(int((directory / "sshd_config").read_text().split()[1]))


def test_it_re_runs_the_unreachable_node_alone_and_decides_over_all_nodes(lab, people):
    engagement, _ = lab("healthy", nodes=3)
    engagement.gates.filter(code="G1").update(state="passed")
    dead = engagement.nodes.get(name="lab-inference-2")
    directory = lab_directory(engagement.name) / dead.name
    assert server.server_stop(directory)
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert exit_info.value.code == 2
    first = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    assert first.state == "failed" and "lab-inference-2: unreachable" in first.error
    first_counts = {n: first.probe_runs.filter(node__name=n).count()
                    for n in ("lab-inference-1", "lab-inference-3")}
    # G2's single-array read runs on the array's first inference node only (issue 16): node 1
    # gave link, fio and engine; node 3 its engine.
    assert first_counts == {"lab-inference-1": 3, "lab-inference-3": 1}

    _sshd_back(directory)
    engineer = people("Lab").engineer
    response = engineer.client.post(reverse("run-rerun", args=[first.id]), {
        "node": "lab-inference-2", "reason": "sshd of node 2 restarted by the site"})
    second = GateRun.objects.get(gate__engagement=engagement, gate__code="G2", attempt=2)
    assert response.status_code == 302 and response["Location"] == reverse(
        "run-detail", args=[second.id])

    assert second.state == "done", second.error
    assert second.rerun_of == first and second.rerun_node == dead
    assert second.reason == "sshd of node 2 restarted by the site"
    # Only node 2 ran in the new attempt; nodes 1 and 3 carry the jobs of attempt 1.
    assert set(second.probe_runs.exclude(node=None).values_list("node__name", flat=True)) == {
        "lab-inference-2"}
    jobs = {j.node.name: j for j in second.node_jobs.select_related("node", "carried_from")}
    assert jobs["lab-inference-2"].carried_from is None
    assert jobs["lab-inference-2"].state == "done"
    for name in ("lab-inference-1", "lab-inference-3"):
        assert jobs[name].carried_from.gate_run_id == first.id
        assert jobs[name].carried_from.node.name == name
    evidence = second.evidence_probe_runs().exclude(node=None)
    assert evidence.filter(gate_run=first).count() == 4
    assert evidence.filter(gate_run=second).count() == 1
    assert not ProbeRun.objects.filter(gate_run=second, node__name="lab-inference-1").exists()

    decision = second.decision
    assert decision.outcome == "passed"
    job_errors = decision.verdicts.get(criterion__key="fio-job-errors")
    used = Measurement.objects.filter(id__in=job_errors.measurements.values("id"))
    assert sorted(used.values_list("node__name", "gate_run_id")) == [
        ("lab-inference-1", first.id)]
    efficiency = decision.verdicts.get(criterion__key="line-efficiency")
    assert sorted(efficiency.measurements.values_list("node__name", "gate_run_id")) == [
        ("lab-inference-1", second.id)]
    # Derived figures are computed again in the new attempt, from the carried read-outs too.
    derived = Measurement.objects.get(gate_run=second, metric="line_efficiency",
                                      node__name="lab-inference-1")
    assert derived.derived
    assert set(derived.inputs.values_list("gate_run_id", flat=True)) == {first.id}
    assert engagement.gates.get(code="G2").state == "passed"

    audit = AuditEntry.objects.get(engagement=engagement, action="node re-run")
    assert audit.actor == "eng-erin" and audit.reason == "sshd of node 2 restarted by the site"
    assert audit.details["node"] == "lab-inference-2"
    assert audit.details["previous_attempt"] == 1 and audit.details["attempt"] == 2
    assert audit.details["carried"] == {"lab-inference-1": first.id,
                                        "lab-inference-3": first.id}

    page = engineer.client.get(reverse("run-detail", args=[second.id])).content.decode()
    assert "carried from attempt #1" in page
    assert "re-run of lab-inference-2" in page.lower()
    api = engineer.client.get(f"/api/gate-runs/{second.id}/").json()
    assert api["rerun_of"] == first.id and api["rerun_node"] == "lab-inference-2"
    carried = engineer.client.get(f"/api/node-jobs/?gate_run={second.id}").json()["results"]
    assert {r["node"]: r["carried_from_gate_run"] for r in carried} == {
        "lab-inference-1": first.id, "lab-inference-2": None, "lab-inference-3": first.id}
    assert NodeJob.objects.filter(gate_run=second).count() == 3
    listed = engineer.client.get(f"/api/probe-runs/?evidence_of={second.id}&limit=100").json()
    assert sorted((r["node"] or "service", r["gate_run"]) for r in listed["results"]
                  if r["node"] != "lab-array-controller") == sorted(
        [("lab-inference-1", first.id)] * 3 + [("lab-inference-2", second.id)]
        + [("lab-inference-3", first.id)])
    figures = engineer.client.get(
        f"/api/measurements/?evidence_of={second.id}&metric=job_errors").json()["results"]
    assert sorted((m["node"], m["gate_run"]) for m in figures) == [
        ("lab-inference-1", first.id)]
    # The signed report's evidence appendix lists every run the decision rests on: the
    # re-run node's new runs and the other nodes' runs carried from attempt #1.
    from reports.services import report_context

    appendix = [(row.node, row.sha256) for row in report_context(decision).runs
                if row.node.startswith("lab-inference")]
    expected = evidence.filter(node__name__startswith="lab-inference")
    assert sorted(appendix) == sorted(expected.values_list("node__name", "stdout_sha256"))
    assert len(appendix) == 5
