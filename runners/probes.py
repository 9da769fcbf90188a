"""Probe definitions: what to run on a node and which parser reads it.

A probe is pure: it validates its parameters, builds its command as an argument list (quoted
here, wrapped in ``timeout --kill-after`` so the node ends it too) and names its parser. It never
connects, sleeps or touches the database; ``runners.services`` does the I/O. Commands come only
from these definitions and validated parameters, never from free text. Command forms follow
RUNBOOK.md (§2.1 inventory, §2.3 self-test, §2.4 SMART, §3.1 link, §3.2 fio, §3.4 benchmark).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

KILL_AFTER_S = 10  # grace between timeout's TERM and KILL on the node


class ProbeParameterError(ValueError):
    """A probe parameter is missing or invalid; the message names the parameter and the rule."""


@dataclass(frozen=True)
class Param:
    """One parameter: ``kind`` is int, bool, or a regex its string value must match fully."""

    kind: Any
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    rule: str = ""

    def clean(self, probe: str, name: str, value: Any) -> Any:
        if value is None:
            if self.default is None:
                raise ProbeParameterError(f"{probe}: parameter {name} is required")
            value = self.default
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ProbeParameterError(f"{probe}: {name} must be true or false, not {value!r}")
            return value
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ProbeParameterError(f"{probe}: {name} must be an integer, not {value!r}")
            if (self.minimum is not None and value < self.minimum) or (
                self.maximum is not None and value > self.maximum
            ):
                raise ProbeParameterError(
                    f"{probe}: {name}={value} is outside {self.minimum}…{self.maximum}"
                )
            return value
        if not isinstance(value, str) or not re.fullmatch(self.kind, value):
            raise ProbeParameterError(
                f"{probe}: {name}={value!r} is not {self.rule or 'allowed'}"
            )
        return value


DEVICE = Param(r"/dev/nvme\d{1,4}", rule="an NVMe controller device such as /dev/nvme0")
PATH = Param(r"/[A-Za-z0-9._/-]{1,200}", rule="an absolute path of letters, digits, . _ - /")
INTERFACE = Param(r"[A-Za-z0-9_.:-]{1,15}", rule="a network interface name")
URL = Param(r"https?://[A-Za-z0-9.:\[\]-]{1,200}(/[A-Za-z0-9._/-]*)?", rule="an http(s) URL")
NAME = Param(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,199}", rule="a model name")


@dataclass(frozen=True)
class Probe:
    """A probe: ``name``, the node ``role`` it runs on, its ``parser``, the command to learn the
    tool's version, a ``timeout`` (s), its parameters and a function building the argv."""

    name: str
    role: str
    parser: str
    version_argv: tuple[str, ...]
    timeout_s: float
    params: Mapping[str, Param]
    argv: Callable[[dict[str, Any]], list[str]]
    description: str = ""
    node_params: Mapping[str, str] = field(default_factory=dict)  # param name -> Node field
    # A short form for people (reports) where the command wraps a script; None: the command.
    summary: Callable[[dict[str, Any]], str] | None = None

    def clean(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``values`` against the declared parameters (unknown names refused)."""
        unknown = set(values) - set(self.params)
        if unknown:
            raise ProbeParameterError(f"{self.name}: unknown parameters {sorted(unknown)}")
        return {name: p.clean(self.name, name, values.get(name)) for name, p in self.params.items()}

    def command(self, values: Mapping[str, Any], *, sudo: bool = False) -> str:
        """The shell command line to send: validated argv, quoted, under ``timeout`` on the node."""
        argv = self.argv(self.clean(values))
        prefix = ["sudo", "-n"] if sudo else []
        wrapped = [*prefix, "timeout", f"--kill-after={KILL_AFTER_S}", f"{int(self.timeout_s)}",
                   "env", "LC_ALL=C", *argv]
        return shlex.join(wrapped)

    def display(self, values: Mapping[str, Any], command: str) -> str:
        """What a person reads for this run: the summary of a scripted probe, else ``command``."""
        if self.summary is None:
            return command
        try:
            return self.summary(self.clean(values))
        except ProbeParameterError:
            return command

    def version_command(self) -> str:
        return shlex.join(["timeout", "10", *self.version_argv])


# The self-test is started, then its log polled until no test is running (RUNBOOK §2.3):
# one script so the probe is one command; $1 device, $2 poll interval (s), $3 max polls.
SELF_TEST_SCRIPT = r"""
dev=$1 interval=$2 polls=$3
nvme device-self-test "$dev" -n 0xffffffff -s 1 >&2 || exit $?
i=0
while :; do
  out=$(nvme self-test-log "$dev" -o json) || exit $?
  if printf '%s' "$out" | grep -Eq '"Current Device Self-Test Operation" *: *0 *,'; then
    printf '%s\n' "$out"; exit 0
  fi
  i=$((i + 1))
  if [ "$i" -ge "$polls" ]; then
    printf '%s\n' "$out"; echo "self-test still running after $polls polls" >&2; exit 124
  fi
  sleep "$interval"
done
"""

# The benchmark client writes its result file; print it on stdout, the client's own report on
# stderr ($1 result dir, $2 result file name, the rest: vllm bench serve arguments).
BENCH_SCRIPT = r"""
dir=$1 file=$2; shift 2
mkdir -p -- "$dir" || exit $?
vllm bench serve "$@" --save-result --result-dir "$dir" --result-filename "$file" >&2 || exit $?
cat -- "$dir/$file"
"""


def _self_test_argv(p: dict) -> list[str]:
    return ["sh", "-c", SELF_TEST_SCRIPT, "nvme-self-test", p["device"],
            str(p["poll_interval"]), str(p["max_polls"])]


def _fio_argv(p: dict) -> list[str]:
    return [
        "fio", "--name=seqread", f"--filename={p['filename']}", "--readonly", "--rw=read",
        "--bs=1M", f"--direct={int(p['direct'])}", f"--ioengine={p['ioengine']}",
        f"--iodepth={p['iodepth']}", f"--numjobs={p['numjobs']}", "--offset_increment=10%",
        "--size=10%", "--time_based", f"--runtime={p['runtime']}",
        f"--ramp_time={p['ramp_time']}", "--group_reporting", "--output-format=json",
    ]


def _bench_argv(p: dict) -> list[str]:
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


PROBES: dict[str, Probe] = {
    probe.name: probe
    for probe in [
        Probe(
            "nvme_inventory", "array", "nvme_list", ("nvme", "version"), 60, {},
            lambda p: ["nvme", "list", "-o", "json"],
            "drive inventory on the array controller (RUNBOOK §2.1)",
        ),
        Probe(
            "nvme_self_test", "array", "nvme_self_test_log", ("nvme", "version"), 900,
            {"device": DEVICE, "poll_interval": Param(int, 10, 1, 60),
             "max_polls": Param(int, 60, 1, 360)},
            _self_test_argv, "short device self-test, started then polled (RUNBOOK §2.3)",
            summary=lambda p: (
                f"nvme device-self-test {p['device']} -n 0xffffffff -s 1; then "
                f"nvme self-test-log {p['device']} -o json every {p['poll_interval']} s until "
                f"no test runs (at most {p['max_polls']} polls)"
            ),
        ),
        Probe(
            "nvme_smart_log", "array", "nvme_smart_log", ("nvme", "version"), 60,
            {"device": DEVICE}, lambda p: ["nvme", "smart-log", p["device"], "-o", "json"],
            "SMART / health log (RUNBOOK §2.4)",
        ),
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
    ]
}


def probe(name: str) -> Probe:
    """The registered probe ``name``; KeyError naming the known probes otherwise."""
    try:
        return PROBES[name]
    except KeyError:
        raise KeyError(f"unknown probe {name!r}; known: {sorted(PROBES)}") from None
