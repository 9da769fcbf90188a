"""G3's shared read-back through the whole path on the SSH lab (real sshd per node, stand-in
``cat`` counter and ``vllm`` pass): the sampler started behind the barrier, the counter read
every second with the node's clock, parsed, aligned with the skew, derived over the overlap
and evaluated — here without workers (tasks run in-process, one node after another)."""

import io
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from django.core.management import call_command

from gates.models import Gate
from runners.lab.services import lab_up
from runners.models import GateRun, Measurement

pytestmark = pytest.mark.slow


def run_g3(engagement):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G3", stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue() + err.getvalue()


def g3_lab(scenario, nodes=1, **overrides):
    engagement, _ = lab_up(scenario_name=scenario, nodes=nodes, overrides=overrides or None)
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    return engagement


def aggregate(engagement, metric="line_efficiency"):
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G3")
    return Measurement.objects.get(gate_run=run, metric=metric, derived=True,
                                   labels__scope="aggregate")


def test_one_planned_node_reads_back_over_its_own_sampled_window(transactional_db):
    engagement = g3_lab("kv-gain")
    code, out = run_g3(engagement)
    assert code == 0, out
    eff = aggregate(engagement)
    assert "invalid" not in eff.labels
    # the stand-in counter grows at the whole 11.0e9 B/s on the lab's one node; the window is
    # the measured pass (3 s) sampled every second
    assert eff.value == pytest.approx(11.0e9 / 12.5e9, rel=0.01)
    assert eff.labels["nodes"] == eff.labels["planned_nodes"] == "1"
    assert 2.0 <= float(eff.labels["window_s"]) < 10
    start, end = (datetime.fromisoformat(eff.labels[k]) for k in ("window_start", "window_end"))
    assert (end - start).total_seconds() == pytest.approx(float(eff.labels["window_s"]),
                                                          abs=2e-3)
    verdict = eff.verdicts.get()
    assert (f"over the node's read window, {eff.labels['window_start']} → "
            f"{eff.labels['window_end']}") in verdict.explanation
    assert "clock skew lab-inference-1 " in verdict.explanation
    # the signed G3 report names the window (its verdict table carries the explanation)
    pdf = Path(GateRun.objects.get(gate__engagement=engagement,
                                   gate__code="G3").decision.report.path)
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], check=True, text=True,
                                   capture_output=True, timeout=60).stdout.split())
    assert "over the node's read window" in text
    assert eff.labels["window_start"][11:19] in text  # hh:mm:ss of the window's start
    assert eff.labels["clock_skew"].startswith("lab-inference-1 ")
    counters = eff.inputs.filter(metric="rdma_counter")
    assert counters.count() >= 4  # one a second over ≥ 3 s, and the last at the stop
    clock = eff.inputs.get(metric="node_clock")
    sent, received = (float(clock.labels[k]) for k in ("service_sent", "service_received"))
    assert sent < received and received - sent < 30  # the SSH round trip around the reading
    # same machine: the node's clock is the service's, within half the round trip
    assert abs(clock.value - (sent + received) / 2) <= (received - sent) / 2 + 1e-3
    # the counter is the stand-in's: both the start and the series are simulated evidence
    assert clock.probe_run.simulated
    assert not eff.inputs.filter(metric="rdma_counter", probe_run__simulated=False).exists()


def test_fewer_nodes_than_the_plan_says_is_an_error_naming_the_counts(transactional_db):
    engagement = g3_lab("readback-too-few-nodes")
    code, out = run_g3(engagement)
    assert code == 2, out
    assert ("1 of the 8 planned nodes read back from LAB-READBACK-TOO-FEW-NODES "
            "(lab-inference-1)") in out
    assert aggregate(engagement).labels["planned_nodes"] == "8"


def test_nodes_run_one_after_another_do_not_overlap_and_cannot_count(transactional_db):
    # Without workers the barrier lets each node through alone (it says so in the log): the
    # windows follow one another, and the sum of each node's own average no longer passes.
    engagement = g3_lab("kv-gain", nodes=2)
    code, out = run_g3(engagement)
    assert code == 2, out
    eff = aggregate(engagement)
    assert "the nodes' read-back windows do not overlap" in eff.labels["invalid"]
    assert eff.labels["nodes"] == eff.labels["planned_nodes"] == "2"
