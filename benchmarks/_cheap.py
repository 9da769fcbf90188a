"""Nearly-free stand-ins: G2's three probes as ``/bin/cat`` of the outputs the lab's stand-ins
printed once (captured from a real run of G2 on one lab node), parsed by the real parsers. The
node's CPU per probe drops to one ``cat`` and sshd's channel, so what a fan-out adds is the
service's own cost. Registered under their own names (``cheap_*``) in the benchmark and its
workers.

``/bin/cat`` by its path, for the probe and its version query alike: a bare ``cat`` is the lab's
Python stand-in on a lab node's PATH (``runners/lab/standins/cat``, for the RDMA counters), about
22 ms of CPU per start — two starts per probe, 64 nodes' worth on the machine's two cores, which
the fan-out figure then measured instead of the service (issue 17)."""

from __future__ import annotations

import shlex
from pathlib import Path

G2_PROBES = ("link_speed", "fio_seqread", "vllm_bench_serve")
CAT = "/bin/cat"  # coreutils' own, not the lab's stand-in of that name


def capture(gate_run, directory: Path) -> None:
    """Write each G2 probe's stored stdout (its content-addressed file, ``runners.outputs``)
    and tool version from ``gate_run`` into ``directory``. ValueError when a probe did not
    parse or its stored stdout is empty: the stand-ins would replay nothing."""
    from runners.outputs import output_bytes

    directory.mkdir(parents=True, exist_ok=True)
    seen = set()
    for run in gate_run.probe_runs.filter(probe__in=G2_PROBES).order_by("id"):
        data = output_bytes(run, "stdout")
        if run.state != "parsed" or not data:
            raise ValueError(f"{run.probe} on {run.node}: {run.state}, {len(data)} bytes of "
                             f"stdout stored: nothing to replay")
        (directory / f"{run.probe}.out").write_bytes(data)
        (directory / f"{run.probe}.version").write_text(run.tool_version + "\n")
        seen.add(run.probe)
    missing = sorted(set(G2_PROBES) - seen)
    if missing:
        raise ValueError(f"gate run {gate_run.id} has no run of {', '.join(missing)}")


def register(directory: Path) -> list[str]:
    from runners.probes import PROBES, Probe, probe

    names = []
    for name in G2_PROBES:
        real = probe(name)
        out, version = directory / f"{name}.out", directory / f"{name}.version"
        PROBES[f"cheap_{name}"] = Probe(
            name=f"cheap_{name}", role=real.role, parser=real.parser,
            version_argv=(CAT, str(version)), timeout_s=60, params={},
            argv=lambda _p, out=out: [CAT, str(out)],
            description=f"benchmark only: {name}'s captured output, by {CAT} "
                        f"({shlex.quote(str(out))})")
        names.append(f"cheap_{name}")
    return names


def plan() -> list[dict]:
    return [{"probe": f"cheap_{name}", "role": "inference"} for name in G2_PROBES]
