"""The soak plan as data: validation, hashing and time compression (issue 7, RUNBOOK §5).

A plan is plain JSON, copied per engagement into G4's probe plan (``gates.defaults``) as the
step ``{"expand": "soak", "role": "inference", "soak": PLAN}`` and snapshotted with its sha256
into the ``Soak`` that runs it. Times are **plan seconds**; ``time_compression`` (lab only,
1 on customer nodes) divides every time of the plan to get real seconds, so a 72 h plan runs
in a few minutes in the lab. Request rate and concurrency are never compressed.

Shape (every key required unless marked optional)::

    {"duration_s": 259200,               # DOMAIN.md G4: 72 h continuous load
     "time_compression": 1,              # plan seconds per real second (lab: e.g. 1440)
     "sampling_s": 60,                   # how often the service collects and checks
     "load": {"vllm": "vllm",            # the vLLM command on the node (lab: soak-vllm)
              "base_url": "http://127.0.0.1:8000", "model": str, "tokenizer": str,
              "request_rate": None,      # requests/s (RUNBOOK §5.1 "fixed request rate");
                                         # null: G2's measured capacity (runners.soak.rate)
              "concurrency": 16,         # --max-concurrency
              "window_s": 900,           # one vllm bench serve window (RUNBOOK §5.1: 15 min)
              "prefix_len": 30000, "suffix_len": 512, "num_prefixes": 64,
              "output_len": 256, "seed": 1},
     "correctness": {"every_s": 900,     # RUNBOOK §5.2: every 10-15 min
                     "max_tokens": 64, "timeout_s": 600,
                     "prompts": [{"id": "p1", "text": "..."}, ...]},
     "steady_state": {"baseline_windows": 4,   # windows at the start: the soak's baseline
                      "before_s": 1800,         # span before a fault judged as "before"
                      "after_s": 1800},         # span after the heal judged as "after"
     "faults": [{"name": "drive-out", "kind": "drive_out", "node": "array",
                 "start_s": 86400, "duration_s": 300, "target": {"drive": 7},
                 "inject": [...argv...] | None, "heal": [...argv...] | None},
                {"name": "link-down", "kind": "link_down", "node": "inference",
                 "start_s": 172800, "duration_s": 300,
                 "target": {"interface": "ens1f1", "netns"?: "ns"}}]}

``node`` of a fault is a node name or a role (the first node of that role by name). A drive
fault's ``inject`` / ``heal`` are the array vendor's commands as argument lists in which the
token ``{drive}`` stands for the target drive (RUNBOOK §5.3: no standard host command pulls a
drive inside an array; ``None`` until the vendor's command is known, and a soak refuses to
start then); optional ``status``, a command printing ``{"drives_out": [...]}`` JSON, lets the
service verify the heal. The steady-state *bounds* are G4's criteria (``gates.defaults``: error
rate, completion gap, TTFT p99 and throughput against the pre-fault baseline, correctness), editable
per engagement with an audit trail like every threshold.

``soak_plan_of`` reads the plan out of a gate; ``SoakRefused`` is what the soak raises when it
may not start or act.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import math
import re
from typing import TYPE_CHECKING, Any

from django.conf import settings

from gates.services import GateRefused

#: requests/s: the range of load.request_rate, entered or derived from G2 (runners.soak.rate).
RATE_LOW, RATE_HIGH = 0.01, 10_000.0

if TYPE_CHECKING:
    from gates.models import Gate

MAX_WINDOWS = 100_000  # loops are bounded: windows of one soak
MAX_FAULTS = 20
MAX_PROMPTS = 32
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
ARG = re.compile(r"[A-Za-z0-9_./:=@%+,-]{1,200}")
INTERFACE = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
NETNS = re.compile(r"[A-Za-z0-9_.-]{1,64}")
URL = re.compile(r"https?://[A-Za-z0-9.:\[\]-]{1,200}")
MODEL = re.compile(r"/?[A-Za-z0-9][A-Za-z0-9._/:-]{0,199}")
COMMAND = re.compile(r"[A-Za-z0-9_./-]{1,200}")
FAULT_KINDS = ("drive_out", "link_down")
# Real seconds below which a compressed window or sample is too short to mean anything.
MIN_REAL_WINDOW_S = 0.5
MIN_REAL_SAMPLING_S = 0.2


PLAN_KEYS = frozenset({"duration_s", "time_compression", "sampling_s", "load", "correctness",
                       "steady_state", "faults"})


class SoakRefused(GateRefused):
    """The soak may not start (or the action may not be taken); the message says why."""


def soak_plan_of(gate: Gate) -> dict:
    """The soak plan in ``gate``'s probe plan (the step ``{"expand": "soak", ...}``).

    Raises SoakRefused when the gate has none and SoakPlanError when it is malformed."""
    for step in gate.probe_plan:
        if step.get("expand") == "soak":
            return plan_validate(step.get("soak"), lab=gate.engagement.is_lab)
    raise SoakRefused(f"{gate.code}: its plan has no soak step")


class SoakPlanError(ValueError):
    """The plan is malformed; the message names the field (dotted path) and the rule."""


def plan_sha256(plan: dict) -> str:
    """sha256 of the plan in canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _number(plan: dict, path: str, low: float, high: float, *, integer: bool = False) -> float:
    node: Any = plan
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise SoakPlanError(f"soak plan: {path} is missing")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int | float) or not math.isfinite(node):
        raise SoakPlanError(f"soak plan: {path} must be a number, not {node!r}")
    if integer and not float(node).is_integer():
        raise SoakPlanError(f"soak plan: {path} must be a whole number, not {node!r}")
    if not low <= node <= high:
        raise SoakPlanError(f"soak plan: {path}={node!r} is outside {low:g} … {high:g}")
    return node


