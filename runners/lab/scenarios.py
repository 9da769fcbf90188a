"""Lab scenarios: the figures the stand-in tools print on a lab node.

In the lab a real OpenSSH server on 127.0.0.1 plays the customer's nodes, and the hardware-bound
tools (``nvme``, ``ethtool``, ``fio``, ``vllm``) are replaced by the stand-in executables in
``runners/lab/standins/``, placed first on that node's PATH. A stand-in prints output in the exact
format of the real tool (RUNBOOK.md §2.1-2.4, §3.1, §3.2, §3.4), filled with the figures of one
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
                "failed_self_test": [int, ...], "critical_warning": {str(int): int}},
     "link": {"interface": str, "speed_mbps": int},
     "fio": {"device": str, "read_bandwidth": float},
     "bench": {"concurrency": int, "median_ttft_ms": float, "output_throughput": float,
               "num_prompts": int}}

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
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

#: Every stand-in writes this (followed by `` (scenario NAME)``) as one line to stderr; the runner
#: searches stderr for it to label the evidence as simulated. Real tools passed through (fio on a
#: real scratch file) do not write it.
SIMULATED_MARKER = "acceptance-lab: simulated output"

#: Environment variable naming the scenario JSON file a stand-in reads.
SCENARIO_ENV = "ACCEPTANCE_LAB_SCENARIO"

#: Read from the stand-in's own directory when :data:`SCENARIO_ENV` is unset (``sudo`` drops it).
SCENARIO_FALLBACK_FILENAME = "acceptance-lab-scenario.json"

#: Where the stand-in executables live, and their names (the lab copies them into a bin dir).
STANDIN_DIR = Path(__file__).resolve().parent / "standins"
STANDIN_TOOLS = ("nvme", "ethtool", "fio", "vllm")

# R2 reference, local-NVMe arm, concurrency 16 (DOMAIN.md): what the G2 baseline is compared with.
R2_LOCAL_NVME_C16_TTFT_P50_MS = 17310.0
R2_LOCAL_NVME_C16_OUTPUT_THROUGHPUT = 53.6

# 100 GbE line rate in B/s (100000 Mb/s × 1e6 / 8).
LINE_RATE_100GBE = 12.5e9


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
    }


def _variant(name: str, description: str, **changes: dict) -> dict:
    base = _healthy()
    base["name"] = name
    base["description"] = description
    for section, values in changes.items():
        base[section].update(values)
    return base


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
}


def scenario(name: str) -> dict:
    """A deep copy of the built-in scenario ``name``; KeyError names the known scenarios."""
    try:
        return copy.deepcopy(SCENARIOS[name])
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise KeyError(f"unknown lab scenario {name!r}; known scenarios: {known}") from None


def _merge(base: dict, overrides: dict) -> dict:
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and value:
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


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
