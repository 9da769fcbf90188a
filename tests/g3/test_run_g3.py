"""G3 end to end: ``run_gate`` on multi-node labs (real sshd per node, stand-in engines on
127.0.0.1), one scenario per outcome — pass, stop, error for an unused tier, error "unstable"
for rounds that disagree, review accepted by a person with a reason."""

import io
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from acceptance.models import AuditEntry, Engagement
from gates.models import Gate
from reports.signing import verify_pdf
from runners.lab.services import lab_up
from runners.models import GateRun, Measurement, ProbeRun

pytestmark = pytest.mark.slow


def run_gate(engagement, gate):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement, gate, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()


def criterion_line(output, metric):
    return next(line.split() for line in output.splitlines() if line.startswith(metric + " "))


def g3_lab(scenario, nodes=1, **overrides):
    """A lab whose G1 and G2 are already passed (their own tests run them), ready for G3. One
    inference node: without workers several nodes read back one after another, which G3's
    overlap rule refuses (tests/readback)."""
    engagement, _ = lab_up(scenario_name=scenario, nodes=nodes, overrides=overrides or None)
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    return engagement


def g3_run(engagement):
    return GateRun.objects.get(gate__engagement=engagement, gate__code="G3")


def derived(run, metric, **labels):
    return Measurement.objects.filter(gate_run=run, metric=metric, derived=True,
                                      **{f"labels__{k}": v for k, v in labels.items()})


def engines_left(engagement):
    root = settings.LAB_DIR / engagement.name
    return sorted(p.name for p in root.glob("*/engines/*.pid"))


def test_it_runs_g1_g2_then_g3_on_an_8_node_lab_and_without_workers_g3_cannot_count(
        transactional_db):
    out = io.StringIO()
    call_command("lab", "up", "--scenario", "kv-gain", "--nodes", "8", stdout=out)
    name = out.getvalue().splitlines()[-1]
    assert name == "lab-kv-gain"
    engagement = Engagement.objects.get(name=name)

    code, _, err = run_gate(name, "G3")
    assert code == 2 and "G1" in err and "has not passed" in err  # gates run in order
    assert run_gate(name, "G1")[0] == 0
    assert run_gate(name, "G2")[0] == 0
    # Without workers the nodes run one after another (the barrier lets each through alone
    # and says so): their read-back windows follow one another and the aggregate cannot
    # count — the sum of each node's own average no longer passes (issue 16).
    code, out, err = run_gate(name, "G3")
    assert code == 2, out + err
    assert "the nodes' read-back windows do not overlap" in err
    run = g3_run(engagement)
    readback = run.probe_runs.filter(labels__phase="readback")
    assert readback.filter(probe="kv_bench_pass", labels__pass="measured").count() == 8
    assert readback.filter(probe="rdma_counter_series").count() == 16
    aggregate = derived(run, "line_efficiency", scope="aggregate").get()
    assert aggregate.labels["nodes"] == aggregate.labels["planned_nodes"] == "8"
    assert float(aggregate.labels["window_s"]) < 0
    assert sorted(set(aggregate.inputs.values_list("node__name", flat=True))) == sorted(
        f"lab-inference-{i}" for i in range(1, 9))


