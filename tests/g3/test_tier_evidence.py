"""Issue 16, G3's tier evidence through the whole path: ``run_gate`` over SSH on a lab (real sshd,
stand-in engines on 127.0.0.1), the probes' scripts, the vllm_metrics parser, the derivation and
the evaluation. The window runs from the eviction to the end of the measured pass; the GPU
prefix cache is reset before the measured pass; the array arm's hits are cross-checked against
the RDMA bytes read in the same window (±15 %, on both sides of the bound and exactly on it);
the working set must be ≥ 2 × (GPU KV + the DRAM tier of all TP ranks); failed requests in one
arm void the comparison."""

import io

import pytest
from django.core.management import call_command

from gates.models import Gate
from runners.lab.services import lab_up
from runners.models import GateRun, Measurement
from runners.parsers import parse_output

pytestmark = pytest.mark.slow

KV_BPT = 253952
HITS = 64 * 30000  # every prefix of the measured pass found in the external tier


def run_gate(engagement, gate):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement, gate, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()


def g3_lab(scenario, nodes=1, plan_params=None, **overrides):
    """A lab whose G1 and G2 are already passed (their own tests run them), ready for G3."""
    engagement, _ = lab_up(scenario_name=scenario, nodes=nodes, overrides=overrides or None)
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    if plan_params:
        gate = engagement.gates.get(code="G3")
        for step in gate.probe_plan:
            step.setdefault("params", {}).update(plan_params)
        gate.save(update_fields=["probe_plan"])
    return engagement


def g3_run(engagement):
    return GateRun.objects.get(gate__engagement=engagement, gate__code="G3")


def window(run, metric, arm="array", round_="1", probe="kv_metrics_window"):
    """The figure ``metric`` the probe ``probe`` read for the arm's comparison round."""
    return Measurement.objects.get(gate_run=run, metric=metric, labels__phase="compare",
                                   labels__arm=arm, labels__round=round_, derived=False,
                                   probe_run__probe=probe)


def test_kv_gain_passes_with_the_window_from_the_eviction_and_the_rdma_cross_check(
        transactional_db):
    engagement = g3_lab("kv-gain")
    code, out, err = run_gate(engagement.name, "G3")
    assert code == 0, out + err
    run = g3_run(engagement)
    hits = window(run, "external_prefix_cache_hit_tokens")
    assert hits.labels["window"] == "evicted→t1" and hits.value == HITS
    # The array tier's reads crossed the RDMA port: exactly hits × KV bytes per token.
    assert window(run, "rdma_read_bytes").value == HITS * KV_BPT
    assert window(run, "prefix_cache_reset").value == 1
    assert window(run, "gpu_kv_tokens", probe="kv_tier_sizing").value == 600_000
    assert window(run, "kv_bytes_per_token", probe="kv_tier_sizing").value == KV_BPT
    evict = run.probe_runs.filter(probe="kv_cache_evict", arm="array").first()
    assert b"POST /reset_prefix_cache: HTTP 200 (GPU prefix cache reset)" in evict.raw("stderr")
    reduction = Measurement.objects.get(gate_run=run, metric="ttft_reduction", derived=True,
                                        labels__round="1")
    assert {"rdma_read_bytes", "prefix_cache_reset", "gpu_kv_tokens",
            "kv_bytes_per_token"} <= set(reduction.inputs.values_list("metric", flat=True))


def test_hits_only_in_the_warm_up_do_not_validate_the_measured_pass(transactional_db):
    engagement = g3_lab("kv-warmup-hits-only")
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert ("no external-tier hits: the array tier was not used (arm array, round 1 on "
            "lab-inference-1; window evicted→t1)") in err
    run = g3_run(engagement)
    assert run.state == GateRun.State.FAILED and not hasattr(run, "decision")
    assert window(run, "external_prefix_cache_hit_tokens").value == 0
    # From engine start (the old window) the same engine shows the warm-up's hits.
    start = run.probe_runs.get(probe="kv_engine_start", arm="array", labels__phase="compare",
                               labels__round="1")
    end = run.probe_runs.get(probe="kv_metrics_window", arm="array", labels__phase="compare",
                             labels__round="1").raw("stdout")
    t1 = end[end.index(b"# acceptance-scrape: name=t1"):]
    # (the RDMA counter is not in engine start's scrape: it is left out of this old window)
    t1 = b"".join(line for line in t1.splitlines(keepends=True)
                  if b"acceptance_rdma_port_rcv_data" not in line)
    old = {m.metric: m for m in parse_output("vllm_metrics", start.raw("stdout") + t1)}
    assert old["external_prefix_cache_hit_tokens"].value == HITS
    assert old["external_prefix_cache_hit_tokens"].labels == {"window": "t0→t1"}


