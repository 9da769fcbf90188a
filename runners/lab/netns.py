"""Real network paths for the lab soak: a network namespace joined to the host by veth pairs.

The soak's link fault is real in the lab (issue 7 §6): the stand-in array's data service runs
inside a namespace ``acs-K`` and is reached from the host (the lab's inference node) over one
veth pair per path, ``acsK-hP`` (host end, ``10.213.K.(4P-3)/30``) ↔ ``acsK-nP`` (namespace
end, ``10.213.K.(4P-2)/30``). The fault takes down the **namespace end only**
(``ip -n acs-K link set dev acsK-nP down``).

Network safety (PLATFORM.md gotcha 1): before any link is created, ``ip route add blackhole
10.213.K.0/24 metric 4000`` — if a host end ever went down, its /30 route would vanish and
packets for the namespace address would otherwise follow the default route out of the
machine; with the blackhole they are dropped here. Only 10.213.0.0/16 (private, RFC 1918) is
used, one free /24 per lab. Everything created is written to ``netns.json`` in the lab's
directory *before* it is created, so :func:`paths_down` removes it all even after a crash
(``lab down`` and ``lab up`` call it; test fixtures call it in ``finally``).

Needs root and ``ip`` (Debian iproute2). Raises :class:`NetnsError` with the command and what
it said when a step fails (after removing what was already created).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

IP = "/usr/sbin/ip"
SUBNET_PREFIX = "10.213"
BLACKHOLE_METRIC = "4000"
STATE_FILE = "netns.json"
MAX_PATHS = 4


class NetnsError(RuntimeError):
    """A namespace, link or route could not be created or removed; the message says which."""


@dataclass(frozen=True)
class Path_:
    """One data path: the host end and namespace end of a veth pair and their addresses."""

    index: int
    host_if: str
    ns_if: str
    host_address: str
    ns_address: str


@dataclass(frozen=True)
class Paths:
    """The namespace, its /24 (blackholed) and its paths."""

    netns: str
    subnet: str
    paths: tuple[Path_, ...]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def _taken_subnets() -> set[int]:
    routes = _ip("-j", "route", "show", "table", "all", check=False).stdout or "[]"
    taken = set()
    for route in json.loads(routes):
        dst = route.get("dst", "")
        if dst.startswith(f"{SUBNET_PREFIX}."):
            taken.add(int(dst.split(".")[2].split("/")[0]))
    namespaces = _ip("netns", "list", check=False).stdout
    for line in namespaces.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("acs-") and name[4:].isdigit():
            taken.add(int(name[4:]))
    return taken


def _plan(index: int, count: int) -> Paths:
    paths = tuple(
        Path_(p, f"acs{index}-h{p}", f"acs{index}-n{p}", f"{SUBNET_PREFIX}.{index}.{4 * p - 3}",
              f"{SUBNET_PREFIX}.{index}.{4 * p - 2}")
        for p in range(1, count + 1)
    )
    return Paths(f"acs-{index}", f"{SUBNET_PREFIX}.{index}.0/24", paths)


def _write_state(directory: Path, state: dict) -> None:
    path = directory / STATE_FILE
    path.write_text(json.dumps(state, indent=1))
    path.chmod(0o600)


def paths_up(directory: Path, *, count: int) -> Paths:
    """Create a namespace with ``count`` veth paths to the host (blackhole route first).

    Records the plan in ``directory/netns.json`` before creating anything. Raises NetnsError
    (after :func:`paths_down`) when a step fails, ValueError for a count outside 1 … 4.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PATHS:
        raise ValueError(f"paths: count must be 1 … {MAX_PATHS}, not {count!r}")
    if os.geteuid() != 0:
        raise NetnsError("creating network namespaces needs root")
    taken = _taken_subnets()
    free = [k for k in range(10, 250) if k not in taken]
    if not free:
        raise NetnsError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16")
    plan = _plan(free[0], count)
    directory.mkdir(parents=True, exist_ok=True)
    state = {"netns": plan.netns, "subnet": plan.subnet, "blackhole": True,
             "host_ifs": [p.host_if for p in plan.paths], "pids": []}
    _write_state(directory, state)
    try:
        # Gotcha 1: the blackhole before any link exists; verified before going on.
        _ip("route", "add", "blackhole", plan.subnet, "metric", BLACKHOLE_METRIC)
        shown = _ip("route", "show", "type", "blackhole", plan.subnet).stdout
        if plan.subnet.split("/")[0] not in shown:
            raise NetnsError(f"the blackhole route for {plan.subnet} is not in place: {shown!r}")
        _ip("netns", "add", plan.netns)
        _ip("-n", plan.netns, "link", "set", "dev", "lo", "up")
        for p in plan.paths:
            _ip("link", "add", p.host_if, "type", "veth", "peer", "name", p.ns_if,
                "netns", plan.netns)
            _ip("addr", "add", f"{p.host_address}/30", "dev", p.host_if)
            _ip("-n", plan.netns, "addr", "add", f"{p.ns_address}/30", "dev", p.ns_if)
            _ip("link", "set", "dev", p.host_if, "up")
            _ip("-n", plan.netns, "link", "set", "dev", p.ns_if, "up")
    except (NetnsError, subprocess.SubprocessError, OSError) as error:
        paths_down(directory)
        raise NetnsError(f"could not create the lab's network paths: {error}") from None
    return plan


def paths_of(directory: Path) -> Paths | None:
    """The paths recorded in ``directory`` (None when it has none)."""
    path = directory / STATE_FILE
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    index = int(state["netns"].split("-")[1])
    return _plan(index, len(state["host_ifs"]))


def process_record(directory: Path, pid: int, marker: str) -> None:
    """Remember a lab process (array server, engine) that :func:`paths_down` must stop; only a
    pid whose command line still contains ``marker`` is ever signalled."""
    path = directory / STATE_FILE
    state = json.loads(path.read_text())
    state["pids"].append({"pid": pid, "marker": marker})
    _write_state(directory, state)


def _stop(pid: int, marker: str) -> None:
    try:
        if marker.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    for _ in range(100):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (OSError, IndexError):
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def link_state(netns: str, interface: str) -> str:
    """``UP`` or ``DOWN`` (the administrative state) of ``interface`` in ``netns``."""
    shown = _ip("-j", "-n", netns, "link", "show", "dev", interface).stdout
    flags = json.loads(shown)[0].get("flags", [])
    return "UP" if "UP" in flags else "DOWN"


def paths_down(directory: Path) -> list[str]:
    """Remove what ``directory/netns.json`` records: its processes, the namespace (its veth
    ends go with it), host ends left over, and the blackhole route — last, so no moment exists
    in which a link is up without it. Returns what was removed; idempotent."""
    path = directory / STATE_FILE
    if not path.exists():
        return []
    state = json.loads(path.read_text())
    removed = []
    for entry in state.get("pids", []):
        _stop(int(entry["pid"]), entry["marker"])
    netns = state["netns"]
    if netns in _ip("netns", "list", check=False).stdout.split():
        for pid in _ip("netns", "pids", netns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        _ip("netns", "del", netns, check=False)
        removed.append(f"netns {netns}")
    for host_if in state.get("host_ifs", []):
        if _ip("link", "show", "dev", host_if, check=False).returncode == 0:
            _ip("link", "del", "dev", host_if, check=False)
            removed.append(f"link {host_if}")
    if state.get("blackhole"):
        if _ip("route", "del", "blackhole", state["subnet"], "metric", BLACKHOLE_METRIC,
               check=False).returncode == 0:
            removed.append(f"blackhole {state['subnet']}")
    path.unlink(missing_ok=True)
    return removed
