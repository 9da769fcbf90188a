"""Issue 16, G3: failed requests in any arm void the comparison; the round deviation has a
symmetric base (|a − b| ÷ mean), on both sides of 5 % and exactly on it; the 95 % interval is
information, not a criterion; the DRAM tier is counted per TP rank."""

from __future__ import annotations

import json
import subprocess

import pytest

from gates.derivations import derive_kv_tier
from gates.evaluation import Sample, evaluate_criterion, gate_outcome
from runners.lab.services import LAB_MODEL_CONFIG
from runners.parsers import parse_output
from runners.parsers.base import ParseError
from runners.probes import probe
from tests.decide.standins import default_spec
from tests.gates.test_evaluation_g3 import NODE, arm_pass, by, r2_rounds


def failed(i, arm, round_, count, stage="measured"):
    return Sample(i, "failed_requests", count, "1",
                  {"phase": "compare", "arm": arm, "round": str(round_), "pass": stage,
                   "concurrency": "16"}, NODE)


def g3(samples):
    derived = [Sample(5000 + i, d.metric, d.value, d.unit, d.labels, d.node)
               for i, d in enumerate(derive_kv_tier(samples))]
    keys = ("ttft-reduction", "throughput-gain", "round-deviation", "compare-failed-requests")
    verdicts = [evaluate_criterion(default_spec("G3", k), [*samples, *derived]) for k in keys]
    return {v.key: v for v in verdicts}, gate_outcome(verdicts)


@pytest.mark.parametrize(("count", "arm", "stage", "outcome"), [
    (0, "array", "measured", "passed"),
    (1, "array", "measured", "error"),      # one failure is enough
    (3, "local", "measured", "error"),      # the baseline arm alike
    (2, "array", "warmup", "error"),        # a warm-up with failures left the tier unfilled
])
def test_failed_requests_in_any_arm_void_the_comparison(count, arm, stage, outcome):
    samples = [*r2_rounds(), failed(900, "local", 1, 0), failed(901, "array", 1, 0),
               failed(902, arm, 2, count, stage)]
    verdicts, decided = g3(samples)
    assert decided == outcome
    if count:
        reason = verdicts["ttft-reduction"].explanation
        assert f"{count} failed request(s) in arm {arm}, round 2, {stage} pass" in reason
        assert verdicts["compare-failed-requests"].verdict == "fail"
        assert verdicts["compare-failed-requests"].measured == count


def rounds(local, array_ttft):
    """Two rounds whose array TTFT is ``array_ttft`` = (round 1, round 2); everything else R2."""
    ids = iter(range(1, 1000))
    return (arm_pass(ids, "local", 1, local, 53.6) + arm_pass(ids, "array", 1, array_ttft[0], 74.9)
            + arm_pass(ids, "local", 2, local, 53.6)
            + arm_pass(ids, "array", 2, array_ttft[1], 74.9))


@pytest.mark.parametrize(("first", "second", "verdict"), [
    (12.00, 12.62, "unstable"),     # 0.62 / 12.31 = 5.04 %
    (12.62, 12.00, "unstable"),     # the same, whichever round came first
    (11.70, 12.30, "pass"),         # 0.6 / 12.0 = 5.0 % exactly: on the bound
    (12.30, 11.70, "pass"),
    (11.71, 12.30, "pass"),         # 4.92 %
    (11.69, 12.30, "unstable"),     # 5.08 %
])
def test_the_round_deviation_is_symmetric_and_exact_at_five_percent(first, second, verdict):
    derived = derive_kv_tier(rounds(17.31, (first, second)))
    [deviation] = by(derived, "round_deviation", arm="array", figure="ttft_p50")
    assert deviation.value == pytest.approx(abs(first - second) / ((first + second) / 2))
    verdicts, _ = g3([*rounds(17.31, (first, second)), failed(900, "array", 1, 0)])
    assert verdicts["round-deviation"].verdict == verdict


def test_the_interval_is_information_not_a_criterion():
    verdicts, outcome = g3([*r2_rounds(), failed(900, "local", 1, 0), failed(901, "array", 1, 0)])
    assert outcome == "passed"
    assert "95 % CI" in verdicts["throughput-gain"].explanation
    assert "(information, not a criterion)" in verdicts["throughput-gain"].explanation


