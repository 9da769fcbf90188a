"""The soak's faults: which targets may be hit, and each fault window's state machine
(RUNBOOK §5.3, DOMAIN.md G4).

``fault_target_mark`` records an engineer's confirmation that a target may be faulted; a soak
starts only with every planned fault on a marked target (``fault_target_of``). During the load,
``soak_faults_tick`` moves each window on: planned → (safety checks, heal armed on the node and
verified armed) armed → (inject) injected → (the node's timer heals it, or the service does
when the timer is late) healed; refused, failed and missed say why. A window left armed by a
lost worker is settled by the target's state. The command strings come from
``runners.soak.commands``; the driver (``runners.soak.driver``) calls the tick.
"""

from __future__ import annotations

import re
import secrets
import shlex

from django.db import transaction
from django.utils import timezone

from acceptance import events
from acceptance.models import AuditEntry, Node
from gates.models import Gate
from runners.soak import commands
from runners.soak.collection import gap_open
from runners.soak.events import event_record
from runners.soak.models import FaultTarget, FaultWindow, Soak
from runners.soak.nodes import NodePool, node_time
from runners.soak.plan import (
    SoakPlanError,
    SoakRefused,
    argv_sha256,
    plan_sha256,
    real_s,
    soak_plan_of,
    vendor_argv,
)
from runners.transport import TransportError

# --- targets -----------------------------------------------------------------------------


def fault_argv(fault: dict, node: Node) -> dict[str, list[str]]:
    """The exact commands a (resolved) plan fault runs on ``node``: inject, heal, status."""
    kind, ctx = commands.fault_kind(fault["kind"]), fault_context(node)
    try:
        state = kind.state_command(fault, ctx)
        return {"inject": kind.inject_argv(fault, ctx), "heal": kind.heal_argv(fault, ctx),
                "status": shlex.split(state) if state else []}
    except commands.FaultKindError as error:
        raise SoakRefused(str(error)) from None


def fault_confirmation_of(node: Node, kind: str, target: str) -> dict:
    """What a confirmation of ``kind`` of ``target`` on ``node`` binds: the exact argv, its
    sha256 and the sha256 of the soak plan now (a plan edit voids it). ValueError when the
    engagement has no valid soak plan or, for a drive, no fault of the plan takes that drive
    out on that node (the command comes from the plan's allowed vendor command)."""
    gate = next((g for g in node.engagement.gates.all() if g.is_soak), None)
    if gate is None:
        raise ValueError(f"engagement {node.engagement.name} has no soak gate")
    try:
        plan = soak_plan_of(gate)
        if kind == "drive_out":
            found = [fault_argv(fault_resolved(f, lab=node.engagement.is_lab), node)
                     for f in plan["faults"] if f["kind"] == "drive_out"
                     and str(f["target"]["drive"]) == target and fault_node(gate, f) == node]
            if not found:
                raise ValueError(f"no drive fault of the soak plan takes drive {target} out on "
                                 f"{node.name}: a confirmation binds the plan's command")
            if len({argv_sha256(a) for a in found}) > 1:
                raise ValueError(f"faults of the plan take drive {target} out on {node.name} "
                                 f"with different commands; one command per target")
            argv = found[0]
        else:
            netns, _, interface = target.rpartition("/")
            argv = fault_argv({"name": "confirm", "kind": kind, "target": {
                "interface": interface, "netns": netns or None}}, node)
    except (SoakRefused, SoakPlanError) as error:
        raise ValueError(str(error)) from None
    return {"argv": argv, "argv_sha256": argv_sha256(argv), "plan_sha256": plan_sha256(plan),
            "words": f"allow {kind} of {target} on {node.name} sha256 "
                     f"{argv_sha256(argv)[:12]}"}