def test_it_passes_kv_gain_on_a_one_node_lab(transactional_db):
    # One planned node reads back alone: its window is its own (tests/readback has the
    # several-node read-back with workers).
    engagement = g3_lab("kv-gain")
    code, out, err = run_gate(engagement.name, "G3")
    assert code == 0, out + err
    assert criterion_line(out, "ttft_reduction")[:5] == [
        "ttft_reduction", ">=", "0.25", "0.314", "(31.4"]
    assert criterion_line(out, "throughput_gain")[4:6] == ["0.394", "(39.4"]
    assert "PASS" in criterion_line(out, "round_deviation")
    assert criterion_line(out, "line_efficiency")[:3] == ["line_efficiency", ">=", "0.83"]
    assert "decision: PASSED" in out

    run = g3_run(engagement)
    # Arms interleaved on the comparison node, ABBA: one round is every arm once, round 2
    # reversed, and each round's order is recorded.
    measured = run.probe_runs.filter(probe="kv_bench_pass", node__name="lab-inference-1",
                                     labels__phase="compare", labels__pass="measured")
    assert [(r.arm, r.labels["round"], r.labels["arm_order"])
            for r in measured.order_by("started_at", "id")] == [
        ("local", "1", "local,array"), ("array", "1", "local,array"),
        ("array", "2", "array,local"), ("local", "2", "array,local")]
    assert "PASS" in criterion_line(out, "failed_requests")
    # The read-back: the counter sampled every second through the measured pass.
    readback = run.probe_runs.filter(labels__phase="readback")
    assert readback.filter(probe="kv_bench_pass", labels__pass="measured").count() == 1
    assert readback.filter(probe="rdma_counter_series").count() == 2
    assert not run.probe_runs.filter(state=ProbeRun.State.FAILED).exists()
    assert run.probe_runs.filter(probe="kv_engine_start", simulated=True).count() == \
        run.probe_runs.filter(probe="kv_engine_start").count() == 5

    # The derived figures, each linked to what it was computed from.
    r1 = derived(run, "ttft_reduction", round="1").get()
    assert r1.value == pytest.approx(1 - 11.85 / 17.31)
    inputs = r1.inputs.all()
    assert sorted((m.metric, m.labels["arm"]) for m in inputs if m.metric == "ttft_p50") == [
        ("ttft_p50", "array"), ("ttft_p50", "local")]
    assert {m.metric for m in inputs} >= {"external_prefix_cache_hit_tokens",
                                          "working_set_bytes", "host_tier_bytes"}
    gain = derived(run, "throughput_gain", round="mean").get()
    assert gain.value == pytest.approx(((74.9 / 53.6 - 1) + (73.78 / 53.06 - 1)) / 2)
    assert gain.inputs.filter(metric="output_throughput").count() == 4
    low = derived(run, "ci_low", figure="throughput_gain").get()
    high = derived(run, "ci_high", figure="throughput_gain").get()
    assert low.value < gain.value < high.value
    verdict = gain.verdicts.get()
    assert "95 % CI" in verdict.explanation and "over 2 rounds" in verdict.explanation
    deviation = derived(run, "round_deviation", figure="ttft_p50", arm="array").get()
    assert deviation.value == pytest.approx((12028 - 11850) / ((12028 + 11850) / 2))
    hits = Measurement.objects.filter(gate_run=run, metric="external_prefix_cache_hit_tokens",
                                      labels__phase="compare", labels__arm="array")
    assert hits.count() == 2 and all(m.value > 0 for m in hits)
    aggregate = derived(run, "line_efficiency", scope="aggregate").get()
    assert aggregate.value == pytest.approx(11.0e9 / 12.5e9, rel=0.03)  # the array's port
    assert aggregate.labels["array_line_rate"] == "12500000000"
    assert set(aggregate.inputs.values_list("node__name", flat=True)) == {"lab-inference-1"}

    report = run.decision.report
    assert report.simulated and verify_pdf(Path(report.path).read_bytes()).valid
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.ACTIVE
    assert list(engagement.gates.values_list("state", flat=True)) == [
        "passed", "passed", "passed", "pending"]
    assert engines_left(engagement) == []  # every engine stopped by its arm's last probe


def test_it_stops_g3_when_the_array_tier_gives_no_gain(transactional_db):
    engagement = g3_lab("kv-no-gain")
    code, out, _ = run_gate(engagement.name, "G3")
    assert code == 1
    assert "FAIL" in criterion_line(out, "ttft_reduction")
    assert "FAIL" in criterion_line(out, "throughput_gain")
    assert "PASS" in criterion_line(out, "line_efficiency")
    assert "decision: STOPPED" in out
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.STOPPED
    assert "ttft_reduction >= 0.25 measured" in engagement.stopped_reason


def test_an_array_arm_without_external_tier_hits_is_an_error_not_a_pass(transactional_db):
    engagement = g3_lab("kv-no-tier-hits")
    code, out, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert "run failed (no decision)" in err
    assert "no external-tier hits: the array tier was not used" in err
    run = g3_run(engagement)
    assert run.state == GateRun.State.FAILED and not hasattr(run, "decision")
    # The figures that would have passed are kept, marked as not countable.
    mean = derived(run, "ttft_reduction", round="mean").get()
    assert mean.value > 0.25
    assert mean.labels["invalid"].startswith("no external-tier hits: the array tier was not used")
    window = Measurement.objects.get(gate_run=run, metric="external_prefix_cache_hit_tokens",
                                     labels__phase="compare", labels__arm="array",
                                     labels__round="1")
    assert window.value == 0
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.ACTIVE
    assert engagement.gates.get(code="G3").state == Gate.State.PENDING


def test_rounds_that_disagree_by_more_than_five_percent_ask_for_a_re_run(transactional_db):
    engagement = g3_lab("unstable-rounds")
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert "unstable" in err and "re-run" in err
    assert "figure ttft_p50, arm array" in err
    run = g3_run(engagement)
    deviation = derived(run, "round_deviation", figure="ttft_p50", arm="array").get()
    # |12798 − 11850| ÷ their mean 12324 = 0.077 > 0.05 (a symmetric base)
    assert deviation.value == pytest.approx(948 / 12324)
    assert engagement.gates.get(code="G3").state == Gate.State.PENDING
    assert Engagement.objects.get(pk=engagement.pk).state == Engagement.State.ACTIVE