def model_dir(tmp_path, **fields):
    """A model directory whose config.json is the lab's Qwen3-Coder-480B one, changed."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({**LAB_MODEL_CONFIG, **fields}, indent=2))
    return model


def sizing(tmp_path, gb, tp=8, gpu_tokens=600_000, dtype="auto", **model):
    """The kv_tier_sizing probe's own script on an LMCache config, the model's config.json and
    the engine's log (vLLM's line, thousands separated as kv_cache_utils prints it), parsed."""
    config = tmp_path / f"lmc-{gb}.yaml"
    config.write_text(f"local_cpu: true\nmax_local_cpu_size: {gb}\n")
    (tmp_path / "engine-n1-compare-array-r1.log").write_text(
        "(EngineCore_DP0 pid=4242) INFO 12-03 07:00:00 [kv_cache_utils.py:1183] GPU KV cache "
        f"size: {gpu_tokens:,} tokens\n")
    command = probe("kv_tier_sizing").command(
        {"lmcache_config": str(config), "num_prefixes": 64, "prefix_len": 30000,
         "model_path": str(model_dir(tmp_path, **model)), "kv_cache_dtype": dtype,
         "tensor_parallel_size": tp, "result_dir": str(tmp_path), "port": 8000,
         "tag": "n1-compare-array-r1"}, sudo=False)
    done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=30, check=True)
    return {m.metric: m.value for m in parse_output("vllm_metrics", done.stdout)}


# Working set 64 × 30000 × 253952 B = 487.588 GB; the bound is 2 × (GPU KV + DRAM tier).
@pytest.mark.parametrize(("gb", "tp", "gpu_tokens", "valid"), [
    (64, 8, 600_000, False),  # the case: the 549.8 GB DRAM tier holds the working set
    (8, 8, 600_000, True),    # 2 × (152.4 + 68.7) = 442.2 GB ≤ 487.6 GB
    (64, 1, 600_000, True),   # one rank: 2 × (152.4 + 68.7) GB
    (40, 8, 600_000, False),  # 343.6 GB of DRAM alone < working set, but 2 × 496 GB > it
    (0, 8, 960_000, True),    # exactly on the bound: 2 × 960000 × 253952 = the working set
    (0, 8, 960_001, False),   # one token over
    (0, 8, 959_999, True),    # one token under
])
def test_the_working_set_is_twice_gpu_kv_and_the_dram_tier_of_all_ranks(tmp_path, gb, tp,
                                                                         gpu_tokens, valid):
    figures = sizing(tmp_path, gb, tp, gpu_tokens)
    assert figures["host_tier_bytes"] == gb * 2**30 * tp
    assert figures["working_set_bytes"] == 64 * 30000 * 253952
    assert figures["gpu_kv_tokens"] == gpu_tokens
    assert figures["kv_bytes_per_token"] == 253952
    ids = iter(range(1, 1000))
    tier = {"working_set": figures["working_set_bytes"], "host_tier": figures["host_tier_bytes"],
            "gpu_kv_tokens": figures["gpu_kv_tokens"], "bpt": figures["kv_bytes_per_token"]}
    samples = (arm_pass(ids, "local", 1, 17.31, 53.6, **tier)
               + arm_pass(ids, "array", 1, 11.85, 74.9, **tier))
    [gain] = by(derive_kv_tier(samples), "throughput_gain", round="1")
    assert ("invalid" not in gain.labels) == valid
    if not valid:
        assert "hits may come from HBM or DRAM" in gain.labels["invalid"]


def test_the_sizing_refuses_an_engine_log_without_its_kv_capacity(tmp_path):
    config = tmp_path / "lmc.yaml"
    config.write_text("max_local_cpu_size: 8\n")
    (tmp_path / "engine-t.log").write_text("INFO: Started server process [1]\n")
    command = probe("kv_tier_sizing").command(
        {"lmcache_config": str(config), "num_prefixes": 64, "prefix_len": 30000,
         "model_path": str(model_dir(tmp_path)), "kv_cache_dtype": "auto",
         "tensor_parallel_size": 8, "result_dir": str(tmp_path), "port": 8000, "tag": "t"},
        sudo=False)
    done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=30, check=False)
    assert done.returncode == 1
    assert done.stderr.decode().strip() == (
        f"no 'GPU KV cache size: N tokens' line in {tmp_path}/engine-t.log")


def array_round(**array):
    """Round 1 of both arms, R2's figures, the array arm's evidence changed by ``array``."""
    ids = iter(range(1, 1000))
    return arm_pass(ids, "local", 1, 17.31, 53.6) + arm_pass(ids, "array", 1, 11.85, 74.9,
                                                             **array)


def reason_of(samples):
    [gain] = by(derive_kv_tier(samples), "throughput_gain", round="1")
    return gain.labels.get("invalid", "")


@pytest.mark.parametrize(("rdma", "valid"), [
    (0.85e9, True), (0.8499999e9, False), (1.15e9, True), (1.1500001e9, False),
    (1.0e9, True), (0.0, False),
])
def test_the_rdma_cross_check_is_fifteen_percent_exactly(rdma, valid):
    # 1e6 hits × 1000 B per token = 1e9 B expected over the RDMA port.
    reason = reason_of(array_round(hits=1.0e6, bpt=1000, rdma=rdma, gpu_kv_tokens=1.0,
                                   working_set=4.9e11, host_tier=6.9e10))
    assert (reason == "") == valid, reason
    if not valid:
        assert f"ratio {rdma / 1e9:.3f}, outside 1 ± 0.15" in reason


def test_lmcache_s_storage_tier_hits_decide_where_they_are_counted():
    # MP mode: L2 hits present decide alone (no RDMA counter needed) ...
    assert reason_of(array_round(l2=1.5e6, rdma=None)) == ""
    # ... and none of them means the hits came from LMCache's CPU tier, whatever RDMA shows.
    assert "LMCache counted no storage-tier (L2) hit" in reason_of(array_round(l2=0.0))
    # Without either, the array tier's use cannot be shown.
    assert "neither LMCache's storage-tier hits nor the RDMA bytes" in reason_of(
        array_round(rdma=None))


def test_the_baseline_arm_is_not_cross_checked_but_needs_its_window_and_reset():
    ids = iter(range(1, 1000))
    local_without_rdma = (arm_pass(ids, "local", 1, 17.31, 53.6, rdma=None)
                          + arm_pass(ids, "array", 1, 11.85, 74.9))
    assert reason_of(local_without_rdma) == ""
    ids = iter(range(1, 1000))
    from_start = (arm_pass(ids, "local", 1, 17.31, 53.6, window="t0→t1")
                  + arm_pass(ids, "array", 1, 11.85, 74.9))
    assert "the tier evidence window runs t0→t1, not from the eviction" in reason_of(from_start)
    assert "window runs from engine start" in reason_of(array_round(window=""))
    assert "GPU prefix cache was not reset" in reason_of(array_round(reset=0))
    assert "GPU prefix cache was not reset" in reason_of(array_round(reset=None))
    assert "GPU KV capacity missing" in reason_of(array_round(gpu_kv_tokens=None))


DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61,
               "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
               "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
               "v_head_dim": 128, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("dtype", "config", "per_token"), [
    ("auto", LAB_MODEL_CONFIG, 253952),       # 2 × 62 × 8 × 128 × 2 B (bfloat16)
    ("fp8", LAB_MODEL_CONFIG, 126976),        # fp8 halves it
    ("fp8_e5m2", LAB_MODEL_CONFIG, 126976),
    ("auto", {**LAB_MODEL_CONFIG, "head_dim": None}, 2 * 62 * 8 * 64 * 2),  # 6144 ÷ 96 = 64
    ("auto", {k: v for k, v in LAB_MODEL_CONFIG.items() if k != "torch_dtype"}
     | {"dtype": "float16"}, 253952),         # newer transformers write "dtype"
    ("auto", {"text_config": LAB_MODEL_CONFIG}, 253952),  # a multimodal wrapper
    ("auto", DEEPSEEK_V3, 61 * (512 + 64) * 2),            # MLA: one latent + rope key
    ("fp8", DEEPSEEK_V3, 61 * (512 + 64)),
])
def test_the_kv_bytes_per_token_come_from_config_json_and_the_dtype(tmp_path, dtype, config,
                                                                    per_token):
    figures = sizing_of(tmp_path, dtype, config)
    assert figures["kv_bytes_per_token"] == per_token
    assert figures["working_set_bytes"] == 64 * 30000 * per_token


@pytest.mark.parametrize(("config", "dtype", "named"), [
    ({**LAB_MODEL_CONFIG, "num_hidden_layers": None}, "auto", "num_hidden_layers is None"),
    ({**LAB_MODEL_CONFIG, "torch_dtype": "float32"}, "auto", "torch_dtype is 'float32'"),
    ({**LAB_MODEL_CONFIG, "head_dim": None, "hidden_size": 6000}, "auto",
     "hidden_size 6000 is not a multiple"),
    ({**LAB_MODEL_CONFIG, "layer_types": ["full_attention", "linear_attention"]}, "auto",
     "layer_types names linear_attention"),
    ({**DEEPSEEK_V3, "qk_rope_head_dim": 0}, "auto", "qk_rope_head_dim is 0"),
])
def test_a_config_it_cannot_size_is_refused_naming_the_field(tmp_path, config, dtype, named):
    expected = "expected KV bytes per token from the model's config.json"
    with pytest.raises(ParseError, match=expected) as refused:
        sizing_of(tmp_path, dtype, config)
    assert named in str(refused.value)


def sizing_of(tmp_path, dtype, config):
    """The sizing script on ``config`` as the model's config.json."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config, indent=2))
    lmcache = tmp_path / "lmc.yaml"
    lmcache.write_text("max_local_cpu_size: 8\n")
    (tmp_path / "engine-t.log").write_text("GPU KV cache size: 600,000 tokens\n")
    command = probe("kv_tier_sizing").command(
        {"lmcache_config": str(lmcache), "num_prefixes": 64, "prefix_len": 30000,
         "model_path": str(model), "kv_cache_dtype": dtype, "tensor_parallel_size": 8,
         "result_dir": str(tmp_path), "port": 8000, "tag": "t"}, sudo=False)
    done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=30, check=True)
    return {m.metric: m.value for m in parse_output("vllm_metrics", done.stdout)}
