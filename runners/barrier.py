"""Plan steps that every node of a role starts at the same time (RUNBOOK §4.5: the shared
read-back of G3, whose aggregate is judged against the array port, is only that measurement
when every node reads back at once).

A step with ``"barrier": NAME`` (``runners.plans`` marks the shared read-back's first counter
sample, right before the measured pass) waits on each node until every node job of the run
that plans the same barrier has arrived (``BarrierArrival`` rows: the ledger, not Redis, so it
works on any broker), then all start together. Waiting nodes keep heartbeating and stop at a
cancel. The barrier breaks — the step fails on every waiting node with a one-line reason —
when a node it waits for ended before arriving, or when the last one has not arrived within
``BARRIER_WAIT_S``.

``barrier_capacity_check``: a gate run whose plan has such a step starts only when every node
of that step can run at once — the site's ``max_parallel_nodes`` and the workers' node-job
slots (``NODE_JOB_SLOTS``: workers × ``--concurrency``) — else nodes would come in waves and
the measurement would not be simultaneous. With no broker (eager tasks, one job after another
in-process: the tests and ``run_gate`` on a machine without workers) nothing can run at once,
so the barrier lets each node through and says so in the log.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.utils.translation import gettext as _

from acceptance.models import Node
from gates.models import Gate
from gates.services import GateRefused
from runners.live import cancel_requested, heartbeat
from runners.models import BarrierArrival, NodeJob
from runners.plans import node_steps

logger = logging.getLogger(__name__)

POLL_S = 0.2


class BarrierBroken(Exception):
    """The nodes cannot start the step together; the message says which node and why."""


def barriers_of(gate: Gate, node: Node) -> set[str]:
    return {step["barrier"] for step in node_steps(gate, node) if step.get("barrier")}


def _eager() -> bool:
    return bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False))


def barrier_capacity_check(*, gate: Gate, nodes: list[Node]) -> None:
    """Raise GateRefused when a barrier of ``gate``'s plan has more nodes than can run at
    once (the message names the figures to raise)."""
    if _eager():
        return
    members: dict[str, list[str]] = {}
    for node in nodes:
        for name in barriers_of(gate, node):
            members.setdefault(name, []).append(node.name)
    limit = gate.engagement.max_parallel_nodes
    slots = settings.NODE_JOB_SLOTS
    for name, names in sorted(members.items()):
        if len(names) > min(limit, slots):
            raise GateRefused(_(
                "%(gate)s starts its %(step)s step on %(n)s nodes at the same time, but only "
                "%(at_once)s node jobs can run at once (the site's max_parallel_nodes "
                "%(limit)s; the workers' node-job slots, ACCEPTANCE_NODE_JOB_SLOTS, %(slots)s): "
                "raise them to at least %(n)s before starting it.") % {
                    "gate": gate.code, "step": name, "n": len(names),
                    "at_once": min(limit, slots), "limit": limit, "slots": slots})


def barrier_wait(*, job: NodeJob, name: str, timeout_s: float | None = None) -> float:
    """Record ``job``'s arrival at barrier ``name`` and wait until every node job of the run
    that plans it has arrived; returns the seconds waited. Raises BarrierBroken, or returns at
    once with no broker (see the module's note)."""
    gate_run = job.gate_run
    BarrierArrival.objects.get_or_create(gate_run=gate_run, node=job.node, name=name)
    if _eager():
        logger.warning("barrier %s of gate run %s: no workers (eager tasks), so %s starts "
                       "alone, not at the same time as the other nodes", name, gate_run.id,
                       job.node.name)
        return 0.0
    gate = gate_run.gate
    expected = {j.node_id: j for j in NodeJob.objects.filter(
        gate_run=gate_run, carried_from__isnull=True).select_related("node")
        if name in barriers_of(gate, j.node)}
    limit = settings.BARRIER_WAIT_S if timeout_s is None else timeout_s
    started = time.monotonic()
    last_beat = started
    while True:
        arrived = set(BarrierArrival.objects.filter(gate_run=gate_run, name=name).values_list(
            "node_id", flat=True))
        missing = [j for node_id, j in expected.items() if node_id not in arrived]
        if not missing:
            return time.monotonic() - started
        ended = NodeJob.objects.filter(id__in=[j.id for j in missing],
                                       state__in=NodeJob.TERMINAL).select_related(
            "node").order_by("node__name").first()
        if ended is not None:
            raise BarrierBroken(
                f"{name}: {ended.node.name} ended {ended.state} before reaching the step that "
                f"every node starts at the same time, so it cannot start together")
        if cancel_requested(gate_run.id):
            raise BarrierBroken(f"{name}: the gate run was cancelled while waiting")
        waited = time.monotonic() - started
        if waited > limit:
            names = ", ".join(sorted(j.node.name for j in missing))
            raise BarrierBroken(
                f"{name}: {len(missing)} of {len(expected)} nodes had not reached the step "
                f"that every node starts at the same time after {limit:g} s ({names})")
        if time.monotonic() - last_beat > 5:
            heartbeat(job)
            last_beat = time.monotonic()
        time.sleep(POLL_S)
