"""Running a G4 soak (issue 7, RUNBOOK §5): start, the driver loop, pause / resume / abort by an
engineer, and recovery after a worker died.

1. ``soak_start`` checks the gate may run, validates the plan, resolves the nodes and checks
   every fault's target was marked with a confirmation (``runners.soak.faults``), then
   records the run, the soak (plan snapshot + sha256), one agent per inference node and one
   fault window per planned fault, and rings the driver task (on commit).
2. ``soak_drive`` (one loop per soak, bounded in iterations and time) starts the agents
   (``runners.soak.agent``) and then, every sampling interval: collects what they wrote
   (``runners.soak.collection``), moves the faults on (``runners.soak.faults``), updates the
   live check states (``runners.soak.evaluation``) and heartbeats. When the agents are done
   and every fault healed it moves the soak to evaluating and returns True: the door
   (``runners.soak.tasks``) then decides, issues the signed report and finishes the run.

A worker that dies leaves the agents running on the nodes; ``soak_recover`` (called when a
worker starts and by ``run_gate``) records the collection gap and hands the soak to a new
driver, which collects from the stored offsets. Abort, cancel and timeout always heal first.
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from acceptance import events
from gates.models import Gate
from gates.services import gate_check_runnable
from runners import doorbell
from runners.dispatch import passed_rerun_audit, passed_rerun_check
from runners.live import cancel_requested
from runners.models import GateRun
from runners.soak import commands
from runners.soak.agent import AgentStartFailed, soak_agents_start
from runners.soak.collection import agent_collect, gap_open, soak_collect_all
from runners.soak.evaluation import soak_checks_refresh
from runners.soak.events import event_record
from runners.soak.faults import (
    fault_end,
    fault_node,
    fault_target_of,
    soak_faults_heal_all,
    soak_faults_tick,
    soak_loaded_s,
)
from runners.soak.models import CollectionGap, FaultWindow, Soak, SoakAgent
from runners.soak.nodes import NodePool
from runners.soak.plan import SoakRefused, plan_sha256, plan_validate, real_s, soak_plan_of
from runners.soak.rate import plan_with_rate
from runners.transport import TransportError

logger = logging.getLogger(__name__)

TICK_MIN_S = 0.2

# --- start -------------------------------------------------------------------------------


@transaction.atomic
def soak_start(*, gate: Gate, started_by: str, reason: str = "",
               confirmed: bool = False) -> GateRun:
    """Create the soak run of ``gate`` and send its driver (on commit). A gate that has passed
    soaks again only with ``confirmed=True`` and a ``reason`` (audited), as any gate re-run.

    Raises ConfirmationRequired (a GateRefused) for a passed gate without confirmation and
    reason; GateRefused (SoakRefused) when the gate may not run, a fault target was not marked
    and confirmed, a drive fault lacks the vendor command or targets RAID0; SoakPlanError when
    the plan is malformed. Nothing is stored then.
    """
    Gate.objects.select_for_update().get(pk=gate.pk)
    gate.refresh_from_db()
    gate_check_runnable(gate=gate)
    reason = (reason or "").strip()
    passed_rerun_check(gate=gate, reason=reason, confirmed=confirmed)
    plan, rate_basis = plan_with_rate(gate, soak_plan_of(gate))
    plan = plan_validate(plan, lab=gate.engagement.is_lab)
    agents = list(gate.engagement.nodes.filter(role="inference").order_by("name"))
    if not agents:
        raise SoakRefused(f"{gate.code}: engagement {gate.engagement.name} has no inference "
                          f"node to carry the load")
    faults = []
    for fault in plan["faults"]:
        node = fault_node(gate, fault)
        faults.append((fault, node, fault_target_of(gate, fault, node)))
    attempt = (gate.runs.aggregate(m=Max("attempt"))["m"] or 0) + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=started_by,
                                      state=GateRun.State.RUNNING, reason=reason)
    if gate.state == Gate.State.PASSED:
        passed_rerun_audit(gate=gate, gate_run=gate_run, actor=started_by, reason=reason)
    token = secrets.token_hex(8)
    soak = Soak.objects.create(gate_run=gate_run, plan=plan, plan_sha256=plan_sha256(plan),
                               time_compression=float(plan["time_compression"]),
                               driver_token=token)
    base = f"{commands.SOAK_ROOT}/soak-{gate_run.id}-{secrets.token_hex(4)}"
    for node in agents:
        SoakAgent.objects.create(soak=soak, node=node, remote_dir=f"{base}/{node.name}",
                                 token=secrets.token_hex(6))
    for position, (fault, node, marked) in enumerate(faults, start=1):
        FaultWindow.objects.create(soak=soak, position=position, name=fault["name"],
                                   kind=fault["kind"], node=node, target=fault["target"],
                                   start_s=fault["start_s"], duration_s=fault["duration_s"],
                                   fault_target=marked)
    event_record(soak, "created", f"soak of {plan['duration_s']:g} s (plan) compressed ×"
                 f"{plan['time_compression']:g}; plan sha256 {soak.plan_sha256[:12]}…",
                 actor=started_by)
    if rate_basis is not None:
        event_record(soak, "created", f"request rate derived from G2: {rate_basis.text()}",
                     actor=started_by)
    transaction.on_commit(lambda: _dispatch(soak.id, token))
    return gate_run


def _dispatch(soak_id: int, token: str) -> None:
    doorbell.ring("soak.soak_drive", soak_id=soak_id, driver_token=token)


# --- the driver loop ---------------------------------------------------------------------


def _owned(soak: Soak, token: str) -> bool:
    """Heartbeat if ``token`` still owns the soak; False when another driver took over."""
    return Soak.objects.filter(id=soak.id, driver_token=token).update(
        heartbeat_at=timezone.now(), loaded_s=max(0.0, soak_loaded_s(soak))) == 1


def soak_drive(*, soak_id: int, driver_token: str) -> bool:
    """Drive the soak until its load is over, it is aborted or another driver takes over.

    True when the load is over and the soak waits for its decision (state evaluating): the
    caller then decides (``runners.soak.evaluation.soak_decide``). Bounded: at most
    (deadline − now) ÷ tick + 100 iterations, never past ``deadline_at`` (then it aborts,
    healing first). False, quietly, when ``driver_token`` is not the soak's (a duplicate
    delivery, or a newer driver took over).
    """
    soak = Soak.objects.select_related("gate_run__gate__engagement").get(id=soak_id)
    if soak.driver_token != driver_token or soak.state not in Soak.ACTIVE:
        logger.info("soak %s: driver %s is not the owner; nothing to do", soak_id, driver_token)
        return False
    nodes = NodePool()
    try:
        if soak.state == Soak.State.STARTING:
            try:
                soak_agents_start(soak=soak, nodes=nodes)
            except (AgentStartFailed, TransportError) as error:
                _abort(soak, nodes, f"the soak could not start: {error}", failed=True)
                return False
        return _loop(soak, nodes, driver_token)
    except Exception as error:  # recorded; the agents keep running and recovery can re-attach
        logger.exception("soak %s driver failed", soak_id)
        event_record(soak, "driver error", f"{type(error).__name__}: {error}")
        raise
    finally:
        nodes.close()


def _sleep_s(soak: Soak, tick: float) -> float:
    """Until the next tick, or sooner when a planned fault falls due before it (faults start
    on time, not up to a sampling interval late)."""
    if soak.state != Soak.State.RUNNING:
        return tick
    elapsed = soak_loaded_s(soak)
    due = [real_s(soak.plan, f.start_s) - elapsed
           for f in soak.faults.filter(state=FaultWindow.State.PLANNED).only("start_s")]
    soonest = min([d for d in due if d >= 0], default=tick)
    return max(0.05, min(tick, soonest))


def _loop(soak: Soak, nodes: NodePool, token: str) -> bool:
    tick = max(TICK_MIN_S, real_s(soak.plan, soak.plan["sampling_s"]))
    deadline = soak.deadline_at or (timezone.now()
                                    + timedelta(seconds=2 * soak.duration_s + 120))
    bound = int((deadline - timezone.now()).total_seconds() / tick) + 100
    stamp = None  # the live span figures, built from the stored windows on the first tick
    state = soak.state
    for _ in range(max(bound, 1)):
        soak.refresh_from_db()
        if soak.state not in Soak.ACTIVE or not _owned(soak, token):
            return False
        if soak.state != state:  # started, paused, resumed: built again (a few times a soak)
            stamp, state = None, soak.state
        if soak.abort_requested_at or cancel_requested(soak.gate_run_id):
            who = soak.abort_requested_by or soak.gate_run.cancel_requested_by or "?"
            _abort(soak, nodes, f"aborted by {who}: {soak.abort_reason or 'run cancelled'}",
                   actor=who)
            return False
        if timezone.now() > deadline:
            _abort(soak, nodes, f"timeout: the soak did not finish by {deadline:%H:%M:%S} UTC")
            return False
        # Faults first: a fault falls due on time, not after the nodes' reads of this tick.
        soak_faults_tick(soak=soak, nodes=nodes, start_new=soak.state != Soak.State.PAUSED)
        finished = soak_collect_all(soak=soak, nodes=nodes)
        stamp = soak_checks_refresh(soak=soak, stamp=stamp)
        pending = soak.faults.filter(state__in=[FaultWindow.State.ARMED,
                                                FaultWindow.State.INJECTED]).exists()
        if finished and not pending:
            break
        time.sleep(_sleep_s(soak, tick))
    else:
        _abort(soak, nodes, "the driver loop reached its bound")
        return False
    if not Soak.objects.filter(id=soak.id, driver_token=token, state__in=Soak.ACTIVE).update(
            state=Soak.State.EVALUATING, heartbeat_at=timezone.now()):
        return False
    soak.refresh_from_db()
    for fault in soak.faults.filter(state=FaultWindow.State.PLANNED):
        fault_end(soak, fault, FaultWindow.State.MISSED, "the load ended before it was due")
    return True


def _abort(soak: Soak, nodes: NodePool, reason: str, *, failed: bool = False,
           actor: str = "") -> None:
    """Heal every fault still on (service heal, timer disarmed), stop the agents, collect the
    last bytes, and end the soak and its gate run with ``reason`` (no decision)."""
    soak_faults_heal_all(soak=soak, nodes=nodes, reason=reason)
    for agent in soak.agents.select_related("node__credential"):
        if agent.state in (SoakAgent.State.RUNNING, SoakAgent.State.STARTING) and agent.pid:
            try:
                nodes.run(agent.node, commands.agent_stop_command(agent.remote_dir))
                agent_collect(soak=soak, agent=agent, nodes=nodes)
            except TransportError as error:
                gap_open(soak, agent.node, f"abort could not reach {agent.node.name}: {error}")
            agent.refresh_from_db()
            agent.state = SoakAgent.State.STOPPED
            agent.save(update_fields=["state"])
    now = timezone.now()
    state = Soak.State.FAILED if failed else Soak.State.ABORTED
    Soak.objects.filter(id=soak.id).update(state=state, finished_at=now, error=reason)
    event_record(soak, state, reason)
    events.announce(events.soak_interrupted, soak_id=soak.id)  # notifications
    GateRun.objects.filter(id=soak.gate_run_id, state__in=[
        GateRun.State.RUNNING, GateRun.State.EVALUATING]).update(
        state=GateRun.State.FAILED if failed else GateRun.State.CANCELLED, error=reason,
        finished_at=now)
    if actor:
        GateRun.objects.filter(id=soak.gate_run_id, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now, cancel_requested_by=actor)


# --- engineer's actions ------------------------------------------------------------------


def _flag_all(soak: Soak, present: bool) -> list[str]:
    nodes, said = NodePool(), []
    try:
        for agent in soak.agents.select_related("node__credential"):
            result = nodes.run(agent.node, commands.agent_flag_command(agent.remote_dir, "pause",
                                                                       present), timeout=30)
            said.append(f"{agent.node.name}: {'paused' if present else 'resumed'}"
                        if result.exit_code == 0 else f"{agent.node.name}: exit "
                        f"{result.exit_code}")
    finally:
        nodes.close()
    return said


def soak_pause(*, soak: Soak, actor: str, reason: str) -> Soak:
    """Pause the load on every node (no new window starts; a fault on stays healed by its
    timer) and freeze the fault schedule. ValueError when not running or no reason given;
    TransportError when a node cannot be told (then nothing changes)."""
    if not reason or not reason.strip():
        raise ValueError("pausing a soak needs a reason")
    soak.refresh_from_db()
    if soak.state != Soak.State.RUNNING:
        raise ValueError(f"the soak is {soak.state}, not running")
    said = _flag_all(soak, True)
    Soak.objects.filter(id=soak.id, state=Soak.State.RUNNING).update(
        state=Soak.State.PAUSED, paused_at=timezone.now())
    event_record(soak, "paused", f"{reason.strip()} ({'; '.join(said)})", actor=actor)
    soak.refresh_from_db()
    return soak


def soak_resume(*, soak: Soak, actor: str) -> Soak:
    """Resume a paused soak; the pause is excluded from the load time and the schedule.
    ValueError when not paused."""
    soak.refresh_from_db()
    if soak.state != Soak.State.PAUSED:
        raise ValueError(f"the soak is {soak.state}, not paused")
    said = _flag_all(soak, False)
    paused = (timezone.now() - soak.paused_at).total_seconds() if soak.paused_at else 0.0
    Soak.objects.filter(id=soak.id, state=Soak.State.PAUSED).update(
        state=Soak.State.RUNNING, paused_at=None, paused_s=soak.paused_s + paused)
    event_record(soak, "resumed", f"after {paused:.1f} s ({'; '.join(said)})", actor=actor)
    soak.refresh_from_db()
    return soak


def soak_abort(*, soak: Soak, actor: str, reason: str, wait_s: float = 30.0) -> Soak:
    """Abort: every fault on is healed, the agents stopped, the run cancelled (no decision).

    The driver does it within a tick; without a live driver (or after ``wait_s``) it is done
    here. ValueError when the soak is over or no reason is given."""
    if not reason or not reason.strip():
        raise ValueError("aborting a soak needs a reason")
    updated = Soak.objects.filter(id=soak.id, state__in=Soak.ACTIVE,
                                  abort_requested_at__isnull=True).update(
        abort_requested_at=timezone.now(), abort_requested_by=actor, abort_reason=reason.strip())
    soak.refresh_from_db()
    if not updated and soak.state not in Soak.ACTIVE:
        raise ValueError(f"the soak is already {soak.state}")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and soak.state in Soak.ACTIVE and _driver_alive(soak):
        time.sleep(0.2)
        soak.refresh_from_db()
    if soak.state in Soak.ACTIVE:
        token = secrets.token_hex(8)  # take the soak over from a driver that is not there
        Soak.objects.filter(id=soak.id).update(driver_token=token)
        nodes = NodePool()
        try:
            _abort(soak, nodes, f"aborted by {actor}: {reason.strip()}", actor=actor)
        finally:
            nodes.close()
        soak.refresh_from_db()
    return soak


def _driver_alive(soak: Soak) -> bool:
    lost = timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS)
    return soak.heartbeat_at is not None and soak.heartbeat_at > timezone.now() - lost


def soak_recover(*, after: timedelta | None = None) -> list[str]:
    """Re-attach soaks whose driver stopped heartbeating (worker killed or restarted): record
    the collection gap (from the last heartbeat to now) and send a new driver, which collects
    from the stored byte offsets. Safe to call anywhere, any number of times."""
    cutoff = timezone.now() - (after if after is not None else
                       timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS))
    lines = []
    for soak in Soak.objects.filter(state=Soak.State.EVALUATING, heartbeat_at__lt=cutoff):
        if GateRun.objects.filter(id=soak.gate_run_id, decision__isnull=False).exists():
            reason = ("the worker stopped after recording the decision, before the signed "
                      "report: re-run the report")
            Soak.objects.filter(id=soak.id).update(state=Soak.State.DONE, error=reason)
            if GateRun.objects.filter(id=soak.gate_run_id, state=GateRun.State.RUNNING).update(
                    state=GateRun.State.FAILED, error=reason, finished_at=timezone.now()):
                events.announce(events.run_failed, gate_run_id=soak.gate_run_id)  # notifications
        else:  # evaluation is one transaction: nothing half-stored; evaluate again
            Soak.objects.filter(id=soak.id, state=Soak.State.EVALUATING).update(
                state=Soak.State.COLLECTING)
    for soak in Soak.objects.filter(state__in=Soak.ACTIVE, heartbeat_at__lt=cutoff):
        token = secrets.token_hex(8)
        now = timezone.now()
        if not Soak.objects.filter(id=soak.id, driver_token=soak.driver_token,
                                   heartbeat_at=soak.heartbeat_at).update(
                driver_token=token, heartbeat_at=now):
            continue
        reason = (f"the worker driving the soak stopped (no heartbeat since "
                  f"{soak.heartbeat_at:%H:%M:%S} UTC); re-attached at {now:%H:%M:%S} UTC — the "
                  f"agents kept running, their records are collected from the stored offsets")
        CollectionGap.objects.create(soak=soak, node=None, started_at=soak.heartbeat_at,
                                     ended_at=now, reason=reason)
        event_record(soak, "re-attached", reason)
        transaction.on_commit(lambda s=soak.id, t=token: _dispatch(s, t))
        lines.append(f"{soak}: {reason}")
    return lines

