"""Collecting what the soak's node agents wrote, by byte offset, into the ledger.

Every sampling interval the driver asks each agent's node for the bytes of ``windows.jsonl``
and ``probes.jsonl`` past the stored offsets. Each collected range (cut at its last whole
line) becomes one ``ProbeRun`` through the evidence intake (``runners.intake``: raw bytes,
sizes, sha256, simulated mark), is read by its parser (``runners.parsers.soak_windows`` /
``soak_correctness``) and turned here into measurement rows with ``sampled_at``; the
correctness mismatches are computed against the node's known-good answers. A range that cannot
be read fails its run with kind ``parse`` and the offset moves on (the raw bytes stay). A node
that cannot be reached opens a collection gap, closed by the next collection that works.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import wait
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any

from django.db import transaction
from django.utils import timezone

from acceptance.models import Node
from runners.intake import measurements_store, parse_failed, raw_output_keep
from runners.models import Measurement, ProbeRun
from runners.parsers import soak_correctness, soak_windows
from runners.parsers.base import ParseError
from runners.soak import commands
from runners.soak.digest import answer_tuples, answers_fold, charts_fold, digest_rebuild
from runners.soak.evaluation import WINDOW_METRICS, windows_fold
from runners.soak.events import event_record
from runners.soak.models import CollectionGap, Soak, SoakAgent, SoakWindow
from runners.soak.nodes import NodePool, node_time
from runners.soak.plan import real_s
from runners.transport import CommandResult, TransportError

COLLECT_WAIT_S = 20.0  # per tick, for the nodes' reads (each bounded by its own timeouts)
STDERR_KEEP_BYTES = 64 << 10  # the soak's own commands say little on stderr; more is noise


def soak_run_record(*, soak: Soak, agent: SoakAgent, probe: str, parser: ModuleType,
                    command: str, exit_code: int | None, stdout: bytes, stderr: bytes,
                    parameters: dict, started: datetime) -> ProbeRun:
    """Store one raw output the soak read from ``agent``'s node through the evidence intake,
    with ``parser``'s name and version; the run is then parsing."""
    run = ProbeRun(
        gate_run_id=soak.gate_run_id, node=agent.node, probe=probe, parser=parser.TOOL,
        parser_version=parser.PARSER_VERSION, command=command, parameters=parameters,
        tool_version=agent.tool_version, exit_code=exit_code, started_at=started,
        finished_at=timezone.now(), state=ProbeRun.State.PARSING)
    raw_output_keep(run, stdout=stdout, stderr=stderr[:STDERR_KEEP_BYTES],
                    simulated=agent.simulated)
    run.save()
    return run


def window_rows(records: Sequence[soak_windows.WindowRecord],
                agent: SoakAgent) -> list[Measurement]:
    """The measurement rows of window records (not saved; ``soak_windows.measurements``);
    moves ``agent``'s last window and last completion on. A window the client failed counts
    every planned request as failed."""
    plan = agent.soak.plan
    planned = soak_windows.planned_requests(float(plan["load"]["request_rate"]),
                                            real_s(plan, plan["load"]["window_s"]))
    rows = []
    for record in records:
        for m in soak_windows.measurements(record, planned):
            rows.append(Measurement(metric=m.metric, value=m.value, unit=m.unit,
                                    labels=m.labels, sampled_at=node_time(record.ended)))
        agent.last_window = max(agent.last_window, record.index)
        if record.last_completion:
            agent.last_completion_at = record.last_completion
    return rows


def answer_rows(rounds: Sequence[soak_correctness.CorrectnessRound],
                agent: SoakAgent) -> list[Measurement]:
    """One ``probe_mismatches`` row per answer of each round (not saved;
    ``soak_correctness.mismatches`` against the node's known-good answers)."""
    return [Measurement(metric=m.metric, value=m.value, unit=m.unit, labels=m.labels,
                        sampled_at=node_time(round_.at))
            for round_ in rounds for m in soak_correctness.mismatches(round_, agent.golden)]