def _text(value: Any, path: str, pattern: re.Pattern, rule: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SoakPlanError(f"soak plan: {path}={value!r} is not {rule}")
    return value


# --- the allow-list (settings.SOAK_VENDOR_COMMANDS, SOAK_VLLM_EXECUTABLES) -------------------

# Never run as a vendor command or vLLM, even when an operator lists them: shells,
# interpreters and launchers run anything they are given; the rest destroy data or the node.
REFUSED_EXECUTABLES = (
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox*",
    "toybox", "env", "sudo", "doas", "su", "runuser", "pkexec", "chroot", "nohup", "setsid",
    "nice", "ionice", "timeout", "xargs", "stdbuf", "unshare", "nsenter", "systemd-run",
    "script", "expect", "python*", "pypy*", "perl*", "ruby*", "node", "nodejs", "php*", "lua*",
    "tclsh*", "wish*", "awk", "gawk", "mawk", "nawk", "sed", "find", "rm", "dd", "shred",
    "wipefs", "blkdiscard", "mkfs*", "reboot", "shutdown", "poweroff", "halt", "init")
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]{0,31})\}")
PARAM_INT = re.compile(r"int (-?\d{1,9})\.\.(-?\d{1,9})")
PARAM_CHOICE = re.compile(r"choice ([A-Za-z0-9_.:=@%+,-]{1,64}(?:\|[A-Za-z0-9_.:=@%+,-]{1,64})*)")
VENDOR_STEPS = ("inject", "heal", "status")


def executable_check(value: Any, where: str) -> str:
    """``value`` if it may be run as a program: an absolute path or a bare name (resolved on
    the node's PATH), never a relative path, a shell or an interpreter. SoakPlanError naming
    ``where`` otherwise."""
    if not isinstance(value, str) or not COMMAND.fullmatch(value) or ".." in value.split("/") \
            or ("/" in value and not value.startswith("/")):
        raise SoakPlanError(f"{where}={value!r} is not an absolute path or a bare command name")
    base = value.rsplit("/", 1)[-1]
    if any(fnmatch.fnmatchcase(base, pattern) for pattern in REFUSED_EXECUTABLES):
        raise SoakPlanError(f"{where}={value!r} is a shell, interpreter or destructive tool: "
                            f"refused even when allowed in the settings")
    return value


def vllm_check(value: Any, *, lab: bool) -> str:
    """``load.vllm`` if operations allow it (SOAK_VLLM_EXECUTABLES; lab engagements also
    SOAK_LAB_VLLM_EXECUTABLES). SoakPlanError naming load.vllm otherwise."""
    allowed = list(settings.SOAK_VLLM_EXECUTABLES) + (
        list(settings.SOAK_LAB_VLLM_EXECUTABLES) if lab else [])
    if value not in allowed:
        raise SoakPlanError(f"soak plan: load.vllm={value!r} is not an allowed vLLM executable "
                            f"(settings SOAK_VLLM_EXECUTABLES: {', '.join(allowed) or 'none'})")
    try:
        return executable_check(value, "load.vllm")
    except SoakPlanError as error:
        raise SoakPlanError(f"soak plan: {error}") from None