def test_hits_from_lmcache_s_cpu_tier_fail_the_rdma_cross_check(transactional_db):
    engagement = g3_lab("kv-cpu-tier-hits")
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert ("RDMA bytes read in the window 243.79 GB vs external hits × KV bytes per token "
            "1920000 × 253952 B = 487.59 GB: ratio 0.500, outside 1 ± 0.15 (arm array, "
            "round 1 on lab-inference-1): the hits did not come from the array tier") in err
    assert window(g3_run(engagement), "rdma_read_bytes").value == HITS * KV_BPT / 2


@pytest.mark.parametrize(("share", "valid"), [
    (0.85, True),     # exactly on the lower bound
    (0.8499, False),  # just below it
    (1.15, True),     # exactly on the upper bound (more bytes than hits: read amplification)
    (1.1501, False),  # just above it
])
def test_the_rdma_cross_check_at_its_fifteen_percent_bounds(transactional_db, share, valid):
    engagement = g3_lab("kv-gain", kv={"arms": {"array": {"storage_hit_ratio": share}}})
    code, out, err = run_gate(engagement.name, "G3")
    run = g3_run(engagement)
    assert window(run, "rdma_read_bytes").value == round(HITS * share) * KV_BPT
    if valid:
        assert code == 0, out + err
    else:
        assert code == 2
        assert f"ratio {round(HITS * share) / HITS:.3f}, outside 1 ± 0.15" in err


def test_a_working_set_under_twice_gpu_kv_and_dram_is_an_error(transactional_db):
    engagement = g3_lab("working-set-under-2x")
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert ("the working set (487.6 GB) is below 2 × (GPU KV 254.0 GB + DRAM tier 68.7 GB) = "
            "645.3 GB (arm array, round 1 on lab-inference-1)") in err


def test_a_dram_tier_holding_the_working_set_per_rank_is_an_error(transactional_db):
    engagement = g3_lab("dram-tier-per-rank")
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    # 64 GB (GiB counted) × 8 TP ranks = 549.8 GB
    assert "DRAM tier 549.8 GB" in err and "hits may come from HBM or DRAM" in err
    host = window(g3_run(engagement), "host_tier_bytes", probe="kv_tier_sizing")
    assert host.value == 64 * 2**30 * 8


def test_without_the_prefix_cache_reset_the_arms_cannot_count(transactional_db):
    engagement = g3_lab("kv-gain", plan_params={"reset_prefix_cache": False})
    code, _, err = run_gate(engagement.name, "G3")
    assert code == 2
    assert "the GPU prefix cache was not reset between warm-up and measured pass" in err
    run = g3_run(engagement)
    assert window(run, "prefix_cache_reset").value == 0
    start = run.probe_runs.filter(probe="kv_engine_start", arm="array").first()
    assert start.parameters["reset_prefix_cache"] is False
    evict = run.probe_runs.filter(probe="kv_cache_evict", arm="array").first()
    assert b"reset_prefix_cache" not in evict.raw("stderr")  # no POST was made


def test_failed_requests_in_one_arm_only_void_the_comparison(transactional_db):
    engagement = g3_lab("kv-failed-requests")
    code, out, err = run_gate(engagement.name, "G3")
    run = g3_run(engagement)
    failed = Measurement.objects.filter(gate_run=run, metric="failed_requests",
                                        labels__phase="compare", labels__pass="measured")
    assert sorted((m.labels["arm"], m.labels["round"], m.value) for m in failed) == [
        ("array", "1", 0), ("array", "2", 3), ("local", "1", 0), ("local", "2", 0)]
    completed = Measurement.objects.get(gate_run=run, metric="completed_requests",
                                        labels__arm="array", labels__round="2",
                                        labels__pass="measured", labels__phase="compare")
    assert completed.value == 253
    assert code == 2, out + err
    assert "3 failed request(s) in arm array, round 2, measured pass" in out + err