@transaction.atomic
def fault_target_mark(*, node: Node, kind: str, target: str, actor: str,
                      confirmation: str) -> FaultTarget:
    """Mark ``target`` on ``node`` as allowed for fault injection of ``kind``, recording who
    confirmed, when, with which words, the exact argv it runs, its sha256 and the plan's sha256
    (also in the audit trail). A later plan edit voids it (``fault_target_of``).

    ``target``: the interface (``IF`` or ``NETNS/IF``) for link_down, the drive index for
    drive_out. ValueError, nothing stored, when the kind is unknown, the node has the wrong
    role, the target is malformed, or the confirmation does not name the node and target (and,
    for a drive, the first 12 hex digits of the commands' sha256: a person saw the command).
    """
    kind_cls = commands.FAULT_KINDS.get(kind)
    if kind_cls is None:
        raise ValueError(f"unknown fault kind {kind!r}; known: {sorted(commands.FAULT_KINDS)}")
    if node.role != kind_cls.role:
        raise ValueError(f"{kind} runs on a node of role {kind_cls.role}; {node.name} is "
                         f"{node.role}")
    if kind == "drive_out" and not (target.isdigit() and int(target) <= 1023):
        raise ValueError(f"drive_out target must be a drive index 0 … 1023, not {target!r}")
    if kind == "link_down":
        parts = target.split("/")
        if len(parts) > 2 or not all(re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", p)
                                     for p in parts):
            raise ValueError(f"link_down target must be IF or NETNS/IF, not {target!r}")
    if not confirmation or node.name not in confirmation or target not in confirmation:
        raise ValueError(f"the confirmation must name the node ({node.name}) and the target "
                         f"({target}) it allows")
    bound = fault_confirmation_of(node, kind, target)
    if kind == "drive_out" and bound["argv_sha256"][:12] not in confirmation:
        shown = "; ".join(f"{k} `{shlex.join(v)}`" for k, v in bound["argv"].items() if v)
        raise ValueError(f"the confirmation must name the commands' sha256 too — {shown}; "
                         f"sha256 {bound['argv_sha256']}: type '{bound['words']}'")
    row, _ = FaultTarget.objects.update_or_create(
        node=node, kind=kind, target=target,
        defaults={"engagement": node.engagement, "confirmed_by": actor,
                  "confirmed_at": timezone.now(), "confirmation": confirmation.strip(),
                  "argv": bound["argv"], "argv_sha256": bound["argv_sha256"],
                  "plan_sha256": bound["plan_sha256"]})
    AuditEntry.objects.create(engagement=node.engagement, actor=actor,
                              action="fault target confirmed", reason=confirmation.strip(),
                              details={"node": node.name, "kind": kind, "target": target,
                                       "argv": bound["argv"],
                                       "argv_sha256": bound["argv_sha256"],
                                       "plan_sha256": bound["plan_sha256"]})
    return row


def confirmation_void(marked: FaultTarget, argv: dict, plan_sha: str) -> str:
    """Why ``marked`` no longer covers ``argv`` under the plan ``plan_sha`` ('' when it does)."""
    if marked.plan_sha256 != plan_sha:
        return (f"the confirmation of {marked.kind} of {marked.target} on {marked.node.name} is "
                f"void: the plan changed after it (confirmed for plan "
                f"{marked.plan_sha256[:12] or 'none'}…, now {plan_sha[:12]}…); re-confirm")
    if marked.argv_sha256 != argv_sha256(argv):
        return (f"the confirmation of {marked.kind} of {marked.target} on {marked.node.name} is "
                f"void: the commands are not the ones confirmed (sha256 "
                f"{marked.argv_sha256[:12] or 'none'}…, now {argv_sha256(argv)[:12]}…); "
                f"re-confirm")
    return ""


def fault_node(gate: Gate, fault: dict) -> Node:
    """The node a planned fault runs on: the one so named, else the first of that role."""
    nodes = gate.engagement.nodes.all()
    named = nodes.filter(name=fault["node"]).first()
    if named is not None:
        return named
    first = nodes.filter(role=fault["node"]).order_by("name").first()
    if first is None:
        raise SoakRefused(f"fault {fault['name']}: no node named or of role {fault['node']!r}")
    return first


def fault_context(node: Node) -> commands.FaultContext:
    """What the fault commands need to know of ``node`` (interface, sudo, its array)."""
    array = node.array
    return commands.FaultContext(interface=node.interface or "", use_sudo=node.use_sudo,
                                 array_layout=array.layout if array else "",
                                 expected_drives=array.expected_drive_count if array else 0)


def fault_resolved(fault: dict, *, lab: bool) -> dict:
    """The plan entry with the argv it runs: a drive fault's allowed vendor command (the
    settings' allow-list, checked again now) as ``inject`` / ``heal`` / ``status``.
    SoakRefused naming the field when the command is not (or no longer) allowed."""
    if fault.get("kind") != "drive_out":
        return fault
    try:
        return {**fault, **vendor_argv(fault, lab=lab, where=f"fault {fault.get('name')}")}
    except SoakPlanError as error:
        raise SoakRefused(str(error)) from None


