"""Probe definitions: what to run on a node and which parser reads it, in one explicit registry.

The probe model (definition, parameters, command building, tracking and kill scripts) lives in
``base``; the probes themselves, one module per gate family: ``drives`` (G1), ``throughput``
(G2), ``cold_resume`` (G3). Command forms follow RUNBOOK.md (§2.1 inventory, §2.3 self-test,
§2.4 SMART, §3.1 link, §3.2 fio, §3.4 benchmark, §4 the G3 cold-resume arms: engine, tier
sizing, passes, drain, guarded flush, /metrics window, §3.3 RDMA counter samples). Callers
import from here: ``from runners.probes import probe, PROBES, …``.
"""

from __future__ import annotations

from runners.probes.base import (
    KILL_AFTER_S,
    RUNS_DIR,
    SIMULATED_MARKER,
    Param,
    Probe,
    ProbeParameterError,
    kill_command,
)
from runners.probes.cold_resume import COLD_RESUME_PROBES
from runners.probes.drives import DRIVE_PROBES
from runners.probes.throughput import THROUGHPUT_PROBES

__all__ = [
    "KILL_AFTER_S",
    "PROBES",
    "RUNS_DIR",
    "SIMULATED_MARKER",
    "Param",
    "Probe",
    "ProbeParameterError",
    "kill_command",
    "probe",
]


def _registry(*families: tuple[Probe, ...]) -> dict[str, Probe]:
    # The families live in separate modules now: refuse a name two of them define, which a
    # plain dict would silently let the later one win.
    registry: dict[str, Probe] = {}
    for family in families:
        for spec in family:
            if spec.name in registry:
                raise ValueError(f"probe {spec.name!r} is defined twice")
            registry[spec.name] = spec
    return registry


PROBES: dict[str, Probe] = _registry(DRIVE_PROBES, THROUGHPUT_PROBES, COLD_RESUME_PROBES)


def probe(name: str) -> Probe:
    """The registered probe ``name``; KeyError naming the known probes otherwise."""
    try:
        return PROBES[name]
    except KeyError:
        raise KeyError(f"unknown probe {name!r}; known: {sorted(PROBES)}") from None
