"""The shell commands the soak sends to nodes: the detached agent, collection by byte offset,
and the fault injectors (one registry dict, each with its safety checks, inject, heal and
state check).

Pure: functions build command strings with ``shlex`` from validated values (the plan went
through ``runners.soak.plan.plan_validate``) and read what the node answered; they never
connect. ``runners.soak.nodes`` runs them over the one SSH transport.

Heals are armed ON THE NODE before a fault (RUNBOOK §5.3): ``systemd-run --on-active`` where
systemd runs, else ``nohup setsid sh -c 'sleep N; HEAL'`` detached from the SSH session; the
timer writes ``HEAL_DIR/TOKEN.healed`` (node time and the heal's exit status) when it fires, and
``armed_check`` proves it is armed before the fault is injected. HEAL_DIR is inside the node's
checked scratch base (``runners.probes.base.NODE_ROOT``: owned by the user the heal runs as,
0700, never a symlink), its records written with noclobber, and a recorded pid is signalled only
when its command line shows it is this heal's timer.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runners.probes import KILL_AFTER_S
from runners.probes.base import NODE_DIR_CHECK, NODE_ROOT

AGENT_SOURCE = (Path(__file__).resolve().parent / "node_agent.py").read_text()
HEAL_DIR = f"{NODE_ROOT}/heal"  # on the node; its parent is checked as the scratch base
# On the node: the base of the soak agents' directories. Not NODE_ROOT: the agent runs as the
# SSH user, the probes and heals as root under sudo, and each base belongs to one user.
SOAK_ROOT = f"{NODE_ROOT}-soak"
TOKEN = re.compile(r"[a-z0-9-]{1,64}")
READ_MAX_BYTES = 4 << 20  # per collection of one file

# Starts the agent detached (own session, stdin from /dev/null) and prints its pid; refuses a
# second agent in the same directory. $1 directory (SOAK_ROOT/SOAK/NODE: the base is checked),
# $2 seconds for the node-side timeout, then the agent command.
START_SCRIPT = NODE_DIR_CHECK + (
    'd=$1 s=$2; shift 2; acctest_dir "${d%/*/*}" && acctest_dir "${d%/*}" && acctest_dir "$d" '
    '|| exit 3; cd "$d" || exit 3; '
    'if [ -s agent.pid ] && kill -0 "$(cat agent.pid)" 2>/dev/null; then '
    'echo "an agent is already running in $d" >&2; exit 4; fi; rm -f done stop pause; '
    f'nohup setsid timeout --kill-after={KILL_AFTER_S} "$s" "$@" >>agent.log 2>&1 </dev/null & '
    'echo "$!" > agent.pid; echo "pid $! at $(date +%s.%N)"'
)
# running|exited, then the done record if any. $1 directory.
STATUS_SCRIPT = (
    'd=$1; if [ -s "$d/agent.pid" ] && kill -0 "$(cat "$d/agent.pid")" 2>/dev/null; '
    'then echo running; else echo exited; fi; cat "$d/done" 2>/dev/null; echo; '
    'date +%s.%N'
)
# The bytes of $1 from offset $2, at most $3 (nothing when the file does not exist yet).
READ_SCRIPT = (
    'f=$1 o=$2 m=$3; [ -f "$f" ] || exit 0; tail -c +"$((o + 1))" -- "$f" | head -c "$m"'
)
# Stop the agent: the stop file, then its process group (TERM, then KILL), confirmed. The pid is
# signalled only when it is a number above 1 whose command line carries this directory (the
# agent's --dir); otherwise exit 2 and why.
STOP_SCRIPT = (
    'd=$1; touch "$d/stop"; [ -s "$d/agent.pid" ] || { echo absent; exit 0; }; '
    'p=$(head -c 32 "$d/agent.pid"); case "$p" in ""|*[!0-9]*) '
    'echo "refusing: agent.pid holds [$p], not a process id"; exit 2;; esac; '
    '[ "$p" -gt 1 ] 2>/dev/null || { echo "refusing: agent.pid holds pid $p"; exit 2; }; '
    '[ -e "/proc/$p" ] || { echo gone; exit 0; }; '
    'tr "\\000" "\\n" < "/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "$d" || '
    '{ echo "refusing: process $p is not the agent of $d"; exit 2; }; '
    'kill -TERM -- "-$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; '
    'i=0; while kill -0 "$p" 2>/dev/null; do i=$((i+1)); '
    '[ "$i" -eq 30 ] && kill -KILL -- "-$p" 2>/dev/null; '
    '[ "$i" -ge 60 ] && { echo "still running: $p"; exit 1; }; sleep 0.1; done; echo gone'
)
# The heal timer itself: records its pid, sleeps, heals, records node time and exit status.
# Both records are created with noclobber (set -C): a file or link already there is refused,
# never written through. $1 pid file, $2 healed file, $3 seconds, then the heal command.
HEAL_TIMER_SCRIPT = (
    'p=$1 h=$2 s=$3; shift 3; set -C; echo "$$" > "$p" || exit 3; sleep "$s"; "$@"; rc=$?; '
    'printf "%s %s\\n" "$(date +%s.%N)" "$rc" > "$h"; rm -f "$p"'
)
# ``heal_pid``: the pid recorded in $d/$tok.pid when it is a number above 1 whose command line
# names that pid file (the heal timer's own argument), else empty with the reason on stderr.
_HEAL_PID = (
    'heal_pid() { f="$d/$tok.pid"; [ -f "$f" ] && [ ! -L "$f" ] || return 1; '
    'q=$(head -c 32 -- "$f"); case "$q" in ""|*[!0-9]*) '
    'echo "refusing: $f holds [$q], not a process id" >&2; return 1;; esac; '
    '[ "$q" -gt 1 ] 2>/dev/null || { echo "refusing: $f holds pid $q, not one above 1" >&2; '
    'return 1; }; tr "\\000" "\\n" < "/proc/$q/cmdline" 2>/dev/null | grep -qxF "$f" || '
    '{ echo "refusing: process $q is not the heal timer of $tok" >&2; return 1; }; '
    'echo "$q"; }; '
)
# Arms the heal: systemd-run where systemd runs, else nohup setsid (RUNBOOK §5.3); waits until
# the fallback timer has recorded its pid. Prints the method. The heal directory and its parent
# (the scratch base) are checked first: exit 3 and the reason when refused. Stale records of the
# token are removed (rm removes a link, never its target). $1 heal directory, $2 token,
# $3 seconds, $4 the timer script, then the heal command.
ARM_SCRIPT = NODE_DIR_CHECK + (
    'd=$1 tok=$2 s=$3 t=$4; shift 4; acctest_dir "${d%/*}" && acctest_dir "$d" || exit 3; '
    'rm -f "$d/$tok.healed" "$d/$tok.pid"; '
    'if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then '
    'systemd-run --quiet --unit="acctest-heal-$tok" --on-active="$s" /bin/sh -c "$t" '
    'acctest-heal "$d/$tok.pid" "$d/$tok.healed" 0 "$@" || exit $?; echo systemd-run; '
    'else nohup setsid sh -c "$t" acctest-heal "$d/$tok.pid" "$d/$tok.healed" "$s" "$@" '
    '>/dev/null 2>&1 </dev/null & i=0; '
    'while [ ! -s "$d/$tok.pid" ] && [ "$i" -lt 100 ]; do i=$((i+1)); sleep 0.02; done; '
    'echo setsid; fi'
)
# armed | fired TIME RC | not armed (exit 1). $1 heal directory, $2 token.
ARMED_SCRIPT = NODE_DIR_CHECK + _HEAL_PID + (
    'd=$1 tok=$2; acctest_dir "${d%/*}" && acctest_dir "$d" || { echo "not armed"; exit 1; }; '
    'h="$d/$tok.healed"; if [ -f "$h" ] && [ ! -L "$h" ] && [ -s "$h" ]; then '
    'echo "fired $(head -c 200 -- "$h")"; exit 0; fi; '
    'if p=$(heal_pid) && kill -0 "$p" 2>/dev/null; then echo armed; exit 0; fi; '
    'if command -v systemctl >/dev/null 2>&1 && systemctl list-timers --all '
    '"acctest-heal-$tok.timer" 2>/dev/null | grep -q "acctest-heal-$tok"; then echo armed; '
    'exit 0; fi; echo "not armed"; exit 1'
)
# Disarm (after the service healed itself): stop the timer; prints disarmed|absent. Only a pid
# that ``heal_pid`` accepts is signalled (a refused one is said on stderr). $1 heal directory,
# $2 token.
DISARM_SCRIPT = NODE_DIR_CHECK + _HEAL_PID + (
    'd=$1 tok=$2; said=absent; acctest_dir "${d%/*}" && acctest_dir "$d" || exit 3; '
    'if p=$(heal_pid); then '
    'kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; said=disarmed; fi; '
    'if command -v systemctl >/dev/null 2>&1; then '
    'systemctl stop "acctest-heal-$tok.timer" >/dev/null 2>&1 && said=disarmed; fi; '
    'rm -f "$d/$tok.pid"; echo "$said"'
)
# Run a fault command and print the node's time after it (the fault's start or end).
TIMED_SCRIPT = '"$@" || exit $?; date +%s.%N'


def _timeout(argv: list[str], seconds: int) -> list[str]:
    return ["timeout", f"--kill-after={KILL_AFTER_S}", str(seconds), *argv]


def _sudo(argv: list[str], sudo: bool) -> list[str]:
    return ["sudo", "-n", *argv] if sudo else argv


def agent_start_command(*, remote_dir: str, deadline_s: int, agent_args: list[str]) -> str:
    """Start the agent detached under ``timeout deadline_s`` on the node; prints its pid."""
    argv = ["python3", "-c", AGENT_SOURCE, *agent_args]
    return shlex.join(["sh", "-c", START_SCRIPT, "acctest-soak-start", remote_dir,
                       str(int(deadline_s)), *argv])


def agent_golden_command(*, agent_args: list[str], timeout_s: int) -> str:
    """One correctness round, printed as JSON (the known-good answers)."""
    return shlex.join(_timeout(["python3", "-c", AGENT_SOURCE, *agent_args, "--golden"],
                               timeout_s))


def agent_status_command(remote_dir: str) -> str:
    return shlex.join(["sh", "-c", STATUS_SCRIPT, "acctest-soak-status", remote_dir])


def agent_status_read(stdout: bytes) -> tuple[bool, dict | None, float | None]:
    """(running, done record or None, node time) from the status command's output."""
    lines = stdout.decode(errors="replace").splitlines()
    running = bool(lines) and lines[0].strip() == "running"
    done = None
    for line in lines[1:]:
        if line.strip().startswith("{"):
            try:
                done = json.loads(line)
            except ValueError:
                done = None
    node_time = None
    if lines:
        try:
            node_time = float(lines[-1])
        except ValueError:
            node_time = None
    return running, done, node_time