def fault_target_of(gate: Gate, fault: dict, node: Node) -> FaultTarget:
    """The confirmed target of a planned fault on ``node``; SoakRefused when the fault cannot
    run there, its target was not marked, or a drive fault would hit a RAID0 array."""
    kind = commands.fault_kind(fault["kind"])
    fault = fault_resolved(fault, lab=gate.engagement.is_lab)
    if node.role != kind.role:
        raise SoakRefused(f"fault {fault['name']} ({fault['kind']}) must run on a node of role "
                          f"{kind.role}; {node.name} is {node.role}")
    try:
        text = kind.target_text(fault, fault_context(node))
        kind.inject_argv(fault, fault_context(node))
        kind.heal_argv(fault, fault_context(node))
    except commands.FaultKindError as error:
        raise SoakRefused(str(error)) from None
    marked = FaultTarget.objects.filter(node=node, kind=fault["kind"], target=text).first()
    if marked is None:
        raise SoakRefused(
            f"fault {fault['name']}: {fault['kind']} of {text} on {node.name} is not marked for "
            f"fault injection; an engineer confirms it first: manage.py soak mark-target "
            f"{gate.engagement.name} {node.name} {fault['kind']} {text} --confirm "
            f"'allow {fault['kind']} of {text} on {node.name}'")
    void = confirmation_void(marked, fault_argv(fault, node), plan_sha256(soak_plan_of(gate)))
    if void:
        raise SoakRefused(f"fault {fault['name']}: {void}")
    if fault["kind"] == "drive_out" and node.array and node.array.layout == "raid0":
        raise SoakRefused(f"fault {fault['name']}: the array {node.array.serial} is RAID0 — one "
                          f"drive out loses the volume (DOMAIN.md G4); refusing")
    return marked


# --- the state machine -------------------------------------------------------------------


def soak_loaded_s(soak: Soak) -> float:
    """Real seconds of load since the agents started, pauses excluded."""
    if soak.load_started_at is None:
        return 0.0
    now = timezone.now()
    paused = soak.paused_s
    if soak.state == Soak.State.PAUSED and soak.paused_at:
        paused += (now - soak.paused_at).total_seconds()
    return (now - soak.load_started_at).total_seconds() - paused


def _plan_fault(soak: Soak, fault: FaultWindow) -> dict:
    """The plan entry of ``fault`` with its commands; once armed, the heal is the one armed
    (so a heal never depends on the allow-list staying as it was)."""
    plan_fault = next(f for f in soak.plan["faults"] if f["name"] == fault.name)
    if fault.kind != "drive_out":
        return plan_fault
    try:
        return fault_resolved(plan_fault, lab=soak.gate_run.gate.engagement.is_lab)
    except SoakRefused:
        if not fault.heal_command:
            raise
        return {**plan_fault, "heal": shlex.split(fault.heal_command), "status": None,
                "inject": shlex.split(fault.inject_command or fault.heal_command)}