def vendor_commands(*, lab: bool) -> dict:
    """The vendor commands operations allowed (lab engagements: also the lab's stand-ins)."""
    allowed = dict(settings.SOAK_VENDOR_COMMANDS or {})
    if lab:
        allowed.update(settings.SOAK_LAB_VENDOR_COMMANDS or {})
    return allowed


def _param_value(spec: Any, value: Any, where: str, setting: str) -> str:
    match = PARAM_INT.fullmatch(spec) if isinstance(spec, str) else None
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SoakPlanError(f"soak plan: {where}={value!r} must be a whole number {low} … "
                                f"{high} ({setting})")
        return str(value)
    match = PARAM_CHOICE.fullmatch(spec) if isinstance(spec, str) else None
    if match:
        choices = match.group(1).split("|")
        if value not in choices:
            raise SoakPlanError(f"soak plan: {where}={value!r} must be one of "
                                f"{', '.join(choices)} ({setting})")
        return str(value)
    raise SoakPlanError(f"soak plan: {where} cannot be checked: {setting} is {spec!r}, not "
                        f"'int LO..HI' or 'choice A|B'")


def vendor_argv(fault: dict, *, lab: bool, where: str = "fault") -> dict[str, list[str]]:
    """The argv of a drive fault's allowed vendor command, ``{"inject", "heal", "status"}``,
    its parameters checked by type and range and substituted as whole argv elements (never
    through a shell): ``{drive}`` is ``target.drive``, other ``{name}`` come from ``args``.

    SoakPlanError naming the field when the command is not named, not allowed, malformed in
    the settings (a shell or interpreter, a relative path, a step missing) or an argument is
    missing, unknown, of the wrong type or out of range."""
    key = fault.get("command")
    allowed = vendor_commands(lab=lab)
    if key is None:
        raise SoakPlanError(f"soak plan: {where}.command is not set: name the array vendor's "
                            f"drive command operations allowed (one of: "
                            f"{', '.join(sorted(allowed)) or 'none allowed yet'})")
    if not isinstance(key, str) or key not in allowed:
        raise SoakPlanError(f"soak plan: {where}.command={key!r} is not an allowed vendor "
                            f"command (settings SOAK_VENDOR_COMMANDS: "
                            f"{', '.join(sorted(allowed)) or 'none'})")
    entry, setting = allowed[key], f"SOAK_VENDOR_COMMANDS[{key!r}]"
    if not isinstance(entry, dict):
        raise SoakPlanError(f"soak plan: {where}.command={key!r}: {setting} is not an object")
    params = entry.get("params") or {}
    args = fault.get("args") or {}
    if not isinstance(params, dict) or not isinstance(args, dict):
        raise SoakPlanError(f"soak plan: {where}.args must be an object ({setting}.params too)")
    unknown = sorted(set(args) - set(params) | ({"drive"} & set(args)))
    if unknown:
        raise SoakPlanError(f"soak plan: {where}.args.{unknown[0]} is not a parameter of "
                            f"{key} (the drive is target.drive)")
    values = {}
    for name, spec in params.items():
        if name == "drive":
            value, path = (fault.get("target") or {}).get("drive"), f"{where}.target.drive"
        elif name in args:
            value, path = args[name], f"{where}.args.{name}"
        else:
            raise SoakPlanError(f"soak plan: {where}.args.{name} is missing ({setting}.params)")
        values[name] = _param_value(spec, value, path, f"{setting}.params.{name}")
    argv = {}
    for step in VENDOR_STEPS:
        template = entry.get(step)
        if not isinstance(template, list) or not 1 <= len(template) <= 16:
            raise SoakPlanError(f"soak plan: {where}.command={key!r}: {setting}.{step} must be "
                                f"an argument list of 1 … 16 items")
        out = []
        for i, item in enumerate(template):
            match = PLACEHOLDER.fullmatch(item) if isinstance(item, str) else None
            if match and i > 0:
                if match.group(1) not in values:
                    raise SoakPlanError(f"soak plan: {where}.command={key!r}: {setting}.{step}"
                                        f"[{i}] uses {item}, not in its params")
                out.append(values[match.group(1)])
            elif isinstance(item, str) and ARG.fullmatch(item):
                out.append(item)
            else:
                raise SoakPlanError(f"soak plan: {where}.command={key!r}: {setting}.{step}[{i}]"
                                    f"={item!r} is not a plain argument or a whole {{param}}")
        try:
            executable_check(out[0], f"{setting}.{step}[0]")
        except SoakPlanError as error:
            raise SoakPlanError(f"soak plan: {where}.command={key!r}: {error}") from None
        argv[step] = out
    return argv


