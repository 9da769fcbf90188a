"""The G3 stand-ins: ``vllm serve`` (a real HTTP engine on 127.0.0.1 whose /metrics move with the
passes the benchmark client reports), ``vllm bench serve`` per arm and round, the RDMA counter
(``cat``), ``findmnt`` and ``sysctl`` — run as subprocesses the way a lab node runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runners.lab.scenarios import STANDIN_DIR, marker_line, write_scenario_file
from runners.lab.server import free_port
from runners.parsers import parse_output

KV = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'


@pytest.fixture(autouse=True)
def private_dirs():
    """No Django needed (see test_standins.py)."""
    yield


class LabNode:
    def __init__(self, tmp_path: Path, name="kv-gain", overrides=None):
        self.tmp = tmp_path
        self.scenario = write_scenario_file(tmp_path / "scenario.json", name, overrides)
        self.config = tmp_path / "lmc-array.yaml"
        self.config.write_text("local_cpu: true\nmax_local_cpu_size: 64\n")
        self.env = {"PATH": f"{STANDIN_DIR}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
                    "ACCEPTANCE_LAB_SCENARIO": str(self.scenario), "LC_ALL": "C",
                    "PYTHONHASHSEED": "0", "LMCACHE_CONFIG_FILE": str(self.config)}
        self.engines: list[subprocess.Popen] = []

    def run(self, *argv, **env):
        return subprocess.run([*argv], capture_output=True, text=True, timeout=60,
                              env={**self.env, **env}, cwd=self.tmp)

    def serve(self, port, *extra, **env):
        engine = subprocess.Popen(
            [str(STANDIN_DIR / "vllm"), "serve", "/models/m", "--served-model-name", "m",
             "--port", str(port), *extra], env={**self.env, **env},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.engines.append(engine)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                return engine
            except OSError:
                if engine.poll() is not None:
                    return engine
                time.sleep(0.02)
        raise AssertionError("the engine stand-in did not answer")

    def bench(self, port, arm, round_, stage):
        return self.run(str(STANDIN_DIR / "vllm"), "bench", "serve", "--backend", "openai",
                        "--base-url", f"http://127.0.0.1:{port}", "--model", "m",
                        "--dataset-name", "prefix_repetition",
                        "--prefix-repetition-prefix-len", "30000",
                        "--prefix-repetition-suffix-len", "512",
                        "--prefix-repetition-num-prefixes", "64",
                        "--prefix-repetition-output-len", "256", "--num-prompts", "256",
                        "--max-concurrency", "16", "--save-result", "--result-dir",
                        str(self.tmp), "--result-filename", f"{arm}-{round_}-{stage}.json",
                        "--metadata", "concurrency=16", "phase=compare", f"arm={arm}",
                        f"round={round_}", f"pass={stage}")

    def stop(self):
        for engine in self.engines:
            if engine.poll() is None:
                engine.send_signal(signal.SIGTERM)
                engine.wait(timeout=10)


@pytest.fixture
def node(tmp_path):
    lab = LabNode(tmp_path)
    yield lab
    lab.stop()


def scrape(port, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return f"# acceptance-scrape: name={name} time={time.time():.9f} url=x\n{body}"


def test_the_engine_answers_health_models_and_metrics_on_loopback(node):
    port = free_port()
    # --host 0.0.0.0 as a real deployment would say it; the stand-in binds 127.0.0.1 anyway.
    engine = node.serve(port, "--kv-transfer-config", KV, "--host", "0.0.0.0")  # noqa: S104
    models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models").read())
    assert models["data"][0]["id"] == "m"
    metrics = scrape(port, "t0")
    assert 'vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 0.0' in metrics
    assert "lmcache:num_remote_read_bytes_total" in metrics
    pid_file = node.tmp / "engines" / f"{port}.pid"
    assert pid_file.read_text().strip() == str(engine.pid)
    engine.send_signal(signal.SIGTERM)
    assert engine.wait(timeout=10) == 0
    assert engine.stderr.read().splitlines()[0] == marker_line("kv-gain")
    assert not pid_file.exists()


def test_a_measured_pass_moves_the_engine_s_counters_as_the_scenario_says(node):
    port = free_port()
    node.serve(port, "--kv-transfer-config", KV)
    t0 = scrape(port, "t0")
    warm = node.bench(port, "array", 2, "warmup")
    assert warm.returncode == 0, warm.stderr
    assert json.loads((node.tmp / "array-2-warmup.json").read_text())["median_ttft_ms"] == \
        149480.0
    done = node.bench(port, "array", 2, "measured")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == marker_line("kv-gain")
    result = json.loads((node.tmp / "array-2-measured.json").read_text())
    assert (result["median_ttft_ms"], result["output_throughput"]) == (12028.0, 73.78)
    assert (result["arm"], result["round"], result["pass"]) == ("array", "2", "measured")
    window = {m.metric: m.value
              for m in parse_output("vllm_metrics", (t0 + scrape(port, "t1")).encode())}
    # 64 prefixes × 30000 tokens hit in the array tier, 253952 B each; repeats of a prefix
    # inside the pass hit the GPU prefix cache (256 − 64) × 30000 per pass.
    assert window["external_prefix_cache_hit_tokens"] == 64 * 30000
    assert window["external_tier_read_bytes"] == 64 * 30000 * 253952
    assert window["prefix_cache_hit_tokens"] == 2 * (256 - 64) * 30000


def test_without_a_fixed_hash_seed_the_external_tier_never_hits(node):
    port = free_port()
    node.serve(port, "--kv-transfer-config", KV, PYTHONHASHSEED="random")
    t0 = scrape(port, "t0")
    assert node.bench(port, "array", 1, "measured").returncode == 0
    window = {m.metric: m.value
              for m in parse_output("vllm_metrics", (t0 + scrape(port, "t1")).encode())}
    assert window["external_prefix_cache_hit_tokens"] == 0


def test_the_engine_needs_its_lmcache_config_and_a_free_port(node):
    port = free_port()
    missing = node.run(str(STANDIN_DIR / "vllm"), "serve", "/models/m", "--port", str(port),
                       "--kv-transfer-config", KV, LMCACHE_CONFIG_FILE="/nonexistent.yaml")
    assert missing.returncode == 1 and "LMCache config file" in missing.stderr
    node.serve(port)  # no KV connector: recompute arm, no external counters at all
    assert "external_prefix_cache" not in scrape(port, "t0")
    busy = node.run(str(STANDIN_DIR / "vllm"), "serve", "/models/m", "--port", str(port))
    assert busy.returncode == 1 and "error while attempting to bind" in busy.stderr


def test_a_g3_pass_without_an_engine_fails_as_the_real_client_does(node):
    done = node.bench(free_port(), "array", 1, "measured")
    assert done.returncode == 1 and "Cannot connect to host" in done.stderr


def test_the_rdma_counter_grows_at_the_node_s_read_back_rate(tmp_path):
    node = LabNode(tmp_path, overrides={"rdma": {"rx_bandwidth": 2.0e9}})
    path = "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"
    first = node.run(str(STANDIN_DIR / "cat"), path)
    started = time.time()
    time.sleep(0.5)
    second = node.run(str(STANDIN_DIR / "cat"), "--", path)
    elapsed = time.time() - started
    assert first.stderr.splitlines() == [marker_line("kv-gain")]
    words = int(second.stdout) - int(first.stdout)
    assert words * 4 / elapsed == pytest.approx(2.0e9, rel=0.1)
    other = node.run(str(STANDIN_DIR / "cat"), str(node.scenario))
    assert json.loads(other.stdout)["name"] == "kv-gain" and other.stderr == ""


def test_findmnt_places_the_cache_directories_and_sysctl_only_drops_caches(tmp_path):
    node = LabNode(tmp_path)
    found = node.run(str(STANDIN_DIR / "findmnt"), "-n", "-o", "SOURCE,TARGET", "--target",
                     "/mnt/fx/lmcache")
    assert (found.returncode, found.stdout) == (0, "/dev/nvme1n1 /mnt/fx\n")
    assert found.stderr.splitlines() == [marker_line("kv-gain")]
    local = node.run(str(STANDIN_DIR / "findmnt"), "-n", "-o", "TARGET,SOURCE", "-T",
                     "/mnt/local-nvme/lmcache/x")
    assert local.stdout == "/mnt/local-nvme /dev/nvme0n1\n"
    drop = node.run(str(STANDIN_DIR / "sysctl"), "-w", "vm.drop_caches=3")
    assert (drop.returncode, drop.stdout) == (0, "vm.drop_caches = 3\n")
    refused = node.run(str(STANDIN_DIR / "sysctl"), "-w", "vm.swappiness=10")
    assert refused.returncode == 1 and "changes no kernel setting" in refused.stderr


def test_reset_prefix_cache_answers_only_in_dev_mode_and_the_kv_capacity_is_logged(node):
    """vLLM registers POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 (FastAPI's 404
    otherwise) and logs "GPU KV cache size: N tokens" with thousands separators at start."""
    plain, dev = free_port(), free_port()
    engine = node.serve(plain, "--kv-transfer-config", KV)
    node.serve(dev, "--kv-transfer-config", KV, VLLM_SERVER_DEV_MODE="1")
    request = urllib.request.Request(f"http://127.0.0.1:{plain}/reset_prefix_cache",
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)  # noqa: S310 (the stand-in on loopback)
    assert refused.value.code == 404
    request = urllib.request.Request(f"http://127.0.0.1:{dev}/reset_prefix_cache",
                                     method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
        assert (answer.status, answer.read()) == (200, b"")
    engine.send_signal(signal.SIGTERM)
    engine.wait(timeout=10)
    log = engine.stderr.read().splitlines()
    assert log[1].startswith("(EngineCore_DP0 pid=") and log[1].endswith(
        "GPU KV cache size: 600,000 tokens")


def test_in_a_comparison_the_rdma_counter_grows_by_the_array_tier_s_reads_only(tmp_path):
    lab = LabNode(tmp_path, overrides={"kv": {"arms": {"array": {"storage_hit_ratio": 0.85}}}})
    try:
        port = free_port()
        lab.serve(port, "--kv-transfer-config", KV)
        counter = "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"

        def words():
            done = lab.run(str(STANDIN_DIR / "cat"), counter)
            assert done.returncode == 0, done.stderr
            return int(done.stdout)

        assert lab.bench(port, "array", 1, "warmup").returncode == 0  # the comparison starts
        before = words()
        time.sleep(0.3)  # the read-back's steady rate is paused: time adds nothing
        assert lab.bench(port, "array", 1, "measured").returncode == 0
        after = words()
        # 0.85 of the 64 × 30000 hits were read from the array, 253952 B per token.
        assert (after - before) * 4 == round(64 * 30000 * 0.85) * 253952
    finally:
        lab.stop()


def test_failed_requests_of_one_arm_are_saved_under_vllm_s_keys(tmp_path):
    """serve.py saves ``completed`` (successful requests only) and ``failed``; the parser reads
    them as completed_requests and failed_requests."""
    lab = LabNode(tmp_path, name="kv-failed-requests")
    try:
        port = free_port()
        lab.serve(port, "--kv-transfer-config", KV)
        for arm, round_ in (("array", 1), ("array", 2), ("local", 2)):
            done = lab.bench(port, arm, round_, "measured")
            assert done.returncode == 0, done.stderr
        saved = {name: json.loads((tmp_path / f"{name}-measured.json").read_text())
                 for name in ("array-1", "array-2", "local-2")}
        assert [(saved[n]["completed"], saved[n]["failed"]) for n in saved] == [
            (256, 0), (253, 3), (256, 0)]
        assert "Failed requests:                         3" in lab.bench(
            port, "array", 2, "measured").stdout
        figures = {m.metric: m.value for m in parse_output(
            "vllm_bench", (tmp_path / "array-2-measured.json").read_bytes())}
        assert (figures["completed_requests"], figures["failed_requests"]) == (253, 3)
    finally:
        lab.stop()