def agent_read_command(path: str, offset: int) -> str:
    """The bytes of ``path`` from ``offset`` (at most READ_MAX_BYTES)."""
    return shlex.join(["sh", "-c", READ_SCRIPT, "acctest-soak-read", path, str(int(offset)),
                       str(READ_MAX_BYTES)])


def agent_flag_command(remote_dir: str, flag: str, present: bool) -> str:
    """Create or remove the ``pause`` flag file of the agent."""
    if flag not in ("pause",):
        raise ValueError(f"unknown agent flag {flag!r}")
    path = f"{remote_dir}/{flag}"
    return shlex.join(["touch", path] if present else ["rm", "-f", path])


def agent_stop_command(remote_dir: str) -> str:
    return shlex.join(["sh", "-c", STOP_SCRIPT, "acctest-soak-stop", remote_dir])


def arm_command(*, token: str, delay_s: float, heal_argv: list[str], sudo: bool) -> str:
    """Arm the heal ``heal_argv`` to run ``delay_s`` seconds from now on the node."""
    if not TOKEN.fullmatch(token):
        raise ValueError(f"bad heal token {token!r}")
    return shlex.join(_sudo(["sh", "-c", ARM_SCRIPT, "acctest-arm", HEAL_DIR, token,
                             f"{delay_s:.3f}", HEAL_TIMER_SCRIPT, *_timeout(heal_argv, 60)],
                            sudo))