def windows_record(soak: Soak, agent: SoakAgent, stored: Sequence[Measurement]) -> None:
    """Fold the stored rows of newly collected windows into their ``SoakWindow`` aggregates,
    once per window (the incremental side of the steady-state figures: nothing already
    collected is read again)."""
    folded = windows_fold((m.id, m.metric, m.value, m.labels, m.sampled_at.timestamp(),
                           agent.node.name) for m in stored
                          if m.metric in WINDOW_METRICS and m.sampled_at is not None)
    SoakWindow.objects.bulk_create([SoakWindow(
        soak=soak, node=agent.node, index=w.index, start=w.start, end=w.end,
        completed=w.completed, failed=w.failed, ttft_p99=w.ttft_p99,
        output_throughput=w.output_throughput, completion_gap_max=w.gap_max,
        first_completion=w.first_completion, last_completion=w.last_completion,
        measurement_ids=list(w.ids), metric_ids=list(w.metric_ids)) for w in folded])
    if not soak.chart_bucket_windows:  # another copy of the soak may have fixed it
        soak.chart_bucket_windows = Soak.objects.values_list(
            "chart_bucket_windows", flat=True).get(id=soak.id)
    if not soak.chart_bucket_windows and SoakWindow.objects.filter(soak=soak).exclude(
            index__in=[w.index for w in folded], node=agent.node).exists():
        digest_rebuild(soak)  # windows collected before the chart buckets existed
    else:
        charts_fold(soak, agent.node_id, folded)


def answers_record(soak: Soak, agent: SoakAgent, stored: Sequence[Measurement],
                   offset: int) -> None:
    """Fold newly stored answers into ``agent.answers_latest`` (saved by the caller); an agent
    whose earlier answers were collected before it existed starts from the ledger."""
    if agent.answers_latest is None and offset > 0:
        agent.answers_latest = {}
        answers_fold(agent, answer_tuples(Measurement.objects.filter(
            gate_run_id=soak.gate_run_id, node_id=agent.node_id, metric="probe_mismatches",
            derived=False).exclude(id__in=[m.id for m in stored]).order_by("id")))
    answers_fold(agent, answer_tuples(stored))


# file the agent writes → (probe name of its runs, parser module, records → rows)
READERS: dict[str, tuple[str, ModuleType, Callable[[Any, SoakAgent], list[Measurement]]]] = {
    "windows.jsonl": ("soak_windows", soak_windows, window_rows),
    "probes.jsonl": ("soak_correctness", soak_correctness, answer_rows),
}


@dataclass
class Fetched:
    """What one collection read from an agent's node (network only, no database): the status
    command's output and, per file, ``(offset, command text, started, result)``."""

    status: bytes
    reads: dict[str, tuple[int, str, datetime, CommandResult]]


def agent_fetch(agent: SoakAgent, nodes: NodePool) -> Fetched:
    """Read ``agent``'s status and the bytes past its stored offsets (no database access, so
    it may run in a collection thread). Raises TransportError when the node cannot be
    reached or does not answer within the per-command timeouts."""
    status = nodes.run(agent.node, commands.agent_status_command(agent.remote_dir), timeout=30)
    reads = {}
    for name in READERS:
        offset = int(agent.offsets.get(name, 0))
        started = timezone.now()
        result = nodes.run(agent.node, commands.agent_read_command(
            f"{agent.remote_dir}/{name}", offset), timeout=60)
        reads[name] = (offset, f"tail -c +{offset + 1} {agent.remote_dir}/{name} "
                               f"(soak collection)", started, result)
    return Fetched(status.stdout, reads)


def agent_collect(*, soak: Soak, agent: SoakAgent, nodes: NodePool) -> bool:
    """Collect what ``agent`` wrote since the stored offsets; True when it has finished and
    everything it wrote is collected. Raises TransportError when the node cannot be reached."""
    return agent_store(soak=soak, agent=agent, fetched=agent_fetch(agent, nodes))


