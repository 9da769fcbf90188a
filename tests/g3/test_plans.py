"""The G3 plan as data: the compact steps of gates.defaults expanded by runners.plans into the
probes of RUNBOOK §4.3, each command built from validated parameters."""

from types import SimpleNamespace

import pytest

from gates.defaults import DEFAULT_GATES, G3_ARMS, G3_PARAMS
from runners.plans import PlanError, node_steps
from runners.probes import ProbeParameterError, probe

G3 = next(g for g in DEFAULT_GATES if g["code"] == "G3")


class FakeNodes:
    def __init__(self, names):
        self.names = names

    def filter(self, role):
        return self

    def order_by(self, field):
        return self

    def first(self):
        return SimpleNamespace(pk=sorted(self.names)[0])

    def values_list(self, *fields):
        # the plan's one query for the first node of each role (and array): all inference
        return [(name, "inference", None) for name in sorted(self.names)]


def gate(plan, names=("lab-inference-1", "lab-inference-2")):
    return SimpleNamespace(code="G3", probe_plan=plan,
                           engagement=SimpleNamespace(nodes=FakeNodes(list(names))))


def node(name="lab-inference-1", role="inference"):
    return SimpleNamespace(name=name, role=role, pk=name)


def test_the_first_node_runs_the_read_back_then_interleaved_arms_for_two_rounds():
    steps = node_steps(gate(G3["probe_plan"]), node())
    measured = [(s["labels"]["phase"], s["arm"], s["labels"]["round"]) for s in steps
                if s["probe"] == "kv_bench_pass" and s["labels"]["pass"] == "measured"]
    # ABBA (issue 16): round 2 reverses the arms, and each round's order is recorded.
    assert measured == [("readback", "array", "1"),
                        ("compare", "local", "1"), ("compare", "array", "1"),
                        ("compare", "array", "2"), ("compare", "local", "2")]
    orders = {(s["labels"]["round"], s["labels"]["arm_order"]) for s in steps
              if s["labels"]["phase"] == "compare"}
    assert orders == {("1", "local,array"), ("2", "array,local")}
    fixed = node_steps(gate([{**G3["probe_plan"][1], "order": "fixed"}]), node())
    assert [(s["arm"], s["labels"]["round"]) for s in fixed if s["probe"] == "kv_bench_pass"
            and s["labels"]["pass"] == "measured"] == [
        ("local", "1"), ("array", "1"), ("local", "2"), ("array", "2")]
    with pytest.raises(PlanError, match="order"):
        node_steps(gate([{**G3["probe_plan"][1], "order": "random"}]), node())
    one_pass = [s["probe"] for s in steps if s["labels"]["phase"] == "compare"
                and s["arm"] == "local" and s["labels"]["round"] == "1"]
    assert one_pass == ["kv_engine_start", "kv_tier_sizing", "kv_bench_pass", "kv_engine_drain",
                        "kv_cache_evict", "kv_bench_pass", "kv_metrics_window", "kv_engine_stop"]
    readback = [s["probe"] for s in steps if s["labels"]["phase"] == "readback"]
    assert readback[readback.index("kv_cache_evict") + 1:] == [
        "rdma_counter_series", "kv_bench_pass", "rdma_counter_series", "kv_metrics_window",
        "kv_engine_stop"]


def test_other_nodes_run_only_the_shared_read_back():
    steps = node_steps(gate(G3["probe_plan"]), node("lab-inference-2"))
    assert {s["labels"]["phase"] for s in steps} == {"readback"}
    assert node_steps(gate(G3["probe_plan"]), node("lab-array-controller", "array")) == []


