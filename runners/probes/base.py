"""The probe model: a probe's definition, its validated parameters and the command it builds.

A probe is pure: it validates its parameters, builds its command as an argument list (quoted
here, wrapped in ``timeout --kill-after`` so the node ends it too) and names its parser. It never
connects, sleeps or touches the database; ``runners.execution`` does the I/O. Commands come only
from definitions and validated parameters, never from free text. This module also holds the
shell scripts that track a running probe's process group on the node and kill it
(:func:`kill_command`), that make a run's scratch directory under the checked base
(:func:`scratch_command`), and the parameter kinds several probe families share.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

KILL_AFTER_S = 10  # grace between timeout's TERM and KILL on the node
# On the node: the base of everything the service leaves there (pid files of running probes in
# runs/, heal records in heal/, per-run result directories made by mktemp -d). /var/tmp and
# /tmp are world-writable, so the base is owned by the user the commands run as (root under
# sudo), mode 0700, and checked before every use (NODE_DIR_CHECK): anything inside it can only
# have been put there by that user.
NODE_ROOT = "/var/tmp/acctest"  # noqa: S108  # nosec B108 # checked: own, 0700, not a symlink
RUNS_DIR = f"{NODE_ROOT}/runs"  # pid files of running probes: RUNS_DIR/TOKEN.pid
TOKEN = re.compile(r"[a-z0-9-]{1,64}")
# What a stand-in tool writes to stderr: output so marked is simulated evidence, shown as such and
# never deciding a customer engagement. Every road into the ledger (runners.intake) looks for it.
SIMULATED_MARKER = "acceptance-lab: simulated output"
# The mark a tracked command carries in its command line (``env ACCTEST_RUN=TOKEN``, kept in the
# argv of the ``timeout`` that leads its process group): the kill script kills a recorded pid
# only when /proc/PID/cmdline shows this run's mark.
RUN_MARK = "ACCTEST_RUN"

# A shell function: ``acctest_dir DIR`` makes DIR (mode 0700) when absent and refuses it, with a
# message on stderr and status 1, when it is a symlink, not a directory, or owned by another uid
# than the one running; an own directory with a looser mode is tightened to 0700. Never follows
# a link: -L is checked before and after the mkdir, stat reports the link itself, and in a
# sticky /var/tmp nobody else can swap the checked directory afterwards. One ``stat`` a
# directory (owner and mode together) and one ``id -u`` a script, set here, not read from the
# environment (issue 17: a probe's tracking checked two directories with six processes, about
# 12 ms of the node's CPU; now three).
NODE_DIR_CHECK = (
    'acctest_u=$(id -u); '
    'acctest_dir() { if [ -L "$1" ]; then echo "acctest: refusing $1: it is a symlink" >&2; '
    'return 1; fi; [ -e "$1" ] || mkdir -m 0700 -- "$1" 2>/dev/null || [ -e "$1" ] || '
    '{ echo "acctest: cannot create $1" >&2; return 1; }; '
    'if [ -L "$1" ] || [ ! -d "$1" ]; then echo "acctest: refusing $1: not a directory" >&2; '
    'return 1; fi; acctest_s=$(stat -c "%u %a" -- "$1") || return 1; acctest_o=${acctest_s% *}; '
    'if [ "$acctest_o" != "$acctest_u" ]; then echo "acctest: refusing $1: owned by uid '
    '$acctest_o, not by uid $acctest_u that runs this" >&2; return 1; fi; '
    '[ "${acctest_s#* }" = 700 ] || chmod 0700 -- "$1" || return 1; }; '
)

# Runs the probe's command in the background so its pid is known, records it, waits, and
# removes the record. GNU timeout makes itself a process-group leader (setpgid), so that pid is
# also the group of everything the probe starts: cancel kills the group. The pid file is made
# first with noclobber (set -C) in the checked runs directory, so a file already there (or a
# link) is refused before anything starts. Exit 125 when the scratch is refused.
# $1 pid file (NODE_ROOT/runs/TOKEN.pid), then the command.
TRACK_SCRIPT = NODE_DIR_CHECK + (
    'f=$1; shift; acctest_dir "${f%/*/*}" && acctest_dir "${f%/*}" || exit 125; '
    'set -C; { : > "$f"; } 2>/dev/null || { echo "acctest: refusing $f: it already exists" >&2; '
    'exit 125; }; set +C; "$@" & p=$!; echo "$p" >| "$f"; '
    'wait "$p"; rc=$?; rm -f "$f"; exit "$rc"'
)
# Kills the probe's process group and confirms nothing of it is left: prints "gone" (exit 0),
# "absent" (exit 0: it had already ended), or exit 1 if it survived SIGKILL. $1 pid file. A
# command that has just started may not have written its pid yet: wait up to 10 s for it (on a
# loaded node the shell that writes it can lag the probe it started by seconds). The recorded
# pid is used only when it is a number above 1 whose /proc/PID/cmdline carries this run's mark
# (RUN_MARK=TOKEN, the token being the pid file's name): anything else is refused, exit 2, with
# the reason, and nothing is signalled.
KILL_SCRIPT = NODE_DIR_CHECK + (
    'f=$1; t=${f##*/}; t=${t%.pid}; acctest_dir "${f%/*/*}" && acctest_dir "${f%/*}" || exit 2; '
    f'ours() {{ tr "\\000" "\\n" < "/proc/$p/cmdline" 2>/dev/null | grep -qxF "{RUN_MARK}=$t"; }}; '
    'i=0; while [ ! -s "$f" ] && [ "$i" -lt 100 ]; do i=$((i+1)); sleep 0.1; done; '
    '[ -s "$f" ] || { echo absent; exit 0; }; '
    'if [ -L "$f" ] || [ ! -f "$f" ]; then echo "refusing: $f is not a plain file"; exit 2; fi; '
    'p=$(head -c 32 -- "$f"); case "$p" in ""|*[!0-9]*) '
    'echo "refusing: $f holds [$p], not a process id"; exit 2;; esac; '
    '[ "$p" -gt 1 ] 2>/dev/null || { echo "refusing: $f holds pid $p, not one above 1"; '
    'exit 2; }; '
    'if [ ! -e "/proc/$p" ]; then rm -f "$f"; echo absent; exit 0; fi; '
    'ours || { echo "refusing: process $p is not this run (its command line lacks '
    f'{RUN_MARK}=$t)"; exit 2; }}; '
    'kill -TERM -- "-$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; i=0; '
    'while kill -0 -- "-$p" 2>/dev/null || { kill -0 "$p" 2>/dev/null && ours; }; do i=$((i+1)); '
    '[ "$i" -eq 30 ] && { kill -KILL -- "-$p" 2>/dev/null; ours && kill -KILL "$p" 2>/dev/null; }; '
    '[ "$i" -ge 60 ] && { echo "still running: $p"; exit 1; }; sleep 0.1; done; '
    'rm -f "$f"; echo gone'
)
# Makes one run's scratch directory: checks NODE_ROOT, then ``mktemp -d`` under it (0700, a
# name nobody can guess) and prints its path. $1 the root, $2 the name's prefix.
SCRATCH_SCRIPT = NODE_DIR_CHECK + (
    'acctest_dir "$1" || exit 125; mktemp -d -- "$1/$2.XXXXXXXX" || exit 125'
)


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
    # Where the tool reports progress on stderr: a regex whose group 1 is a percentage.
    progress: str | None = None
    # The probe that undoes this one (same parameters where it has them), run when the job ends
    # early after this probe succeeded: a started serving engine is stopped on cancel or error.
    cleanup: str | None = None
    # Which exit statuses still carry output to parse (smartctl's status is a bit mask of
    # findings, RUNBOOK §2.5); anything else is a failed run.
    parse_exit: Callable[[int], bool] = lambda code: code == 0
    # A short form for people (reports) where the command wraps a script; None: the command.
    summary: Callable[[dict[str, Any]], str] | None = None
    # The output carries the node's clock: the service records its own clock just before the
    # command is sent and just after its end (run labels ``service_sent`` /
    # ``service_received``, epoch seconds), from which the node's clock skew is derived.
    clock: bool = False

    def clean(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Validate ``values`` against the declared parameters (unknown names refused)."""
        unknown = set(values) - set(self.params)
        if unknown:
            raise ProbeParameterError(f"{self.name}: unknown parameters {sorted(unknown)}")
        return {name: p.clean(self.name, name, values.get(name)) for name, p in self.params.items()}

    def command(self, values: Mapping[str, Any], *, sudo: bool = False,
                timeout_s: float | None = None, token: str | None = None) -> str:
        """The shell command line to send: validated argv, quoted, under ``timeout`` on the node.

        ``timeout_s`` overrides the definition's timeout for one run. With ``token`` the command
        is tracked: its process group is recorded in ``RUNS_DIR/TOKEN.pid`` on the node so that
        :func:`kill_command` can stop it and confirm it gone.
        """
        argv = self.argv(self.clean(values))
        seconds = int(timeout_s if timeout_s is not None else self.timeout_s)
        if not 1 <= seconds <= 7 * 24 * 3600:
            raise ProbeParameterError(f"{self.name}: timeout {seconds} s is outside 1 s … 7 d")
        prefix = ["sudo", "-n"] if sudo else []
        mark = []
        if token is not None:
            if not TOKEN.fullmatch(token):
                raise ProbeParameterError(f"{self.name}: bad run token {token!r}")
            mark = [f"{RUN_MARK}={token}"]
        limited = ["timeout", f"--kill-after={KILL_AFTER_S}", str(seconds), "env", "LC_ALL=C",
                   *mark, *argv]
        if token is not None:
            limited = ["sh", "-c", TRACK_SCRIPT, "acctest-run", f"{RUNS_DIR}/{token}.pid",
                       *limited]
        return shlex.join([*prefix, *limited])

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


def kill_command(token: str, *, sudo: bool = False) -> str:
    """The command that kills a tracked probe run's process group on the node and confirms it."""
    if not TOKEN.fullmatch(token):
        raise ProbeParameterError(f"bad run token {token!r}")
    prefix = ["sudo", "-n"] if sudo else []
    return shlex.join([*prefix, "sh", "-c", KILL_SCRIPT, "acctest-kill",
                       f"{RUNS_DIR}/{token}.pid"])


def scratch_command(*, prefix: str, sudo: bool = False, root: str | None = None) -> str:
    """The command that makes one run's scratch directory under the checked ``NODE_ROOT`` (or
    ``root``) with ``mktemp -d`` and prints its path; exit 125 and the reason when refused."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", prefix):
        raise ProbeParameterError(f"bad scratch prefix {prefix!r}")
    return shlex.join([*(["sudo", "-n"] if sudo else []), "sh", "-c", SCRATCH_SCRIPT,
                       "acctest-scratch", root or NODE_ROOT, prefix])
