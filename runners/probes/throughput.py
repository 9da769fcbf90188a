"""G2 probes: link, storage throughput and the serving benchmark on an inference node
(RUNBOOK §3.1 link, §3.2 fio, §3.4 benchmark). The benchmark script is shared with the G3
passes, which run the same client against the arm's engine."""

from __future__ import annotations

import shlex
from typing import Any

from runners.probes.base import INTERFACE, NAME, PATH, URL, Param, Probe

# The benchmark client writes its result file; print it on stdout, the client's own report on
# stderr ($1 result dir, $2 result file name, the rest: vllm bench serve arguments).
BENCH_SCRIPT = r"""
dir=$1 file=$2; shift 2
mkdir -p -- "$dir" || exit $?
vllm bench serve "$@" --save-result --result-dir "$dir" --result-filename "$file" >&2 || exit $?
cat -- "$dir/$file"
"""


def _fio_argv(p: dict[str, Any]) -> list[str]:
    return [
        "fio", "--name=seqread", f"--filename={p['filename']}", "--readonly", "--rw=read",
        "--bs=1M", f"--direct={int(p['direct'])}", f"--ioengine={p['ioengine']}",
        f"--iodepth={p['iodepth']}", f"--numjobs={p['numjobs']}", "--offset_increment=10%",
        "--size=10%", "--time_based", f"--runtime={p['runtime']}",
        f"--ramp_time={p['ramp_time']}", "--group_reporting", "--output-format=json",
    ]


def _bench_argv(p: dict[str, Any]) -> list[str]:
    concurrency = p["concurrency"]
    return [
        "sh", "-c", BENCH_SCRIPT, "vllm-bench", p["result_dir"], f"bench-c{concurrency}.json",
        "--backend", "openai", "--base-url", p["base_url"], "--model", p["model"],
        "--tokenizer", p["tokenizer"], "--dataset-name", "prefix_repetition",
        "--prefix-repetition-prefix-len", str(p["prefix_len"]),
        "--prefix-repetition-suffix-len", str(p["suffix_len"]),
        "--prefix-repetition-num-prefixes", str(p["num_prefixes"]),
        "--prefix-repetition-output-len", str(p["output_len"]), "--ignore-eos",
        "--num-prompts", str(p["num_prompts"]), "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--temperature", "0", "--seed", str(p["seed"]),
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--metadata", f"concurrency={concurrency}", "--disable-tqdm",
    ]


THROUGHPUT_PROBES: tuple[Probe, ...] = (
    Probe(
        "link_speed", "inference", "ethtool", ("ethtool", "--version"), 30,
        {"interface": INTERFACE}, lambda p: ["ethtool", p["interface"]],
        "negotiated link speed (RUNBOOK §3.1)", {"interface": "interface"},
    ),
    Probe(
        "fio_seqread", "inference", "fio", ("fio", "--version"), 600,
        {"filename": PATH, "runtime": Param(int, 60, 1, 3600),
         "ramp_time": Param(int, 10, 0, 600), "numjobs": Param(int, 8, 1, 128),
         "iodepth": Param(int, 32, 1, 1024),
         "ioengine": Param(r"libaio|io_uring|psync|sync", "libaio", rule="an I/O engine"),
         "direct": Param(bool, True)},
        _fio_argv, "read-only sequential read of the array (RUNBOOK §3.2)",
        {"filename": "fio_target"},
    ),
    Probe(
        "vllm_bench_serve", "inference", "vllm_bench", ("vllm", "--version"), 4 * 3600,
        {"base_url": URL, "model": NAME, "tokenizer": PATH,
         "prefix_len": Param(int, 30000, 1, 1_000_000),
         "suffix_len": Param(int, 512, 0, 1_000_000),
         "num_prefixes": Param(int, 64, 1, 100_000),
         "output_len": Param(int, 256, 1, 100_000),
         "num_prompts": Param(int, 256, 1, 1_000_000),
         "concurrency": Param(int, 16, 1, 4096), "seed": Param(int, 1, 0, 2**31),
         "result_dir": PATH},
        _bench_argv, "serving benchmark against the engine (RUNBOOK §3.4)",
        summary=lambda p: shlex.join(["vllm", "bench", "serve", *_bench_argv(p)[6:],
                                      "--save-result", "--result-dir", p["result_dir"],
                                      "--result-filename", _bench_argv(p)[5]])
        + "; then the result file is printed",
    ),
)