def argv_sha256(argv: dict) -> str:
    """sha256 of the commands a fault runs (canonical JSON), the one an engineer confirms."""
    text = json.dumps(argv, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plan_validate(plan: Any, *, lab: bool = False) -> dict:
    """Check ``plan`` and return a normalised copy (numbers as given, defaults filled).

    Raises SoakPlanError naming the first field that is wrong: missing keys, numbers out of
    range, names and arguments outside their character sets, faults that overlap or do not
    fit in the duration, compressed windows shorter than 0.5 s, more than 100 000 windows.
    """
    if not isinstance(plan, dict):
        raise SoakPlanError("soak plan: must be a JSON object")
    plan = copy.deepcopy(plan)
    unknown = sorted(set(plan) - PLAN_KEYS)
    if unknown:  # a misspelt key would otherwise be stored and silently ignored
        raise SoakPlanError(f"soak plan: unknown key {unknown[0]!r}; the keys are "
                            f"{', '.join(sorted(PLAN_KEYS))}")
    duration = _number(plan, "duration_s", 60, 30 * 24 * 3600)
    factor = _number(plan, "time_compression", 1, 1_000_000)
    sampling = _number(plan, "sampling_s", 1, 24 * 3600)
    load = plan.get("load")
    if not isinstance(load, dict):
        raise SoakPlanError("soak plan: load must be an object")
    vllm_check(load.get("vllm"), lab=lab)
    _text(load.get("base_url"), "load.base_url", URL, "an http(s) URL of host and port")
    _text(load.get("model"), "load.model", MODEL, "a model name")
    _text(load.get("tokenizer"), "load.tokenizer", MODEL, "a tokenizer name or path")
    if "request_rate" not in load:
        raise SoakPlanError("soak plan: load.request_rate is missing (null asks for the "
                            "default derived from G2's measured capacity)")
    if load["request_rate"] is not None:
        _number(plan, "load.request_rate", RATE_LOW, RATE_HIGH)
    _number(plan, "load.concurrency", 1, 4096, integer=True)
    window = _number(plan, "load.window_s", 1, 24 * 3600)
    for key, high in (("prefix_len", 1_000_000), ("suffix_len", 1_000_000),
                      ("num_prefixes", 100_000), ("output_len", 100_000), ("seed", 2**31)):
        _number(plan, f"load.{key}", 0 if key == "seed" else 1, high, integer=True)
    if window > duration:
        raise SoakPlanError(f"soak plan: load.window_s={window:g} is longer than duration_s")
    if window / factor < MIN_REAL_WINDOW_S:
        raise SoakPlanError(f"soak plan: load.window_s compressed is {window / factor:.3g} s; "
                            f"at least {MIN_REAL_WINDOW_S} s (lower time_compression)")
    if sampling / factor < MIN_REAL_SAMPLING_S:
        raise SoakPlanError(f"soak plan: sampling_s compressed is {sampling / factor:.3g} s; at "
                            f"least {MIN_REAL_SAMPLING_S} s")
    if duration / window > MAX_WINDOWS:
        raise SoakPlanError(f"soak plan: {duration / window:.0f} windows; at most {MAX_WINDOWS}")
    correctness = plan.get("correctness")
    if not isinstance(correctness, dict):
        raise SoakPlanError("soak plan: correctness must be an object")
    _number(plan, "correctness.every_s", 1, 24 * 3600)
    _number(plan, "correctness.max_tokens", 1, 4096, integer=True)
    _number(plan, "correctness.timeout_s", 1, 3600)
    prompts = correctness.get("prompts")
    if not isinstance(prompts, list) or not 1 <= len(prompts) <= MAX_PROMPTS:
        raise SoakPlanError(f"soak plan: correctness.prompts must list 1 … {MAX_PROMPTS} prompts")
    seen = set()
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, dict):
            raise SoakPlanError(f"soak plan: correctness.prompts[{i}] must be an object")
        pid = _text(prompt.get("id"), f"correctness.prompts[{i}].id", NAME, "a short name")
        if pid in seen:
            raise SoakPlanError(f"soak plan: correctness.prompts[{i}].id {pid!r} repeats")
        seen.add(pid)
        text = prompt.get("text")
        if not isinstance(text, str) or not 1 <= len(text) <= 200_000:
            raise SoakPlanError(f"soak plan: correctness.prompts[{i}].text must be 1 … 200000 "
                                f"characters")
    steady = plan.get("steady_state")
    if not isinstance(steady, dict):
        raise SoakPlanError("soak plan: steady_state must be an object")
    _number(plan, "steady_state.baseline_windows", 1, 1000, integer=True)
    _number(plan, "steady_state.before_s", window, duration)
    _number(plan, "steady_state.after_s", window, duration)
    faults = plan.get("faults")
    if not isinstance(faults, list) or len(faults) > MAX_FAULTS:
        raise SoakPlanError(f"soak plan: faults must be a list of at most {MAX_FAULTS}")
    names, spans = set(), []
    for i, fault in enumerate(faults):
        where = f"faults[{i}]"
        if not isinstance(fault, dict):
            raise SoakPlanError(f"soak plan: {where} must be an object")
        name = _text(fault.get("name"), f"{where}.name", NAME, "a short name (a-z, 0-9, -)")
        if name in names:
            raise SoakPlanError(f"soak plan: {where}.name {name!r} repeats")
        names.add(name)
        kind = fault.get("kind")
        if kind not in FAULT_KINDS:
            raise SoakPlanError(f"soak plan: {where}.kind={kind!r} is not one of "
                                f"{', '.join(FAULT_KINDS)}")
        _text(fault.get("node"), f"{where}.node", NAME, "a node name or role")
        start = _fault_num(fault, where, "start_s", 0, duration)
        length = _fault_num(fault, where, "duration_s", 1, duration)
        if start + length > duration:
            raise SoakPlanError(f"soak plan: {where} ends after the soak ({start + length:g} > "
                                f"{duration:g} s)")
        if length / factor < 2 * MIN_REAL_SAMPLING_S:
            raise SoakPlanError(f"soak plan: {where}.duration_s compressed is "
                                f"{length / factor:.3g} s; too short to inject and heal")
        target = fault.get("target")
        if not isinstance(target, dict):
            raise SoakPlanError(f"soak plan: {where}.target must be an object")
        if kind == "drive_out":
            drive = target.get("drive")
            if isinstance(drive, bool) or not isinstance(drive, int) or not 0 <= drive <= 1023:
                raise SoakPlanError(f"soak plan: {where}.target.drive must be a drive index "
                                    f"0 … 1023, not {drive!r}")
            for legacy in ("inject", "heal", "status"):
                if fault.get(legacy) is not None:
                    raise SoakPlanError(
                        f"soak plan: {where}.{legacy} is refused: a drive fault names a vendor "
                        f"command operations allowed ({where}.command, one of: "
                        f"{', '.join(sorted(vendor_commands(lab=lab))) or 'none allowed'}), "
                        f"never an argument list")
                fault.pop(legacy, None)
            fault["command"] = fault.get("command")
            fault["args"] = fault.get("args") or {}
            if fault["command"] is not None:
                vendor_argv(fault, lab=lab, where=where)
        else:
            if target.get("interface") is not None:
                _text(target["interface"], f"{where}.target.interface", INTERFACE,
                      "a network interface name")
            if target.get("netns") is not None:
                _text(target["netns"], f"{where}.target.netns", NETNS, "a network namespace")
        spans.append((start, start + length, name))
    spans.sort()
    for (_s1, e1, n1), (s2, _e2, n2) in zip(spans, spans[1:], strict=False):
        if s2 < e1:
            raise SoakPlanError(f"soak plan: faults {n1} and {n2} overlap (a single fault at a "
                                f"time, DOMAIN.md G4)")
    return plan


def _fault_num(fault: dict, where: str, key: str, low: float, high: float) -> float:
    value = fault.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SoakPlanError(f"soak plan: {where}.{key} must be a number, not {value!r}")
    if not low <= value <= high:
        raise SoakPlanError(f"soak plan: {where}.{key}={value!r} is outside {low:g} … {high:g}")
    return value


def real_s(plan: dict, plan_seconds: float) -> float:
    """Real seconds for ``plan_seconds`` under the plan's time compression."""
    return float(plan_seconds) / float(plan["time_compression"])


def windows_planned(plan: dict) -> int:
    """How many benchmark windows fill the duration (the agent's bounded loop count)."""
    return max(1, int(plan["duration_s"] // plan["load"]["window_s"]))