def test_each_probe_gets_only_the_parameters_it_declares_and_they_validate():
    steps = node_steps(gate(G3["probe_plan"]), node())
    for step in steps:
        spec = probe(step["probe"])
        assert set(step["params"]) <= set(spec.params), step["probe"]
        spec.clean({**step["params"], **({"result_dir": "/var/tmp/acctest/gate-run-1"}
                                         if "result_dir" in spec.params else {})})
    start = next(s for s in steps if s["probe"] == "kv_engine_start"
                 and s["arm"] == "array" and s["labels"]["phase"] == "compare")
    assert start["params"]["lmcache_config"] == G3_ARMS["array"]["lmcache_config"]
    assert start["params"]["tag"] == "lab-inference-1-compare-array-r1"
    evict = next(s for s in steps if s["probe"] == "kv_cache_evict" and s["arm"] == "local")
    assert evict["params"]["cache_device"] == "/dev/nvme0n1"


def test_the_engine_command_sets_the_arm_s_tier_and_the_hash_seed():
    spec = probe("kv_engine_start")
    values = {**{k: v for k, v in G3_PARAMS.items() if k in spec.params}, **G3_ARMS["array"],
              "arm": "array", "tag": "n1-compare-array-r1", "result_dir": "/var/tmp/acctest/r"}
    values = {k: v for k, v in values.items() if k in spec.params}
    command = spec.command(values)
    assert "PYTHONHASHSEED=0 LMCACHE_CONFIG_FILE=" in command
    assert '\'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\'' in command
    summary = spec.display(values, command)
    # Dev mode registers vLLM's POST /reset_prefix_cache; the engine then listens on loopback.
    assert summary.startswith("PYTHONHASHSEED=0 LMCACHE_CONFIG_FILE=/etc/acctest/lmc-array.yaml "
                              "VLLM_SERVER_DEV_MODE=1 "
                              "vllm serve /models/Qwen3-Coder-480B-A35B-Instruct-FP8")
    assert "--host 127.0.0.1 --port 8000" in summary
    assert "export VLLM_SERVER_DEV_MODE=1" in command
    plain = spec.display({**values, "reset_prefix_cache": False}, command)
    assert "VLLM_SERVER_DEV_MODE" not in plain and "--host" not in plain
    recompute = spec.display({**values, "arm": "recompute", "lmcache_config": ""}, command)
    assert "--kv-transfer-config" not in recompute and "LMCACHE" not in recompute


def test_the_flush_guard_refuses_paths_that_could_escape_the_mount():
    spec = probe("kv_cache_evict")
    base = {"result_dir": "/var/tmp/acctest/r", "port": 8000, "tag": "t",
            "cache_mount": "/mnt/fx", "cache_device": "/dev/nvme1n1"}
    for bad in ("/mnt/fx/../etc", "/mnt/fx/./x", "/", "relative/dir", "/mnt/fx;rm"):
        with pytest.raises(ProbeParameterError):
            spec.command({**base, "cache_dir": bad})
    assert "sysctl -w vm.drop_caches=3" in spec.command({**base, "cache_dir": "/mnt/fx/lmcache"})


def test_node_params_replace_the_plan_s_parameters_on_that_node_only():
    plan = [{**G3["probe_plan"][0], "node_params": {"lab-inference-2": {"port": 41000}}}]
    ports = {s["params"].get("port") for s in node_steps(gate(plan), node("lab-inference-2"))
             if "port" in s["params"]}
    assert ports == {41000}
    assert {s["params"].get("port") for s in node_steps(gate(plan), node())
            if "port" in s["params"]} == {8000}


def test_a_malformed_plan_step_is_refused_with_its_reason():
    with pytest.raises(PlanError, match="unknown plan expansion"):
        node_steps(gate([{"expand": "nope", "role": "inference"}]), node())
    with pytest.raises(PlanError, match="rounds"):
        node_steps(gate([{**G3["probe_plan"][1], "rounds": 0, "nodes": "all"}]), node())
    with pytest.raises(PlanError, match="arm_params"):
        node_steps(gate([{**G3["probe_plan"][1], "arms": ["local", "nvme9"],
                          "nodes": "all"}]), node())