def test_a_gain_above_the_reference_range_is_reviewed_and_a_person_accepts_it(
        transactional_db):
    # 80 / 53.6 − 1 = 0.49 and 79.5 / 53.06 − 1 = 0.50: above +40 %.
    engagement = g3_lab("kv-gain", kv={"arms": {"array": {"output_throughput": [80.0, 79.5]}}})
    code, out, _ = run_gate(engagement.name, "G3")
    assert "REVIEW" in criterion_line(out, "throughput_gain")
    assert "decision: REVIEW" in out and "a person must accept it with a reason" in out
    assert verify_pdf(Path(g3_run(engagement).decision.report.path).read_bytes()).valid
    gate = engagement.gates.get(code="G3")
    assert gate.state == Gate.State.REVIEW
    code, _, err = run_gate(engagement.name, "G4")
    assert code == 2 and "G3" in err and "review" in err  # G4 waits for a person

    with pytest.raises(CommandError, match="--reason"):
        call_command("accept_review", engagement.name, "G3", stdout=io.StringIO())
    with pytest.raises(CommandError, match="needs a reason"):
        call_command("accept_review", engagement.name, "G3", "--reason", " ",
                     stdout=io.StringIO())
    with pytest.raises(CommandError, match="not in review"):
        call_command("accept_review", engagement.name, "G2", "--reason", "x",
                     stdout=io.StringIO())
    out = io.StringIO()
    call_command("accept_review", engagement.name, "G3", "--reason",
                 "gain confirmed by the customer's own replay", "--actor", "pm-alice",
                 stdout=out)
    assert "G3 passed" in out.getvalue()
    gate.refresh_from_db()
    assert gate.state == Gate.State.PASSED
    entry = AuditEntry.objects.get(engagement=engagement, action="review accepted")
    assert (entry.actor, entry.reason) == ("pm-alice",
                                           "gain confirmed by the customer's own replay")
    assert entry.details["gate"] == "G3"
    assert [r["metric"] for r in entry.details["reviewed"]] == ["throughput_gain"]
    assert entry.details["reviewed"][0]["measured"] == pytest.approx(0.4958, abs=1e-3)
    g4 = engagement.gates.get(code="G4")
    g4.probe_plan[0]["soak"]["load"]["request_rate"] = 0.2  # G2 was set passed, not decided
    g4.save(update_fields=["probe_plan"])
    code, _, err = run_gate(engagement.name, "G4")
    # past G3 now; G4's soak refuses until the array vendor's drive command is in its plan
    assert code == 2 and "refused:" in err and "command is not set" in err


def test_the_flush_guard_refuses_a_cache_directory_on_another_device(transactional_db):
    # The array's cache filesystem is mounted from the wrong namespace on the nodes.
    engagement = g3_lab("kv-gain", mounts={"/mnt/fx": "/dev/nvme7n1"})
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert "refused: /mnt/fx is mounted from /dev/nvme7n1, not from /dev/nvme1n1" in err
    evict = g3_run(engagement).probe_runs.filter(probe="kv_cache_evict", arm="array",
                                                 state=ProbeRun.State.FAILED).first()
    assert b"vm.drop_caches" not in evict.raw("stderr")  # nothing flushed


def test_g3_evidence_collected_by_script_is_decided_as_over_ssh(transactional_db, tmp_path):
    """Sites without inbound SSH: the G3 collection script runs the same probes on each node."""
    from runners.evidence import collection_script, evidence_import
    from runners.transport import SSHConnection

    engagement = g3_lab("kv-gain")
    gate = engagement.gates.get(code="G3")
    bundles = []
    for node in engagement.nodes.filter(role="inference"):
        script = tmp_path / f"collect-{node.name}.py"
        script.write_text(collection_script(gate=gate, node=node))
        output = tmp_path / f"{node.name}.tar.gz"
        with SSHConnection(node.ssh_target()) as connection:
            result = connection.run(f"python3 {script} --output {output}", timeout=300)
        assert result.exit_code == 0, result.stderr.decode()
        bundles.append((output.name, output.read_bytes()))
    run = evidence_import(gate=gate, bundles=bundles, imported_by="customer-ops")
    assert run.decision.outcome == "passed"
    assert derived(run, "ttft_reduction", round="mean").get().value == pytest.approx(
        ((1 - 11.85 / 17.31) + (1 - 12028 / 17483)) / 2)
    assert engines_left(engagement) == []


def test_a_cancel_after_an_engine_started_stops_that_engine_on_the_node(transactional_db,
                                                                        monkeypatch):
    """The engine runs in its own session (it must outlive the probe that started it), so the
    process-group kill of a cancel cannot reach it: the job runs the plan's undo step."""
    from runners import execution
    from runners.transport import CommandCancelled

    engagement = g3_lab("kv-gain", nodes=1)
    real = execution.probe_run_execute

    def cancelled_at_drain(*, ctx, spec, values, **kwargs):
        if spec.name == "kv_engine_drain":
            assert engines_left(engagement), "the engine should be up at this point"
            raise CommandCancelled("lab-inference-1: cancelled while draining")
        return real(ctx=ctx, spec=spec, values=values, **kwargs)

    monkeypatch.setattr(execution, "probe_run_execute", cancelled_at_drain)
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    run = g3_run(engagement)
    cleanup = run.probe_runs.get(probe="kv_engine_stop", labels__phase="cleanup")
    assert cleanup.state == ProbeRun.State.PARSED
    assert engines_left(engagement) == []
    assert run.node_jobs.get().state == "cancelled"
