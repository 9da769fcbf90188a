"""Lab scenarios: the figures the stand-in tools print on a lab node.

In the lab a real OpenSSH server on 127.0.0.1 plays the customer's nodes, and the hardware-bound
tools (``nvme``, ``ethtool``, ``fio``, ``vllm`` — the benchmark client and the serving engine —
and, for G3, ``cat`` of the RDMA port counters, ``findmnt`` of the cache filesystems and
``sysctl`` for the page-cache drop) are replaced by the stand-in executables in
``runners/lab/standins/``, placed first on that node's PATH (``cat``, ``findmnt`` and ``fio``
simulate only their hardware targets and run the real tool otherwise). A stand-in prints output
in the exact format of the real tool (RUNBOOK.md §2.1-2.4, §3.1-3.4, §4), filled with the figures
of one
scenario below, and writes :data:`SIMULATED_MARKER` (plus the scenario name) to stderr so the
runner labels the evidence as simulated.

How a stand-in finds its scenario: the JSON file named by the environment variable
:data:`SCENARIO_ENV`; failing that (``sudo`` resets the environment), the file
:data:`SCENARIO_FALLBACK_FILENAME` in the stand-in's own directory. The file holds one scenario
dict, complete (every key of the schema); write it with :func:`write_scenario_file`, which
also applies overrides to a built-in scenario.

Schema (every value plain JSON)::

    {"name": str, "description": str,
     "drives": {"count": int, "model": str, "serial_prefix": str, "firmware": str,
                "failed_self_test": [int, ...], "critical_warning": {str(int): int},
                "extra_controllers": [{"kind": "boot"|"fabrics", "model": str,
                                       "serial": str}, ...], "nvme_cli": "2.11"|"2.10",
                "aborted_self_test": {str(int): int}, "running_self_test": [int, ...],
                "stale_self_test": [int, ...]},
     "link": {"interface": str, "speed_mbps": int},
     "fio": {"device": str, "read_bandwidth": float},
     "bench": {"concurrency": int, "median_ttft_ms": float, "output_throughput": float,
               "num_prompts": int},
     "kv": {"host_tier_gb": float, "kv_bytes_per_token": int,
            "warmup": {"median_ttft_ms": float, "output_throughput": float},
            "arms": {ARM: {"median_ttft_ms": [float, ...], "output_throughput": [float, ...],
                           "external_hit_ratio": float}}},
     "rdma": {"device": str, "port": int, "array_port_readback": float,
              "rx_bandwidth": float | None, "planned_nodes": int | None,
              "min_overlap_s": float, "readback_pass_s": float, "stagger_s": float,
              "first_read_delay_s": float},
     "mounts": {str: str},
     "per_node": {str(int): {section: {...}}}}

Figures and their meaning:

``drives`` — the array controller's local PCIe NVMe drives (RUNBOOK §1: drive inventory,
self-tests and SMART run on the array's own controller).
  * ``count`` — drives that ``nvme list -o json`` shows, as controllers ``nvme0`` … and
    namespaces ``nvme0n1`` …; the FX100 has 24 (DOMAIN.md, gate G1 "all 24 drives").
  * ``model`` / ``firmware`` — ``ModelNumber`` / ``Firmware`` of every drive.
  * ``serial_prefix`` — ``SerialNumber`` is this prefix plus the drive index zero-padded to 4
    digits (``FX1A0000`` …), so serials are distinct and ``drive_count`` counts drives.
  * ``failed_self_test`` — drive indices whose newest ``nvme self-test-log`` entry has
    ``Self test result`` 7 ("failed segment", ``Segment number`` 2); every other drive shows 0.
  * ``extra_controllers``, ``nvme_cli``, ``aborted_self_test``, ``running_self_test``,
    ``stale_self_test`` (optional) — a boot SSD or fabrics controller beside the drives, the
    flat nvme-cli 2.10 list, an aborted / never-ending / never-logged self-test (the ``nvme``
    stand-in's docstring says each).
  * ``critical_warning`` — drive index → SMART critical-warning bit field (bit 0 spare below
    threshold, 1 temperature, 2 reliability degraded, 3 read-only, 4 volatile backup failed,
    5 PMR read-only). JSON object keys are strings; ``"5"`` and ``5`` are both accepted.
``link`` — the inference node's NIC towards the array.
  * ``interface`` — the only interface name ``ethtool IF`` knows (others fail like the real
    tool).
  * ``speed_mbps`` — the ``Speed:`` line in Mb/s; 100000 Mb/s = 12.5e9 B/s line rate. 0 means
    no link ("Speed: Unknown!", "Link detected: no").
``fio`` — the sequential-read line-efficiency run (RUNBOOK §3.2).
  * ``device`` — the only ``--filename`` the stand-in simulates (the array namespace as seen from
    the inference node); any other filename runs the real fio.
  * ``read_bandwidth`` — B/s printed as ``read.bw_bytes`` (summed over jobs);
    line efficiency = read_bandwidth ÷ (speed_mbps × 1e6 / 8).
``bench`` — the ``vllm bench serve`` baseline replay (RUNBOOK §3.4), compared with reference R2,
local-NVMe arm, concurrency 16: TTFT p50 17.31 s, 53.6 tok/s (G2 passes within ±10 %).
  * ``concurrency`` — the concurrency the figures describe (``--max-concurrency``).
  * ``median_ttft_ms`` — ``median_ttft_ms`` and ``p50_ttft_ms`` of the saved result (ms).
  * ``output_throughput`` — ``output_throughput`` in output tokens per second.
  * ``num_prompts`` — requests completed when the command gives no ``--num-prompts``.
``kv`` — the G3 cold-resume comparison (RUNBOOK §4.1-4.4) against reference R2 at concurrency 16
(array 11.85 s / 74.9 tok/s, local NVMe 17.31 s / 53.6 tok/s, full recompute 149.48 s / 4.1).
  * ``host_tier_gb`` — ``max_local_cpu_size`` the lab writes into its LMCache configs, per TP
    rank (the host-memory tier the working set must exceed is this × the ranks, RUNBOOK §4.2).
  * ``kv_bytes_per_token`` — bytes of KV cache per token; the engine stand-in counts external
    hits × this as bytes read from the array tier (``lmcache:num_remote_read_bytes``).
  * ``warmup`` — what a warm-up (populate) pass prints: the tier is cold, so prefill is
    recomputed (R2 full recompute, c16).
  * ``arms`` — per arm (``local``, ``array``, ``recompute``) the measured pass's figures, one per
    round (round 1, 2, …; the last repeats for later rounds), and ``external_hit_ratio``: the
    share of each prefix's first request served by the external tier (LMCache) in a measured
    pass; 0 means the tier was never hit (an invalid arm). An engine started without
    ``--kv-transfer-config`` never reports external hits.
``rdma`` — the inference node's RDMA port (RUNBOOK §3.3): ``device`` and ``port`` name the sysfs
counter ``/sys/class/infiniband/DEV/ports/PORT/counters/port_rcv_data`` the ``cat`` stand-in
simulates (4-byte words, growing at the node's read-back rate). ``array_port_readback`` is
what the array's port delivers in all (B/s) when the nodes read back together; ``lab up``
gives each of N nodes ``array_port_readback ÷ N`` as its ``rx_bandwidth`` unless that is set
(``null``: the whole figure on one node). ``planned_nodes`` is the read-back's planned node
count (``null``: every inference node of the lab) and ``min_overlap_s`` the shortest overlap
window that counts, both written into the lab's G3 plan; ``readback_pass_s`` is how long the
``vllm`` stand-in's measured read-back pass lasts in real seconds (the window the counter is
sampled over); ``first_read_delay_s`` makes the ``cat`` stand-in answer the first counter read
after ``lab up`` that many seconds late (a node that starts reading late), and ``stagger_s``
sets it to (i − 1) × ``stagger_s`` on node *i* (a staggered read-back).
``mounts`` — mount point → source device as ``findmnt`` reports it on the inference node (the
G3 cache-flush guard checks the cache directory is on the expected device).
``per_node`` — overrides merged into inference node *i*'s scenario only (``lab up --nodes N``,
nodes 1 … N), e.g. ``{"3": {"rdma": {"rx_bandwidth": 0.3e9}}}`` makes node 3 read back slowly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from runners.probes import SIMULATED_MARKER

#: Every stand-in writes this (followed by `` (scenario NAME)``) as one line to stderr; the runner
#: searches stderr for it to label the evidence as simulated. Real tools passed through (fio on a
#: real scratch file) do not write it.

#: Environment variable naming the scenario JSON file a stand-in reads.
SCENARIO_ENV = "ACCEPTANCE_LAB_SCENARIO"

#: Read from the stand-in's own directory when :data:`SCENARIO_ENV` is unset (``sudo`` drops it).
SCENARIO_FALLBACK_FILENAME = "acceptance-lab-scenario.json"

#: Where the stand-in executables live, and their names (the lab copies them into a bin dir).
STANDIN_DIR = Path(__file__).resolve().parent / "standins"
STANDIN_TOOLS = ("nvme", "ethtool", "fio", "vllm", "cat", "findmnt", "sysctl")

# R2 reference, local-NVMe arm, concurrency 16 (DOMAIN.md): what the G2 baseline is compared with.
R2_LOCAL_NVME_C16_TTFT_P50_MS = 17310.0
R2_LOCAL_NVME_C16_OUTPUT_THROUGHPUT = 53.6

# 100 GbE line rate in B/s (100000 Mb/s × 1e6 / 8).
LINE_RATE_100GBE = 12.5e9

# R2, concurrency 16 (DOMAIN.md): TTFT p50 (ms) and output tok/s per G3 arm.
R2_C16 = {"local": (17310.0, 53.6), "array": (11850.0, 74.9), "recompute": (149480.0, 4.1)}
# Qwen3-Coder-480B-A35B: 62 layers × 8 KV heads × head_dim 128, bf16 KV cache:
# 2 × 62 × 8 × 128 × 2 B = 253952 B per token (RUNBOOK §4.2 formula).
KV_BYTES_PER_TOKEN = 253952


def marker_line(name: str) -> str:
    """The exact stderr line a stand-in writes for scenario ``name``."""
    return f"{SIMULATED_MARKER} (scenario {name})"


def _healthy() -> dict:
    return {
        "name": "healthy",
        "description": (
            "Everything passes: 24 drives present, every self-test passes, no SMART warning, "
            "100 GbE link, fio reads 11.0e9 B/s (88 % of 12.5e9), and the c16 baseline is "
            "within ±10 % of R2 (TTFT p50 17.5 s vs 17.31 s, 54.1 vs 53.6 tok/s)."
        ),
        "drives": {
            # FX100: 24 × 7.68 TB U.2 NVMe drives (DOMAIN.md); G1 wants all 24 recognised.
            "count": 24,
            "model": "FX100 7.68TB U.2 NVMe SSD",
            # SerialNumber = prefix + 4-digit index: FX1A0000 … FX1A0023.
            "serial_prefix": "FX1A",
            "firmware": "FX1.2.0",
            # No drive fails its short self-test (newest result 0 everywhere).
            "failed_self_test": [],
            # No SMART critical warning on any drive.
            "critical_warning": {},
            # Issue 16's G1 situations, all off: no boot SSD or fabrics controller beside the
            # drives, nvme-cli 2.11's list shape, no aborted / never-ending / never-logged test.
            "extra_controllers": [],
            "nvme_cli": "2.11",
            "aborted_self_test": {},
            "running_self_test": [],
            "stale_self_test": [],
        },
        "link": {
            # The node's 100 GbE RoCE port towards the array.
            "interface": "ens1f0",
            # 100000 Mb/s = 12.5e9 B/s, the denominator of line efficiency.
            "speed_mbps": 100000,
        },
        "fio": {
            # The array namespace as the inference node sees it (NVMe-oF over RoCE).
            "device": "/dev/nvme24n1",
            # 11.0e9 / 12.5e9 = 88 % line efficiency: passes the 83 % G2 threshold.
            "read_bandwidth": 11.0e9,
        },
        "bench": {
            # R2 reference row: concurrency 16.
            "concurrency": 16,
            # 17500 / 17310 − 1 = +1.1 %: within ±10 % of R2 local-NVMe TTFT p50.
            "median_ttft_ms": 17500.0,
            # 54.1 / 53.6 − 1 = +0.9 %: within ±10 % of R2 local-NVMe throughput.
            "output_throughput": 54.1,
            # Requests per measured pass (RUNBOOK §3.4 command).
            "num_prompts": 256,
        },
        "kv": {
            # max_local_cpu_size of the lab's LMCache configs: 40 GB per TP rank, × 8 ranks
            # = 343.6 GB (GiB counted), below the working set (64 prefixes × 30000 tokens ×
            # 253952 B ≈ 487.6 GB). 64 GB per rank would be 549.8 GB: scenario dram-tier-per-rank.
            "host_tier_gb": 40,
            "kv_bytes_per_token": KV_BYTES_PER_TOKEN,
            # A warm-up pass finds the tier cold: full prefill, as R2's recompute column.
            "warmup": {"median_ttft_ms": 149480.0, "output_throughput": 4.1},
            "arms": {
                # Round 1 is R2 at c16; round 2 drifts by 1 % (local) and 1.5 % (array), so
                # the rounds agree within 5 %: ttft_reduction 0.315 / 0.312, throughput_gain
                # 0.397 / 0.391 (mean 0.394: inside +29 % … +40 %).
                "local": {"median_ttft_ms": [17310.0, 17483.0],
                          "output_throughput": [53.6, 53.06], "external_hit_ratio": 1.0},
                "array": {"median_ttft_ms": [11850.0, 12028.0],
                          "output_throughput": [74.9, 73.78], "external_hit_ratio": 1.0},
                "recompute": {"median_ttft_ms": [149480.0], "output_throughput": [4.1],
                              "external_hit_ratio": 0.0},
            },
        },
        "rdma": {
            "device": "mlx5_0",
            "port": 1,
            # 11.0e9 / 12.5e9 = 88 % of the array port's line rate, shared by the nodes.
            "array_port_readback": 11.0e9,
            "rx_bandwidth": None,
            # The plan's read-back: null plans every inference node of the lab; the lab's
            # passes last seconds, so the shortest overlap that counts is 1 s (a site: 60 s).
            "planned_nodes": None,
            "min_overlap_s": 2.0,
            "readback_pass_s": 3.0,
            "stagger_s": 0.0,
            "first_read_delay_s": 0.0,
        },
        # RUNBOOK §4.1: the array's cache filesystem on /mnt/fx, the baseline's on the local
        # PCIe NVMe.
        "mounts": {"/mnt/fx": "/dev/nvme1n1", "/mnt/local-nvme": "/dev/nvme0n1"},
        "per_node": {},
    }


def _merge(base: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and value:
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _variant(name: str, description: str, **changes: dict) -> dict:
    base = _healthy()
    base["name"] = name
    base["description"] = description
    for section, values in changes.items():
        _merge(base[section], values)
    return base


def _kv_arm(arm: str, ttft_ms: list[float], throughput: list[float],
            hit_ratio: float = 1.0) -> dict:
    return {"arms": {arm: {"median_ttft_ms": ttft_ms, "output_throughput": throughput,
                           "external_hit_ratio": hit_ratio}}}


SCENARIOS: dict[str, dict] = {
    "healthy": _healthy(),
    "missing-drive": _variant(
        "missing-drive",
        "One drive is not recognised: nvme list shows 23 drives (FX1A0000 … FX1A0022); "
        "everything else is healthy. G1 fails on drive_count 23 < 24.",
        # 23 of 24 drives answer; the 24th (FX1A0023) is absent from nvme list.
        drives={"count": 23},
    ),
    "failed-self-test": _variant(
        "failed-self-test",
        "Drive index 5 (nvme5, FX1A0005) reports its newest short self-test as result 7 "
        "(failed segment 2); all other drives pass. G1 fails on self_test_failures 1.",
        # nvme5's newest self-test-log entry: result 7, segment 2.
        drives={"failed_self_test": [5]},
    ),
    # Issue 16: what G1 must not count or pass (stand-in keys: runners/lab/standins/nvme).
    "boot-drive": _variant(
        "boot-drive",
        "23 array drives and the controller's own boot SSD (another model, PCIe): nvme list "
        "shows 24 PCIe drives, but only 23 are of the array's drive model. G1 stops on "
        "drive_count 23 < 24 and names the boot SSD as not counted.",
        drives={"count": 23, "extra_controllers": [
            {"kind": "boot", "model": "SAMSUNG MZ1L2960HCJR-00A07", "serial": "S665NE0R100123"}]},
    ),
    "fabrics-controller": _variant(
        "fabrics-controller",
        "nvme-cli 2.10 prints the flat list (no transport field): the 24 array drives and an "
        "NVMe-oF controller of the array itself (model FX100). Only the 24 drives of the drive "
        "model count, so G1 passes on its drive count and names the fabrics controller.",
        drives={"nvme_cli": "2.10", "extra_controllers": [
            {"kind": "fabrics", "model": "FX100", "serial": "FX100-LAB-0001"}]},
    ),
    "aborted-self-test": _variant(
        "aborted-self-test",
        "Drive index 9 (nvme9, FX1A0009) logs its newest self-test as result 2 (aborted by a "
        "controller reset): not a failure, not a pass. G1 is an error naming FX1A0009 (re-run "
        "its self-test).",
        drives={"aborted_self_test": {"9": 2}},
    ),
    "self-test-in-progress": _variant(
        "self-test-in-progress",
        "Drive index 4 (nvme4, FX1A0004) never finishes the self-test this run starts "
        "(operation 1, 40 %): its probe polls until max_polls (10 min with the plan's "
        "defaults) and fails naming /dev/nvme4; G1 is an error, never a pass.",
        drives={"running_self_test": [4]},
    ),
    "slow-link": _variant(
        "slow-link",
        "fio reads only 9.5e9 B/s over the 100 GbE link: 76 % line efficiency, below the "
        "83 % G2 threshold; everything else healthy.",
        # 9.5e9 / 12.5e9 = 76 % < 83 %.
        fio={"read_bandwidth": 9.5e9},
    ),
    "baseline-off": _variant(
        "baseline-off",
        "The c16 baseline replay is 15 % off R2: 45.56 tok/s (53.6 × 0.85) and TTFT p50 "
        "19906 ms (17310 × 1.15); G2 fails on baseline_deviation beyond ±10 %.",
        bench={
            # 17310 × 1.15 = 19906.5 → 19906 ms: TTFT p50 15 % slower than R2.
            "median_ttft_ms": 19906.0,
            # 53.6 × 0.85 = 45.56 tok/s: throughput 15 % below R2.
            "output_throughput": 45.56,
        },
    ),
    "kv-gain": _variant(
        "kv-gain",
        "G3 passes (R2-like): at c16 the array tier gives TTFT p50 11.85 s vs 17.31 s on local "
        "NVMe (ttft_reduction 0.315) and 74.9 vs 53.6 tok/s (throughput_gain 0.397); round 2 "
        "within 1.5 % of round 1; both tiers hit; 8 nodes read back 11.0e9 B/s together (88 % "
        "of the array's 100 GbE port). G1 and G2 pass as in healthy.",
    ),
    "kv-no-gain": _variant(
        "kv-no-gain",
        "The array tier is no faster than local NVMe: TTFT p50 17.1 s vs 17.31 s (reduction "
        "0.012), 54.2 vs 53.6 tok/s (gain 0.011); both tiers hit. G3 stops on ttft_reduction "
        "and throughput_gain.",
        # 1 − 17100/17310 = 0.012; 54.2/53.6 − 1 = 0.011 (round 2: 0.016, 0.016).
        kv=_kv_arm("array", [17100.0, 17200.0], [54.2, 53.9]),
    ),
    "kv-no-tier-hits": _variant(
        "kv-no-tier-hits",
        "The array arm's figures look like R2 (they would pass) but its engine reports no "
        "external-tier hit tokens: the array tier was not used, so the arm cannot count. G3 is "
        "an error (insufficient evidence), not a pass.",
        # The R2 figures of kv-gain, with no external-tier hits in the array arm.
        kv=_kv_arm("array", [11850.0, 12028.0], [74.9, 73.78], hit_ratio=0.0),
    ),
    "dram-tier-per-rank": _variant(
        "dram-tier-per-rank",
        "The R2-like figures of kv-gain, but LMCache's max_local_cpu_size is 64 GB per TP "
        "rank: with TP = 8 the host-memory tier is 549.8 GB and holds R2's 487.6 GB working "
        "set, so hits may come from DRAM. G3 is an error (invalid arms), not a pass.",
        kv={"host_tier_gb": 64},
    ),
    "staggered-readback": _variant(
        "staggered-readback",
        "The kv-gain figures, but the nodes start reading apart: node i's first counter read "
        "comes (i − 1) × 8 s late, longer than each 3 s read-back pass, so even with nodes "
        "started together the window where all of them read is empty or shorter than the "
        "plan's 2 s. The aggregate cannot count: G3 is an error naming the overlap's length.",
        rdma={"stagger_s": 8.0},
    ),
    "readback-too-few-nodes": _variant(
        "readback-too-few-nodes",
        "The kv-gain figures, but the plan's read-back wants 8 nodes sharing the array and the "
        "lab has fewer: G3 is an error naming the counts, never a pass on fewer nodes.",
        rdma={"planned_nodes": 8},
    ),
    "unstable-rounds": _variant(
        "unstable-rounds",
        "Round 2 of the array arm differs from round 1 by more than 5 % (TTFT p50 12.80 s vs "
        "11.85 s: +8 %; 69.66 vs 74.9 tok/s: −7 %): the measurement is unstable and G3 is an "
        "error asking for a re-run, although the means would pass.",
        # 11850 × 1.08 = 12798; 74.9 × 0.93 = 69.657 → round_deviation 0.08 and 0.07 > 0.05.
        kv=_kv_arm("array", [11850.0, 12798.0], [74.9, 69.66]),
    ),
}


# G4 soak scenarios (issue 7): the scenario schema above plus a ``soak`` section, kept in their
# own table so the G1–G3 scenarios keep their exact schema. ``soak``:
#   ``seconds`` — real seconds the compressed 72 h plan runs in the lab;
#   ``paths`` — veth paths between the inference node and the array's namespace
#     (runners/lab/netns.py): 2 = multipath (a link down is invisible), 1 = single path;
#   ``ttft_ms`` / ``tpot_ms`` — the stand-in engine's prefill and per-token time (lab scale);
#   ``drive_out_impact`` — what the stand-in array does while a drive is out: ``none``
#     (redundant layout rebuilds transparently), ``errors`` (I/O stalls: requests fail),
#     ``corrupt`` (wrong KV blocks: answers change);
#   ``request_rate`` (req/s), ``concurrency``, ``output_len`` — the load of the lab plan.
SOAK_DEFAULT = {"seconds": 180, "paths": 2, "ttft_ms": 250.0, "tpot_ms": 2.0,
                "drive_out_impact": "none", "request_rate": 16.0, "concurrency": 8,
                "output_len": 16}


def _soak_variant(name: str, description: str, **soak: object) -> dict:
    base = _healthy()
    base["name"], base["description"] = name, description
    base["soak"] = {**SOAK_DEFAULT, **soak}
    return base


SOAK_SCENARIOS: dict[str, dict] = {
    "soak-clean": _soak_variant(
        "soak-clean",
        "A compressed 72 h soak passes with both faults: two network paths to the array "
        "(multipath), so the link taken down is invisible to the service; a redundant array "
        "rebuilds transparently while a drive is out.",
    ),
    "soak-drive-impact": _soak_variant(
        "soak-drive-impact",
        "While drive 7 is out the array stalls its I/O: requests fail during the drive fault "
        "window, and G4 stops naming that window and the error-rate check.",
        drive_out_impact="errors",
    ),
    "soak-link-impact": _soak_variant(
        "soak-link-impact",
        "A single network path to the array: the link fault cuts the KV tier off, requests "
        "fail during the link fault window, and G4 stops.",
        paths=1,
    ),
}


def scenario(name: str) -> dict:
    """A deep copy of the built-in scenario ``name``; KeyError names the known scenarios."""
    try:
        return copy.deepcopy(SCENARIOS[name] if name in SCENARIOS else SOAK_SCENARIOS[name])
    except KeyError:
        known = ", ".join(sorted([*SCENARIOS, *SOAK_SCENARIOS]))
        raise KeyError(f"unknown lab scenario {name!r}; known scenarios: {known}") from None


def scenario_with(name: str, overrides: dict | None = None) -> dict:
    """Built-in scenario ``name`` with ``overrides`` merged in section by section, e.g.
    ``scenario_with("healthy", {"drives": {"critical_warning": {"3": 4}}})``. An empty dict
    in ``overrides`` replaces (``{"critical_warning": {}}`` clears it)."""
    return _merge(scenario(name), overrides or {})


def write_scenario_file(path: str | Path, name_or_scenario: str | dict,
                        overrides: dict | None = None) -> Path:
    """Write a scenario as the JSON file a stand-in reads (point :data:`SCENARIO_ENV` at it,
    or name it :data:`SCENARIO_FALLBACK_FILENAME` in the stand-ins' bin dir)."""
    if isinstance(name_or_scenario, str):
        data = scenario_with(name_or_scenario, overrides)
    else:
        data = _merge(copy.deepcopy(name_or_scenario), overrides or {})
    path = Path(path)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def node_scenario(figures: dict, index: int, count: int) -> dict:
    """The scenario of inference node ``index`` (1 … ``count``) of a lab: ``figures`` with its
    ``per_node`` entry merged in, and its share of the array port's read-back (``rdma.
    rx_bandwidth`` = ``array_port_readback`` ÷ ``count`` unless set)."""
    data = copy.deepcopy(figures)
    own = data.pop("per_node", {}).get(str(index), {})
    data["per_node"] = {}
    _merge(data, own)
    if data["rdma"].get("rx_bandwidth") is None:
        data["rdma"]["rx_bandwidth"] = data["rdma"]["array_port_readback"] / count
    if index >= 1 and not own.get("rdma", {}).get("first_read_delay_s"):
        # a staggered read-back: node i starts reading (i − 1) × stagger_s late
        data["rdma"]["first_read_delay_s"] = (index - 1) * float(
            data["rdma"].get("stagger_s") or 0.0)
    return data