def fault_inject(soak: Soak, fault: FaultWindow, nodes: NodePool, length_s: float) -> None:
    """Safety checks, heal armed and verified on the node, then the fault (RUNBOOK §5.3).
    Refused, nothing run on the node, when its command is not (or no longer) allowed."""
    try:
        plan_fault = _plan_fault(soak, fault)
    except SoakRefused as error:
        return fault_end(soak, fault, FaultWindow.State.REFUSED, str(error))
    kind = commands.fault_kind(fault.kind)
    node = fault.node
    ctx = fault_context(node)
    if fault.fault_target is None or not FaultTarget.objects.filter(
            pk=fault.fault_target_id).exists():
        return fault_end(soak, fault, FaultWindow.State.REFUSED,
                         "its target is no longer marked for fault injection")
    try:
        void = confirmation_void(FaultTarget.objects.get(pk=fault.fault_target_id),
                                 fault_argv(plan_fault, node), soak.plan_sha256)
    except SoakRefused as error:
        void = str(error)
    if void:  # checked before anything runs on the node
        return fault_end(soak, fault, FaultWindow.State.REFUSED, void)
    results = []
    for check in kind.safety(plan_fault, ctx):
        code, said = (None, "") if not check.command else nodes.run_checked(node, check.command)
        ok, found = check.judge(code, said)
        results.append({"check": check.name, "command": check.command, "said": found, "ok": ok})
    fault.safety = results
    fault.save(update_fields=["safety"])
    failed = [r for r in results if not r["ok"]]
    if failed:
        return fault_end(soak, fault, FaultWindow.State.REFUSED,
                         "; ".join(f"{r['check']}: {r['said']}" for r in failed))
    fault.heal_token = f"h{fault.id}-{secrets.token_hex(4)}"
    heal = kind.heal_argv(plan_fault, ctx)
    fault.heal_command = shlex.join(heal)
    fault.inject_command = shlex.join(kind.inject_argv(plan_fault, ctx))
    code, said = nodes.run_checked(node, commands.arm_command(
        token=fault.heal_token, delay_s=length_s, heal_argv=heal, sudo=node.use_sudo))
    if code != 0:
        return fault_end(soak, fault, FaultWindow.State.FAILED,
                         f"could not arm the heal on the node: {said.strip()[:300]}")
    fault.heal_method = said.strip().splitlines()[-1][:32] if said.strip() else "?"
    fault.heal_armed_at = timezone.now()
    code, said = nodes.run_checked(node, commands.armed_command(fault.heal_token,
                                                            sudo=node.use_sudo))
    if commands.armed_read(said.encode())[0] != "armed":
        nodes.run_checked(node, commands.disarm_command(fault.heal_token, sudo=node.use_sudo))
        return fault_end(soak, fault, FaultWindow.State.FAILED,
                         f"the heal is not armed on the node ({said.strip()[:200]}): no fault")
    fault.heal_verified_at = timezone.now()
    fault.state = FaultWindow.State.ARMED
    fault.save()
    event_record(soak, "heal armed", f"{fault.name}: heal `{fault.heal_command}` armed on "
                 f"{node.name} by {fault.heal_method} in {length_s:.3g} s, verified", fault=fault)
    code, said = nodes.run_checked(node, commands.timed_command(
        kind.inject_argv(plan_fault, ctx), sudo=node.use_sudo))
    if code != 0:
        fault_heal_now(soak, fault, nodes, "the inject command failed")
        return fault_end(soak, fault, FaultWindow.State.FAILED,
                         f"inject failed: {said.strip()[:300]}")
    fault.injected_at = node_time(_last_float(said)) or timezone.now()
    fault.state = FaultWindow.State.INJECTED
    fault.save(update_fields=["injected_at", "state"])
    if fault.kind == "drive_out":
        healthy, found = _verify_healed(soak, fault, nodes)
        if healthy:  # exit 0 is no proof: the status must show the drive out
            fault_heal_now(soak, fault, nodes, "the inject did not take the drive out")
            return fault_end(soak, fault, FaultWindow.State.FAILED,
                             f"inject exited 0 but the status does not show drive "
                             f"{fault.target.get('drive')} out: {found}")
    event_record(soak, "fault injected", f"{fault.name}: `{fault.inject_command}` on "
                 f"{node.name}", fault=fault)


def _last_float(text: str) -> float | None:
    for line in reversed(text.strip().splitlines()):
        try:
            return float(line.strip())
        except ValueError:
            continue
    return None


def fault_end(soak: Soak, fault: FaultWindow, state: str, error: str) -> None:
    """End ``fault`` in ``state`` (refused, failed, missed) with the reason."""
    fault.state, fault.error = state, error
    fault.save()
    event_record(soak, f"fault {state}", f"{fault.name}: {error}", fault=fault)
    if state == FaultWindow.State.FAILED:
        events.announce(events.soak_fault_window_failed, fault_window_id=fault.id)  # notifications


def _verify_healed(soak: Soak, fault: FaultWindow, nodes: NodePool) -> tuple[bool, str]:
    plan_fault = _plan_fault(soak, fault)
    kind = commands.fault_kind(fault.kind)
    command = kind.state_command(plan_fault, fault_context(fault.node))
    if not command:
        return True, "no state command in the plan: the heal's exit status is the evidence"
    code, said = nodes.run_checked(fault.node, command)
    judge = (kind.state_healed if fault.kind == "link_down"
             else commands.DriveOut.state_healed_for(int(fault.target["drive"])))
    return judge(code, said), said.strip()[:200]


def fault_heal_now(soak: Soak, fault: FaultWindow, nodes: NodePool, why: str,
                   how: str = "service") -> None:
    """Heal from the service, then disarm the node's timer (heal first: never both off)."""
    plan_fault = _plan_fault(soak, fault)
    kind = commands.fault_kind(fault.kind)
    node = fault.node
    code, said = nodes.run_checked(node, commands.timed_command(
        kind.heal_argv(plan_fault, fault_context(node)), sudo=node.use_sudo))
    if fault.heal_token:
        nodes.run_checked(node, commands.disarm_command(fault.heal_token, sudo=node.use_sudo))
    if code != 0:
        fault.error = f"heal by the service failed ({said.strip()[:200]}); the armed timer was " \
                      f"disarmed only after"
    if fault.state == FaultWindow.State.INJECTED:
        fault.healed_at = node_time(_last_float(said)) or timezone.now()
        fault.heal_how, fault.state = how, FaultWindow.State.HEALED
    fault.save()
    event_record(soak, "fault healed", f"{fault.name}: healed by the {how} ({why})", fault=fault)


