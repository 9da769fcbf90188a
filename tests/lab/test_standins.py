"""The lab stand-ins print the real tools' formats with the figures a scenario sets.

Every stand-in runs as a subprocess, the way the lab node runs it: found first on PATH, with
ACCEPTANCE_LAB_SCENARIO naming a scenario JSON file written from SCENARIOS. Expected figures are
computed by hand from the scenario table (runners/lab/scenarios.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runners.lab.scenarios import (
    SCENARIO_ENV,
    SCENARIO_FALLBACK_FILENAME,
    SCENARIOS,
    SIMULATED_MARKER,
    STANDIN_DIR,
    STANDIN_TOOLS,
    marker_line,
    scenario,
    scenario_with,
    write_scenario_file,
)


@pytest.fixture(autouse=True)
def private_dirs():
    """Replaces tests/conftest.py's autouse fixture of this name, which needs pytest-django's
    ``settings``: these tests start no lab server and use no Django, so they also run with
    ``-p no:django``."""
    yield


REAL_FIO = shutil.which("fio", path=os.defpath + os.pathsep + os.environ.get("PATH", ""))

# The command of RUNBOOK §3.2 with the healthy scenario's device.
FIO_ARRAY_READ = [
    "--name=seqread", "--filename=/dev/nvme24n1", "--readonly", "--rw=read", "--bs=1M",
    "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=8", "--offset_increment=10%",
    "--size=10%", "--time_based", "--runtime=60", "--ramp_time=10", "--group_reporting",
    "--output-format=json",
]


def bench_command(result_dir: Path) -> list[str]:
    """The RUNBOOK §3.4 baseline replay command."""
    return [
        "bench", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:8000",
        "--model", "qwen3-coder-480b", "--tokenizer", "/models/qwen3-coder-480b",
        "--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "30000",
        "--prefix-repetition-suffix-len", "512", "--prefix-repetition-num-prefixes", "64",
        "--prefix-repetition-output-len", "256", "--ignore-eos", "--num-prompts", "256",
        "--max-concurrency", "16", "--request-rate", "inf", "--temperature", "0", "--seed", "1",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--result-dir", str(result_dir), "--result-filename", "bench-c16.json",
        "--metadata", "gate=G2", "arm=local", "concurrency=16", "--disable-tqdm",
        "--ready-check-timeout-sec", "1800",
    ]


class Node:
    """Runs stand-ins like a lab node: stand-in dir first on PATH, scenario via the env var."""

    def __init__(self, tmp_path: Path, name_or_scenario: str | dict, overrides=None,
                 bin_dir: Path = STANDIN_DIR):
        self.tmp_path = tmp_path
        self.bin_dir = bin_dir
        self.scenario_file = write_scenario_file(tmp_path / "scenario.json", name_or_scenario,
                                                 overrides)
        self.env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "TMPDIR": str(tmp_path),          # self-test records stay inside the test
            "LC_ALL": "C",
            SCENARIO_ENV: str(self.scenario_file),
        }

    def run(self, tool: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin_dir / tool), *args], capture_output=True,
                              text=True, timeout=60, env=env or self.env, cwd=self.tmp_path)

    def ok(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        done = self.run(tool, *args)
        assert done.returncode == 0, (done.returncode, done.stderr)
        return done


def simulated(done: subprocess.CompletedProcess, name: str) -> bool:
    return done.stderr.splitlines()[:1] == [marker_line(name)]


# --- scenarios.py --------------------------------------------------------------------------

def test_scenarios_are_plain_json_with_the_schema():
    assert set(SCENARIOS) == {"healthy", "missing-drive", "failed-self-test", "slow-link",
                              "baseline-off", "kv-gain", "kv-no-gain", "kv-no-tier-hits",
                              "unstable-rounds", "boot-drive", "fabrics-controller",
                              "aborted-self-test", "self-test-in-progress",
                              "dram-tier-per-rank", "staggered-readback",
                              "readback-too-few-nodes"}
    for name, data in SCENARIOS.items():
        assert json.loads(json.dumps(data)) == data
        assert data["name"] == name
        assert set(data) == {"name", "description", "drives", "link", "fio", "bench", "kv",
                             "rdma", "mounts", "per_node"}
        assert set(data["kv"]) == {"host_tier_gb", "kv_bytes_per_token", "warmup", "arms"}
        assert set(data["kv"]["arms"]) == {"local", "array", "recompute"}
        assert set(data["rdma"]) == {"device", "port", "array_port_readback", "rx_bandwidth",
                                     "planned_nodes", "min_overlap_s", "readback_pass_s",
                                     "stagger_s", "first_read_delay_s"}
        assert set(data["drives"]) == {"count", "model", "serial_prefix", "firmware",
                                       "failed_self_test", "critical_warning",
                                       "extra_controllers", "nvme_cli", "aborted_self_test",
                                       "running_self_test", "stale_self_test"}
        assert set(data["link"]) == {"interface", "speed_mbps"}
        assert set(data["fio"]) == {"device", "read_bandwidth"}
        assert set(data["bench"]) == {"concurrency", "median_ttft_ms", "output_throughput",
                                      "num_prompts"}


def test_scenario_figures_against_the_reference():
    healthy = SCENARIOS["healthy"]
    assert healthy["drives"]["count"] == 24
    assert healthy["fio"]["read_bandwidth"] / 12.5e9 == pytest.approx(0.88)
    assert SCENARIOS["slow-link"]["fio"]["read_bandwidth"] / 12.5e9 == pytest.approx(0.76)
    # R2 local NVMe, c16: 17.31 s, 53.6 tok/s; healthy within ±10 %, baseline-off 15 % off.
    assert abs(healthy["bench"]["median_ttft_ms"] / 17310 - 1) < 0.10
    assert abs(healthy["bench"]["output_throughput"] / 53.6 - 1) < 0.10
    off = SCENARIOS["baseline-off"]["bench"]
    assert off["output_throughput"] == pytest.approx(53.6 * 0.85)
    assert off["median_ttft_ms"] == pytest.approx(17310 * 1.15, abs=1)
    assert SCENARIOS["missing-drive"]["drives"]["count"] == 23
    assert SCENARIOS["failed-self-test"]["drives"]["failed_self_test"] == [5]


def test_unknown_scenario_names_the_known_ones():
    with pytest.raises(KeyError) as raised:
        scenario("no-such")
    assert "healthy" in str(raised.value) and "baseline-off" in str(raised.value)


def test_scenario_copies_are_independent_and_overrides_merge():
    copy = scenario("healthy")
    copy["drives"]["count"] = 1
    assert SCENARIOS["healthy"]["drives"]["count"] == 24
    merged = scenario_with("healthy", {"drives": {"critical_warning": {"3": 4}}})
    assert merged["drives"]["critical_warning"] == {"3": 4}
    assert merged["drives"]["count"] == 24


def test_standins_are_executable_python_scripts_with_one_shared_preamble():
    preambles = set()
    for tool in STANDIN_TOOLS:
        path = STANDIN_DIR / tool
        assert os.access(path, os.X_OK), tool
        text = path.read_text()
        assert text.startswith("#!/usr/bin/env python3\n"), tool
        start = text.index("# --- common preamble")
        end = text.index("# --- end common preamble ---")
        preambles.add(text[start:end])
        assert f'SIMULATED_MARKER = "{SIMULATED_MARKER}"' in text
    assert len(preambles) == 1, "the common preamble differs between stand-ins"


# --- nvme ----------------------------------------------------------------------------------

def nvme_serials(document: dict) -> list[str]:
    return [controller["SerialNumber"]
            for device in document["Devices"]
            for subsystem in device["Subsystems"]
            for controller in subsystem["Controllers"]]


def test_nvme_version(tmp_path):
    done = Node(tmp_path, "healthy").ok("nvme", "version")
    assert done.stdout == "nvme version 2.11 (git 2.11)\nlibnvme version 1.11 (git 1.11)\n"
    assert simulated(done, "healthy")


@pytest.mark.parametrize(("name", "count"), [("healthy", 24), ("missing-drive", 23)])
def test_nvme_list_counts_distinct_serials(tmp_path, name, count):
    done = Node(tmp_path, name).ok("nvme", "list", "-o", "json")
    document = json.loads(done.stdout)
    serials = nvme_serials(document)
    assert len(serials) == len(set(serials)) == count
    assert sorted(serials)[0] == "FX1A0000"
    assert sorted(serials)[-1] == f"FX1A{count - 1:04d}"
    controller = document["Devices"][0]["Subsystems"][0]["Controllers"][0]
    assert controller["Transport"] == "pcie"
    assert controller["ModelNumber"] == "FX100 7.68TB U.2 NVMe SSD"
    assert controller["Namespaces"][0]["PhysicalSize"] == 7681501126656
    assert controller["Namespaces"][0]["SectorSize"] == 4096
    # nvme-cli 2.x prints json-c "pretty" output: two-space indent, no space after the colon.
    assert done.stdout.startswith('{\n  "Devices":[\n    {\n      "HostNQN":"nqn.2014-08.')
    assert simulated(done, name)


def newest_result(node: Node, index: int) -> dict:
    done = node.ok("nvme", "self-test-log", f"/dev/nvme{index}", "-o", "json")
    log = json.loads(done.stdout)
    assert log["Current Device Self-Test Operation"] == 0
    assert len(log["List of Valid Reports"]) == 20
    assert log["List of Valid Reports"][-1] == {"Self test result": 15}
    return log["List of Valid Reports"][0]


def test_nvme_self_test_failed_drive_five(tmp_path):
    node = Node(tmp_path, "failed-self-test")

    def start(index):
        return node.ok("nvme", "device-self-test", f"/dev/nvme{index}", "-n", "0xffffffff",
                       "-s", "1").stdout

    with ThreadPoolExecutor(max_workers=8) as pool:      # one controller each, as G1 does
        assert set(pool.map(start, range(24))) == {"Short Device self-test started\n"}
        newest = list(pool.map(lambda index: newest_result(node, index), range(24)))
    for index, entry in enumerate(newest):
        assert entry["Self test code"] == 1
        assert entry["Self test result"] == (7 if index == 5 else 0), index
        assert entry["Segment number"] == (2 if index == 5 else 0)


def test_nvme_self_test_log_shows_the_started_test_as_newest(tmp_path):
    node = Node(tmp_path, "healthy")
    before = newest_result(node, 3)["Power on hours"]
    node.ok("nvme", "device-self-test", "/dev/nvme3", "-n", "0xffffffff", "-s", "1")
    after = newest_result(node, 3)
    assert after["Self test result"] == 0
    assert after["Power on hours"] > before      # done: newer than the delivery test


def test_nvme_unknown_device_fails_like_nvme_cli(tmp_path):
    done = Node(tmp_path, "missing-drive").run("nvme", "device-self-test", "/dev/nvme23",
                                               "-n", "0xffffffff", "-s", "1")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines()[1] == "/dev/nvme23: No such file or directory"


def test_nvme_smart_log_shape_and_critical_warning(tmp_path):
    node = Node(tmp_path, "healthy", {"drives": {"critical_warning": {"7": 4}}})
    clean = json.loads(node.ok("nvme", "smart-log", "/dev/nvme0", "-o", "json").stdout)
    assert clean["critical_warning"]["value"] == 0
    assert 300 < clean["temperature"] < 330          # Kelvin
    assert clean["percent_used"] == 1 and clean["media_errors"] == 0
    warned = json.loads(node.ok("nvme", "smart-log", "/dev/nvme7", "-o", "json").stdout)
    assert warned["critical_warning"]["value"] == 4
    assert warned["critical_warning"]["reliability_degraded"] == 1


def test_nvme_unknown_command_is_a_usage_error(tmp_path):
    done = Node(tmp_path, "healthy").run("nvme", "frobnicate")
    assert done.returncode == 1
    assert "Invalid sub-command 'frobnicate'" in done.stderr


# --- ethtool -------------------------------------------------------------------------------

def test_ethtool_speed_line(tmp_path):
    node = Node(tmp_path, "healthy")
    assert node.ok("ethtool", "--version").stdout == "ethtool version 6.1\n"
    done = node.ok("ethtool", "ens1f0")
    lines = done.stdout.splitlines()
    assert lines[0] == "Settings for ens1f0:"
    assert "\tSpeed: 100000Mb/s" in lines
    assert "\tDuplex: Full" in lines
    assert "\tPort: Direct Attach Copper" in lines
    assert lines[-1] == "\tLink detected: yes"
    assert "\t                        100000baseCR4/Full" in lines
    assert simulated(done, "healthy")


def test_ethtool_speed_follows_the_scenario_and_unknown_interface_fails(tmp_path):
    node = Node(tmp_path, "healthy", {"link": {"speed_mbps": 25000}})
    assert "\tSpeed: 25000Mb/s" in node.ok("ethtool", "ens1f0").stdout.splitlines()
    missing = node.run("ethtool", "eth7")
    assert missing.returncode == 75
    assert missing.stdout == "No data available\n"
    assert "netlink error: no device matches name (offset 24)" in missing.stderr


# --- fio -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "bandwidth"), [("healthy", 11_000_000_000),
                                                  ("slow-link", 9_500_000_000)])
def test_fio_array_read_bandwidth(tmp_path, name, bandwidth):
    node = Node(tmp_path, name)
    assert node.ok("fio", "--version").stdout == "fio-3.33\n"
    done = node.ok("fio", *FIO_ARRAY_READ)
    document = json.loads(done.stdout)
    assert document["fio version"] == "fio-3.33"
    assert len(document["jobs"]) == 1                     # --group_reporting
    job = document["jobs"][0]
    read = job["read"]
    assert job["jobname"] == "seqread" and job["error"] == 0
    assert read["bw_bytes"] == bandwidth
    # fio stat.c: bw = bw_bytes / 1024 in integer arithmetic. For 11.0e9 B/s that is
    # 10742187 (10742187.5 truncated); Python's round() would give 10742188.
    assert read["bw"] == bandwidth // 1024
    assert read["runtime"] == 60001                       # --runtime=60, fio's +1 ms
    assert 1000 * read["io_bytes"] // read["runtime"] == bandwidth
    assert read["io_kbytes"] == read["io_bytes"] >> 10
    assert read["iops"] == pytest.approx(1000 * read["total_ios"] / read["runtime"])
    assert set(read["clat_ns"]["percentile"]) >= {"1.000000", "50.000000", "99.000000",
                                                  "99.990000"}
    assert job["write"]["bw_bytes"] == 0 and job["trim"]["io_bytes"] == 0
    assert document["disk_util"][0]["name"] == "nvme24n1"
    assert '  "fio version" : "fio-3.33",\n' in done.stdout   # fio's "key" : value layout
    assert simulated(done, name)


def test_fio_without_group_reporting_sums_to_the_scenario(tmp_path):
    node = Node(tmp_path, "healthy")
    args = [a for a in FIO_ARRAY_READ if a != "--group_reporting"]
    document = json.loads(node.ok("fio", *args).stdout)
    assert len(document["jobs"]) == 8
    assert sum(job["read"]["bw_bytes"] for job in document["jobs"]) == 11_000_000_000


def test_fio_output_file(tmp_path):
    node = Node(tmp_path, "healthy")
    target = tmp_path / "fio.json"
    done = node.ok("fio", *FIO_ARRAY_READ, f"--output={target}")
    assert done.stdout == ""
    assert json.loads(target.read_text())["jobs"][0]["read"]["bw_bytes"] == 11_000_000_000


@pytest.mark.skipif(REAL_FIO is None, reason="no real fio installed")
def test_fio_on_a_real_scratch_file_runs_the_real_fio(tmp_path):
    node = Node(tmp_path, "healthy")
    scratch = tmp_path / "scratch.bin"
    done = node.run("fio", "--name=scratch", f"--filename={scratch}", "--size=1M",
                    "--rw=write", "--bs=64k", "--output-format=json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout[done.stdout.index("{"):])
    assert document["fio version"].startswith("fio-")
    assert document["jobs"][0]["write"]["io_bytes"] == 1024 * 1024   # really written
    assert SIMULATED_MARKER not in done.stderr
    assert scratch.stat().st_size == 1024 * 1024


# --- vllm ----------------------------------------------------------------------------------

def test_vllm_bench_serve_result_file(tmp_path):
    node = Node(tmp_path, "healthy")
    assert node.ok("vllm", "--version").stdout == "0.20.1\n"
    result_dir = tmp_path / "acctest" / "RUN"          # does not exist yet
    done = node.ok("vllm", *bench_command(result_dir))
    assert simulated(done, "healthy")
    assert "============ Serving Benchmark Result ============" in done.stdout
    assert "Median TTFT (ms):                        17500.00  " in done.stdout.splitlines()
    result = json.loads((result_dir / "bench-c16.json").read_text())
    assert result["median_ttft_ms"] == 17500.0
    assert result["p50_ttft_ms"] == 17500.0
    assert result["output_throughput"] == 54.1
    assert result["completed"] == 256 and result["failed"] == 0
    assert result["max_concurrency"] == 16 and result["request_rate"] == "inf"
    # 256 requests × 256 output tokens at 54.1 tok/s.
    assert result["total_output_tokens"] == 65536
    assert result["duration"] == pytest.approx(65536 / 54.1)
    assert result["total_input_tokens"] == 256 * (30000 + 512)
    assert (result["gate"], result["arm"], result["concurrency"]) == ("G2", "local", "16")
    keys = list(result)
    assert keys[:7] == ["date", "endpoint_type", "backend", "label", "model_id",
                        "tokenizer_id", "num_prompts"]
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p90", "p99"):
            assert f"{stat}_{metric}_ms" in result
    assert result["p99_ttft_ms"] > result["p90_ttft_ms"] > result["median_ttft_ms"]


def test_vllm_baseline_off_figures(tmp_path):
    node = Node(tmp_path, "baseline-off")
    node.ok("vllm", *bench_command(tmp_path))
    result = json.loads((tmp_path / "bench-c16.json").read_text())
    assert result["median_ttft_ms"] == 19906.0
    assert result["output_throughput"] == 45.56


# --- installation the way the lab does it --------------------------------------------------

def test_installed_copy_with_absolute_shebang_and_fallback_scenario(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in STANDIN_TOOLS:
        text = (STANDIN_DIR / tool).read_text()
        target = bin_dir / tool
        target.write_text(f"#!{sys.executable}\n" + text.split("\n", 1)[1])
        target.chmod(0o755)
    write_scenario_file(bin_dir / SCENARIO_FALLBACK_FILENAME, "missing-drive")
    node = Node(tmp_path, "healthy", bin_dir=bin_dir)
    env = {key: value for key, value in node.env.items() if key != SCENARIO_ENV}
    done = node.run("nvme", "list", "-o", "json", env=env)    # sudo drops the variable
    assert done.returncode == 0, done.stderr
    assert len(nvme_serials(json.loads(done.stdout))) == 23
    assert simulated(done, "missing-drive")


def test_no_scenario_is_a_loud_error(tmp_path):
    node = Node(tmp_path, "healthy")
    env = {key: value for key, value in node.env.items() if key != SCENARIO_ENV}
    done = node.run("ethtool", "ens1f0", env=env)
    assert done.returncode == 1
    assert SCENARIO_ENV in done.stderr and done.stdout == ""


# --- the stand-ins' output through the real parsers -----------------------------------------

def measurements(tool: str, raw: str) -> dict[str, float]:
    parsers = pytest.importorskip("runners.parsers")
    return {m.metric: m.value for m in parsers.parse_output(tool, raw.encode())}


@pytest.mark.parametrize(("name", "drives"), [("healthy", 24), ("missing-drive", 23)])
def test_parsers_read_the_drive_count(tmp_path, name, drives):
    raw = Node(tmp_path, name).ok("nvme", "list", "-o", "json").stdout
    assert measurements("nvme_list", raw)["drive_count"] == drives


def test_parsers_read_self_test_and_smart(tmp_path):
    node = Node(tmp_path, "failed-self-test")
    node.ok("nvme", "device-self-test", "/dev/nvme5", "-n", "0xffffffff", "-s", "1")
    failed = node.ok("nvme", "self-test-log", "/dev/nvme5", "-o", "json").stdout
    passed = node.ok("nvme", "self-test-log", "/dev/nvme4", "-o", "json").stdout
    assert measurements("nvme_self_test_log", failed)["self_test_failures"] == 1
    assert measurements("nvme_self_test_log", passed)["self_test_failures"] == 0
    smart = measurements("nvme_smart_log",
                         node.ok("nvme", "smart-log", "/dev/nvme0", "-o", "json").stdout)
    assert smart["critical_warning"] == 0
    assert smart["media_errors"] == 0


def test_parsers_read_link_speed_bandwidth_and_ttft(tmp_path):
    node = Node(tmp_path, "healthy")
    assert measurements("ethtool", node.ok("ethtool", "ens1f0").stdout)["link_speed"] == 12.5e9
    fio = measurements("fio", node.ok("fio", *FIO_ARRAY_READ).stdout)
    assert fio["read_bandwidth"] == 11.0e9
    node.ok("vllm", *bench_command(tmp_path))
    bench = measurements("vllm_bench", (tmp_path / "bench-c16.json").read_text())
    assert bench["ttft_p50"] == pytest.approx(17.5)
    assert bench["output_throughput"] == pytest.approx(54.1)