def agent_store(*, soak: Soak, agent: SoakAgent, fetched: Fetched) -> bool:
    """Store what :func:`agent_fetch` read (each range one probe run, its rows, its windows'
    aggregates, the new offsets); True when the agent has finished and all is collected."""
    running, done, _node_time = commands.agent_status_read(fetched.status)
    complete = True
    for name, (probe, parser, rows_of) in READERS.items():
        offset, command, started, result = fetched.reads[name]
        path = f"{agent.remote_dir}/{name}"
        cut = result.stdout.rfind(b"\n") + 1
        if len(result.stdout) >= commands.READ_MAX_BYTES:
            complete = False  # more to read next time
        if cut == 0:
            continue
        raw = result.stdout[:cut]
        with transaction.atomic():
            run = soak_run_record(
                soak=soak, agent=agent, probe=probe, parser=parser, command=command,
                exit_code=result.exit_code, stdout=raw, stderr=result.stderr, started=started,
                parameters={"file": path, "offset": offset, "length": cut})
            try:
                rows = rows_of(parser.parse(raw), agent)
            except ParseError as error:
                parse_failed(run, error)
            else:
                stored = measurements_store(run, rows)
                if name == "windows.jsonl":
                    windows_record(soak, agent, stored)
                else:
                    answers_record(soak, agent, stored, offset)
            agent.offsets = {**agent.offsets, name: offset + cut}
            agent.last_collected_at = timezone.now()
            agent.save(update_fields=["offsets", "last_collected_at", "last_window",
                                      "last_completion_at", "answers_latest"])
    if not running:
        state = SoakAgent.State.FINISHED if done else SoakAgent.State.LOST
        if agent.state != state:
            agent.state = state
            agent.save(update_fields=["state"])
            event_record(soak, f"agent {state}", f"{agent.node.name}: "
                         + (f"{done['reason']} after {done['windows']} windows" if done else
                            "the agent is gone without its done record"))
    return complete and not running


def soak_collect_all(*, soak: Soak, nodes: NodePool, wait_s: float = COLLECT_WAIT_S) -> bool:
    """Collect from every agent still to be collected; True when all have finished and their
    records are in. The nodes are read in parallel (``nodes.pending``: at most one read in
    flight per node) and what arrived within ``wait_s`` is stored here, in this thread: a
    node that does not answer (or is unreachable) opens its gap and is read again once its
    read ends, while the others are collected — one node never stalls the tick."""
    finished = True
    todo = []
    for agent in soak.agents.select_related("node__credential", "node__jump_host", "soak"):
        if agent.state in (SoakAgent.State.FINISHED, SoakAgent.State.LOST,
                           SoakAgent.State.STOPPED) and agent.last_collected_at:
            continue
        todo.append(agent)
    futures = {}
    for agent in todo:
        future = nodes.pending.get(agent.id)
        if future is None:
            nodes.target(agent.node)  # resolved here: the thread reads no database
            future = nodes.submit(agent_fetch, agent, nodes)
            nodes.pending[agent.id] = future
        futures[agent.id] = (agent, future)
    wait([f for _a, f in futures.values()], timeout=wait_s)
    for agent, future in futures.values():
        if not future.done():
            gap_open(soak, agent.node, f"{agent.node.name} did not answer within {wait_s:g} s; "
                     f"still waiting for it (the other nodes are collected)")
            finished = False
            continue
        del nodes.pending[agent.id]
        try:
            finished &= agent_store(soak=soak, agent=agent, fetched=future.result())
            gap_close(soak, agent.node)
        except TransportError as error:
            gap_open(soak, agent.node, f"{agent.node.name} unreachable: {error}")
            finished = False
    return finished


def gap_open(soak: Soak, node: Node | None, reason: str, at: datetime | None = None) -> None:
    """Open a collection gap of ``node`` (None: the whole soak) unless one is open."""
    if not CollectionGap.objects.filter(soak=soak, node=node, ended_at__isnull=True).exists():
        CollectionGap.objects.create(soak=soak, node=node, started_at=at or timezone.now(),
                                     reason=reason)


def gap_close(soak: Soak, node: Node | None) -> None:
    """Close ``node``'s open collection gap, if any."""
    CollectionGap.objects.filter(soak=soak, node=node, ended_at__isnull=True).update(
        ended_at=timezone.now())