def _fault_watch(soak: Soak, fault: FaultWindow, nodes: NodePool, length_s: float) -> None:
    code, said = nodes.run_checked(fault.node, commands.armed_command(
        fault.heal_token, sudo=fault.node.use_sudo))
    state, fired_at, heal_code = commands.armed_read(said.encode())
    if state == "fired":
        healed, found = _verify_healed(soak, fault, nodes)
        fault.healed_at, fault.heal_how = node_time(fired_at) or timezone.now(), "timer"
        fault.state = FaultWindow.State.HEALED
        if not healed or heal_code:
            fault.error = (f"the armed heal ran (exit {heal_code}) but the target is not "
                           f"restored: {found}")
            fault.save()
            return fault_heal_now(soak, fault, nodes, "the timer's heal did not restore it")
        fault.save()
        event_record(soak, "fault healed", f"{fault.name}: healed on the node by its armed "
                     f"timer ({found})", fault=fault)
        return
    grace = max(2.0, 0.2 * length_s)
    if fault.injected_at and (
            timezone.now() - fault.injected_at).total_seconds() > length_s + grace:
        fault_heal_now(soak, fault, nodes, f"the armed heal had not fired {grace:.3g} s "
                       f"after the window's end ({state})")


def _fault_settle_armed(soak: Soak, fault: FaultWindow, nodes: NodePool) -> None:
    """A fault left armed but not known injected (the node went away between the two, or the
    worker died): the target's state says whether the inject happened."""
    healthy, found = _verify_healed(soak, fault, nodes)
    if healthy:
        nodes.run_checked(fault.node, commands.disarm_command(fault.heal_token,
                                                              sudo=fault.node.use_sudo))
        return fault_end(soak, fault, FaultWindow.State.FAILED,
                         f"armed but not injected (the target is healthy: {found})")
    fault.injected_at = fault.heal_verified_at or timezone.now()
    fault.state = FaultWindow.State.INJECTED
    fault.error = "injected while the service lost track; start taken as the heal's arming"
    fault.save(update_fields=["injected_at", "state", "error"])
    event_record(soak, "fault injected", f"{fault.name}: found injected ({found})", fault=fault)


def soak_faults_tick(*, soak: Soak, nodes: NodePool, start_new: bool = True) -> None:
    """Inject the faults that are due (unless ``start_new`` is False: paused) and watch those
    on until healed."""
    elapsed = soak_loaded_s(soak)
    for fault in soak.faults.select_related("node__credential", "node__array").filter(
            state__in=[FaultWindow.State.PLANNED, FaultWindow.State.ARMED,
                       FaultWindow.State.INJECTED]):
        start, length = real_s(soak.plan, fault.start_s), real_s(soak.plan, fault.duration_s)
        try:
            if fault.state == FaultWindow.State.PLANNED and start_new and elapsed >= start:
                if elapsed > start + length / 2:
                    fault_end(soak, fault, FaultWindow.State.MISSED,
                              f"the service was not attached when it was due ({elapsed:.3g} s "
                              f"of load, due at {start:.3g} s)")
                else:
                    fault_inject(soak, fault, nodes, length - (elapsed - start))
            elif fault.state == FaultWindow.State.ARMED:
                _fault_settle_armed(soak, fault, nodes)
            elif fault.state == FaultWindow.State.INJECTED:
                _fault_watch(soak, fault, nodes, length)
        except TransportError as error:
            # The heal is armed on the node: it fires without us. Note and try again.
            gap_open(soak, fault.node, f"{fault.node.name} unreachable during fault "
                     f"{fault.name}: {error}")


def soak_faults_heal_all(*, soak: Soak, nodes: NodePool, reason: str) -> None:
    """Heal every fault still on (service heal, timer disarmed) before the soak ends early; a
    fault only armed ends failed. An unreachable node is left to the heal armed on it."""
    for fault in soak.faults.select_related("node__credential", "node__array").filter(
            state__in=[FaultWindow.State.ARMED, FaultWindow.State.INJECTED]):
        try:
            fault_heal_now(soak, fault, nodes, reason, how="abort")
        except TransportError as error:
            fault.error = (f"abort could not reach {fault.node.name} ({error}); the heal armed "
                           f"on the node restores it")
            fault.save(update_fields=["error"])
        if fault.state == FaultWindow.State.ARMED:
            fault_end(soak, fault, FaultWindow.State.FAILED, f"not injected: {reason}")
