"""The probe model: a probe's definition, its validated parameters and the command it builds.

A probe is pure: it validates its parameters, builds its command as an argument list (quoted
here, wrapped in ``timeout --kill-after`` so the node ends it too) and names its parser. It never
connects, sleeps or touches the database; ``runners.execution`` does the I/O. Commands come only
from definitions and validated parameters, never from free text. This module also holds the
shell scripts that track a running probe's process group on the node and kill it
(:func:`kill_command`), and the parameter kinds several probe families share.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

KILL_AFTER_S = 10  # grace between timeout's TERM and KILL on the node
RUNS_DIR = "/tmp/acctest-runs"  # noqa: S108 (on the node: pid files of running probes)
TOKEN = re.compile(r"[a-z0-9-]{1,64}")
# What a stand-in tool writes to stderr: output so marked is simulated evidence, shown as such and
# never deciding a customer engagement. Every road into the ledger (runners.intake) looks for it.
SIMULATED_MARKER = "acceptance-lab: simulated output"

# Runs the probe's command in the background so its pid is known, records it, waits, and
# removes the record. GNU timeout makes itself a process-group leader (setpgid), so that pid is
# also the group of everything the probe starts: cancel kills the group.
# $1 pid file, then the command.
TRACK_SCRIPT = (
    'f=$1; shift; mkdir -p "${f%/*}" || exit 125; "$@" & p=$!; echo "$p" > "$f"; '
    'wait "$p"; rc=$?; rm -f "$f"; exit "$rc"'
)
# Kills the probe's process group and confirms nothing of it is left: prints "gone" (exit 0),
# "absent" (exit 0: it had already ended), or exit 1 if it survived SIGKILL. $1 pid file. A
# command that has just started may not have written its pid yet: wait up to 10 s for it (on a
# loaded node the shell that writes it can lag the probe it started by seconds).
KILL_SCRIPT = (
    'f=$1; i=0; while [ ! -s "$f" ] && [ "$i" -lt 100 ]; do i=$((i+1)); sleep 0.1; done; '
    '[ -s "$f" ] || { echo absent; exit 0; }; p=$(cat "$f"); '
    'kill -TERM -- "-$p" 2>/dev/null; kill -TERM "$p" 2>/dev/null; i=0; '
    'while kill -0 -- "-$p" 2>/dev/null || kill -0 "$p" 2>/dev/null; do i=$((i+1)); '
    '[ "$i" -eq 30 ] && { kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; }; '
    '[ "$i" -ge 60 ] && { echo "still running: $p"; exit 1; }; sleep 0.1; done; '
    'rm -f "$f"; echo gone'
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
        limited = ["timeout", f"--kill-after={KILL_AFTER_S}", str(seconds), "env", "LC_ALL=C",
                   *argv]
        if token is not None:
            if not TOKEN.fullmatch(token):
                raise ProbeParameterError(f"{self.name}: bad run token {token!r}")
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