def armed_command(token: str, *, sudo: bool = False) -> str:
    """Whether the heal ``token`` is armed or has fired. Under sudo where it was armed under
    sudo: the heal directory is root's, 0700."""
    return shlex.join(_sudo(["sh", "-c", ARMED_SCRIPT, "acctest-armed", HEAL_DIR, token], sudo))


def armed_read(stdout: bytes) -> tuple[str, float | None, int | None]:
    """(``armed`` | ``fired`` | ``not armed``, node time the heal ran, its exit status)."""
    text = stdout.decode(errors="replace").strip()
    if text.startswith("fired"):
        parts = text.split()
        try:
            return "fired", float(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            return "fired", None, None
    return ("armed" if text == "armed" else "not armed"), None, None


def disarm_command(token: str, *, sudo: bool) -> str:
    return shlex.join(_sudo(["sh", "-c", DISARM_SCRIPT, "acctest-disarm", HEAL_DIR, token],
                            sudo))


def timed_command(argv: list[str], *, sudo: bool) -> str:
    """Run a fault command (inject or heal) and print the node's time after it."""
    return shlex.join(_sudo(_timeout(["sh", "-c", TIMED_SCRIPT, "acctest-fault", *argv], 60),
                            sudo))


# --- fault injectors ---------------------------------------------------------------------


@dataclass(frozen=True)
class SafetyCheck:
    """One check before a fault: its name, the command, and a judge of (exit, stdout) →
    (ok, what it found)."""

    name: str
    command: str
    judge: Callable[[int | None, str], tuple[bool, str]]


@dataclass(frozen=True)
class FaultContext:
    """What an injector needs besides the plan entry: the node's facts and the service's
    view of the array's layout (``array_layout``: "raid0", "raid5", …, or "")."""

    interface: str
    use_sudo: bool
    array_layout: str
    expected_drives: int


class FaultKindError(ValueError):
    """The fault cannot be built from its plan entry; the message names what is missing."""


class LinkDown:
    """Single link down (RUNBOOK §5.3): ``ip [-n NETNS] link set dev IF down`` / ``up``.

    ``target``: ``{"interface"?: IF, "netns"?: NS}``; without an interface, the node's
    registered data interface. Safety: the interface exists, and it is not the interface that
    carries the service's own SSH session (``ip route get <SSH client address>`` must not
    print ``dev IF``).
    """

    kind = "link_down"
    role = "inference"

    @staticmethod
    def interface(fault: dict, ctx: FaultContext) -> str:
        name = (fault.get("target") or {}).get("interface") or ctx.interface
        if not name:
            raise FaultKindError(f"fault {fault['name']}: no interface in the plan and none "
                                 f"registered on the node")
        return name

    @classmethod
    def _ip(cls, fault: dict) -> list[str]:
        netns = (fault.get("target") or {}).get("netns")
        return ["ip", "-n", netns] if netns else ["ip"]

    @classmethod
    def target_text(cls, fault: dict, ctx: FaultContext) -> str:
        netns = (fault.get("target") or {}).get("netns")
        name = cls.interface(fault, ctx)
        return f"{netns}/{name}" if netns else name

    @classmethod
    def inject_argv(cls, fault: dict, ctx: FaultContext) -> list[str]:
        return [*cls._ip(fault), "link", "set", "dev", cls.interface(fault, ctx), "down"]

    @classmethod
    def heal_argv(cls, fault: dict, ctx: FaultContext) -> list[str]:
        return [*cls._ip(fault), "link", "set", "dev", cls.interface(fault, ctx), "up"]

    @classmethod
    def state_command(cls, fault: dict, ctx: FaultContext) -> str:
        return shlex.join([*cls._ip(fault), "-o", "link", "show", "dev",
                           cls.interface(fault, ctx)])

    @staticmethod
    def state_healed(exit_code: int | None, stdout: str) -> bool:
        match = re.search(r"<([^>]*)>", stdout)
        return exit_code == 0 and match is not None and "UP" in match.group(1).split(",")

    @classmethod
    def safety(cls, fault: dict, ctx: FaultContext) -> list[SafetyCheck]:
        name = cls.interface(fault, ctx)

        def exists(code, out):
            return code == 0, (f"{name} exists" if code == 0 else f"no interface {name}: "
                               f"{out.strip()[:200]}")

        def not_ssh(code, out):
            if code != 0 or not out.strip():
                return False, f"cannot tell the SSH path (ip route get said: {out.strip()[:200]})"
            devices = re.findall(r"\bdev (\S+)", out)
            if name in devices:
                return False, (f"{name} carries the service's SSH session ({out.strip()}): "
                               f"refusing to take it down")
            return True, f"SSH path: {out.strip()[:200]}"

        route = ('a=${SSH_CONNECTION%% *}; [ -n "$a" ] || { echo "no SSH_CONNECTION"; exit 1; };'
                 ' ip -o route get "$a"')
        return [SafetyCheck("interface-exists", cls.state_command(fault, ctx), exists),
                SafetyCheck("not-the-ssh-path", shlex.join(["sh", "-c", route]), not_ssh)]


class DriveOut:
    """Single drive out of the array (RUNBOOK §5.3): the vendor's command from the plan, run on
    the array's controller node, ``{drive}`` replaced by the target drive index.

    Safety: the array's layout is redundant (RAID0 refused: one drive loses the volume, DOMAIN
    G4), the drive index is inside the array, the vendor command exists on the node.
    """

    kind = "drive_out"
    role = "array"

    @staticmethod
    def _argv(fault: dict, key: str) -> list[str]:
        argv = fault.get(key)
        if not argv:
            raise FaultKindError(f"fault {fault['name']}: the plan has no {key} command (the "
                                 f"array vendor's; RUNBOOK §5.3)")
        drive = str(fault["target"]["drive"])
        return [drive if item == "{drive}" else item for item in argv]

    @staticmethod
    def target_text(fault: dict, ctx: FaultContext) -> str:
        return str(fault["target"]["drive"])

    @classmethod
    def inject_argv(cls, fault: dict, ctx: FaultContext) -> list[str]:
        return cls._argv(fault, "inject")

    @classmethod
    def heal_argv(cls, fault: dict, ctx: FaultContext) -> list[str]:
        return cls._argv(fault, "heal")

    @classmethod
    def state_command(cls, fault: dict, ctx: FaultContext) -> str | None:
        argv = fault.get("status")
        return shlex.join(argv) if argv else None

    @staticmethod
    def state_healed_for(drive: int) -> Callable[[int | None, str], bool]:
        def healed(exit_code: int | None, stdout: str) -> bool:
            start = stdout.find("{")
            try:
                document = json.JSONDecoder().raw_decode(stdout, start)[0] if start >= 0 else {}
                out = document.get("drives_out") if isinstance(document, dict) else None
            except ValueError:
                return False
            return exit_code == 0 and out is not None and drive not in out
        return healed

    @classmethod
    def safety(cls, fault: dict, ctx: FaultContext) -> list[SafetyCheck]:
        drive = fault["target"]["drive"]
        layout = ctx.array_layout

        def redundant(code, out):
            if layout == "raid0":
                return False, ("the array is RAID0: one drive out loses the volume (DOMAIN.md "
                               "G4); refusing")
            if not layout or layout == "other":
                return False, ("the array's layout is not recorded: record it (RAID5/6/10) "
                               "before a drive fault")
            return True, f"layout {layout}"

        def inside(code, out):
            ok = 0 <= drive < max(ctx.expected_drives, 1)
            return ok, (f"drive {drive} of {ctx.expected_drives}" if ok else
                        f"drive {drive} is not one of the array's {ctx.expected_drives} drives")

        def command(code, out):
            return code == 0, (out.strip()[:200] if code == 0 else
                               f"the vendor command is not on the node: {out.strip()[:200]}")

        tool = cls.inject_argv(fault, ctx)[0]
        return [SafetyCheck("redundant-layout", "", redundant),
                SafetyCheck("drive-in-array", "", inside),
                SafetyCheck("vendor-command", shlex.join(["sh", "-c", 'command -v "$1"',
                                                          "acctest-which", tool]), command)]


FAULT_KINDS: dict[str, type[LinkDown] | type[DriveOut]] = {
    LinkDown.kind: LinkDown,
    DriveOut.kind: DriveOut,
}


def fault_kind(name: str) -> type[LinkDown] | type[DriveOut]:
    """The injector registered as ``name``; KeyError naming the known kinds otherwise."""
    try:
        return FAULT_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown fault kind {name!r}; known: {sorted(FAULT_KINDS)}") from None
