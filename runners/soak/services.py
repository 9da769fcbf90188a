"""The G4 soak: start, drive (collect, inject, heal, check), pause/resume/abort, recover,
evaluate. Keyword-only ``<noun>_<verb>`` functions; the Celery task and the management command
are thin doors onto them.

How a soak runs (issue 7, RUNBOOK §5):

1. ``soak_start`` checks the gate may run, validates the plan, resolves the nodes and checks
   every fault's target was marked for fault injection with a confirmation
   (``fault_target_mark``), then records the run, the soak (plan snapshot + sha256), one
   agent per inference node and one fault window per planned fault, and sends the driver task.
2. ``soak_drive`` (the task; one loop per soak, bounded in iterations and time) records the
   tool version, the known-good correctness answers (before the soak), starts each node's
   agent detached (``runners.soak.node_agent``) and then, every sampling interval: collects
   what the agents wrote since the stored byte offset (one ``ProbeRun`` per collected range:
   command, tool version, raw bytes and their sha256; measurements with ``sampled_at``),
   injects the faults that are due (safety checks → heal armed on the node → armed verified
   → inject) and watches their heal, updates the live check states, and heartbeats.
3. When the agents are done and every fault healed: ``soak_evaluate`` derives the span figures
   (``runners.soak.steady``), judges G4's criteria with ``gates.evaluation`` and records the
   decision (``gates.services.decision_record``) and the signed report. A stop names the fault
   window and the check that failed.

A worker that dies leaves the agents running on the nodes; ``soak_recover`` (called when a
worker starts and by ``run_gate``) records the collection gap and hands the soak to a new
driver, which collects from the stored offsets. Abort, cancel and timeout always heal first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import shlex
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from acceptance.models import AuditEntry, Node
from gates import evaluation
from gates.models import Gate
from gates.services import (
    GateRefused,
    criterion_spec,
    decision_record,
    gate_check_runnable,
)
from runners.dispatch import passed_rerun_audit, passed_rerun_check
from runners.execution import RESULT_ROOT
from runners.live import cancel_requested
from runners.models import GateRun, Measurement, ProbeRun
from runners.parsers import parse_output
from runners.parsers.base import ParseError
from runners.probes import SIMULATED_MARKER
from runners.soak import commands, steady
from runners.soak.models import (
    CollectionGap,
    FaultTarget,
    FaultWindow,
    Soak,
    SoakAgent,
    SoakEvent,
)
from runners.soak.plan import SoakPlanError, plan_sha256, plan_validate, real_s, windows_planned
from runners.transport import SSHConnection, TransportError

logger = logging.getLogger(__name__)

PARSER_VERSION = "1"  # of the soak's own readings (correctness answers, agent window keys)
SERVICE_ACTOR = "acceptance service (soak)"
TICK_MIN_S = 0.2
COMMAND_TIMEOUT_S = 60


class SoakRefused(GateRefused):
    """The soak may not start (or the action may not be taken); the message says why."""


def _now() -> datetime:
    return timezone.now()


def _at(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _event(soak: Soak, kind: str, text: str, *, actor: str = SERVICE_ACTOR,
           fault: FaultWindow | None = None) -> None:
    SoakEvent.objects.create(soak=soak, at=_now(), kind=kind, actor=actor, text=text,
                             fault=fault)


def soak_plan_of(gate: Gate) -> dict:
    """The soak plan in ``gate``'s probe plan (the step ``{"expand": "soak", ...}``).

    Raises SoakRefused when the gate has none and SoakPlanError when it is malformed."""
    for step in gate.probe_plan:
        if step.get("expand") == "soak":
            return plan_validate(step.get("soak"))
    raise SoakRefused(f"{gate.code}: its plan has no soak step")


# --- guard rails -------------------------------------------------------------------------


@transaction.atomic
def fault_target_mark(*, node: Node, kind: str, target: str, actor: str,
                      confirmation: str) -> FaultTarget:
    """Mark ``target`` on ``node`` as allowed for fault injection of ``kind``, recording who
    confirmed, when and with which words (also in the audit trail).

    ``target``: the interface (``IF`` or ``NETNS/IF``) for link_down, the drive index for
    drive_out. ValueError, nothing stored, when the kind is unknown, the node has the wrong
    role, the target is malformed, or the confirmation does not name the node and target
    (``confirmation`` must contain both, so a person typed what they allow).
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
    row, _ = FaultTarget.objects.update_or_create(
        node=node, kind=kind, target=target,
        defaults={"engagement": node.engagement, "confirmed_by": actor,
                  "confirmed_at": _now(), "confirmation": confirmation.strip()})
    AuditEntry.objects.create(engagement=node.engagement, actor=actor,
                              action="fault target confirmed", reason=confirmation.strip(),
                              details={"node": node.name, "kind": kind, "target": target})
    return row


def _fault_node(gate: Gate, fault: dict) -> Node:
    nodes = gate.engagement.nodes.all()
    named = nodes.filter(name=fault["node"]).first()
    if named is not None:
        return named
    first = nodes.filter(role=fault["node"]).order_by("name").first()
    if first is None:
        raise SoakRefused(f"fault {fault['name']}: no node named or of role {fault['node']!r}")
    return first


def _fault_context(node: Node) -> commands.FaultContext:
    array = node.array
    return commands.FaultContext(interface=node.interface or "", use_sudo=node.use_sudo,
                                 array_layout=array.layout if array else "",
                                 expected_drives=array.expected_drive_count if array else 0)


def _fault_target_of(gate: Gate, fault: dict, node: Node) -> FaultTarget:
    kind = commands.fault_kind(fault["kind"])
    if node.role != kind.role:
        raise SoakRefused(f"fault {fault['name']} ({fault['kind']}) must run on a node of role "
                          f"{kind.role}; {node.name} is {node.role}")
    try:
        text = kind.target_text(fault, _fault_context(node))
        kind.inject_argv(fault, _fault_context(node))
        kind.heal_argv(fault, _fault_context(node))
    except commands.FaultKindError as error:
        raise SoakRefused(str(error)) from None
    marked = FaultTarget.objects.filter(node=node, kind=fault["kind"], target=text).first()
    if marked is None:
        raise SoakRefused(
            f"fault {fault['name']}: {fault['kind']} of {text} on {node.name} is not marked for "
            f"fault injection; an engineer confirms it first: manage.py soak mark-target "
            f"{gate.engagement.name} {node.name} {fault['kind']} {text} --confirm "
            f"'allow {fault['kind']} of {text} on {node.name}'")
    if fault["kind"] == "drive_out" and node.array and node.array.layout == "raid0":
        raise SoakRefused(f"fault {fault['name']}: the array {node.array.serial} is RAID0 — one "
                          f"drive out loses the volume (DOMAIN.md G4); refusing")
    return marked


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
    plan = soak_plan_of(gate)
    agents = list(gate.engagement.nodes.filter(role="inference").order_by("name"))
    if not agents:
        raise SoakRefused(f"{gate.code}: engagement {gate.engagement.name} has no inference "
                          f"node to carry the load")
    faults = []
    for fault in plan["faults"]:
        node = _fault_node(gate, fault)
        faults.append((fault, node, _fault_target_of(gate, fault, node)))
    attempt = (gate.runs.aggregate(m=Max("attempt"))["m"] or 0) + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=started_by,
                                      state=GateRun.State.RUNNING, reason=reason)
    if gate.state == Gate.State.PASSED:
        passed_rerun_audit(gate=gate, gate_run=gate_run, actor=started_by, reason=reason)
    token = secrets.token_hex(8)
    soak = Soak.objects.create(gate_run=gate_run, plan=plan, plan_sha256=plan_sha256(plan),
                               time_compression=float(plan["time_compression"]),
                               driver_token=token)
    base = f"{RESULT_ROOT}/soak-{gate_run.id}-{secrets.token_hex(4)}"
    for node in agents:
        SoakAgent.objects.create(soak=soak, node=node, remote_dir=f"{base}/{node.name}",
                                 token=secrets.token_hex(6))
    for position, (fault, node, marked) in enumerate(faults, start=1):
        FaultWindow.objects.create(soak=soak, position=position, name=fault["name"],
                                   kind=fault["kind"], node=node, target=fault["target"],
                                   start_s=fault["start_s"], duration_s=fault["duration_s"],
                                   fault_target=marked)
    _event(soak, "created", f"soak of {plan['duration_s']:g} s (plan) compressed ×"
           f"{plan['time_compression']:g}; plan sha256 {soak.plan_sha256[:12]}…",
           actor=started_by)
    transaction.on_commit(lambda: _dispatch(soak.id, token))
    return gate_run


def _dispatch(soak_id: int, token: str) -> None:
    from runners.soak.tasks import soak_drive

    soak_drive.delay(soak_id=soak_id, driver_token=token)


# --- talking to nodes --------------------------------------------------------------------


class _Nodes:
    """One SSH connection per node, kept across ticks; reopened after a failure."""

    def __init__(self) -> None:
        self.connections: dict[int, SSHConnection] = {}

    def run(self, node: Node, command: str, timeout: float = COMMAND_TIMEOUT_S):
        connection = self.connections.get(node.id)
        if connection is None:
            connection = SSHConnection(node.ssh_target()).__enter__()
            self.connections[node.id] = connection
        try:
            return connection.run(command, timeout=timeout)
        except TransportError:
            self.drop(node)
            raise

    def drop(self, node: Node) -> None:
        connection = self.connections.pop(node.id, None)
        if connection is not None:
            connection.__exit__(None, None, None)

    def close(self) -> None:
        for connection in self.connections.values():
            connection.__exit__(None, None, None)
        self.connections.clear()


def _agent_args(soak: Soak, agent: SoakAgent, node_now: float) -> list[str]:
    plan = soak.plan
    load, correctness = plan["load"], plan["correctness"]
    duration = soak.duration_s
    return [
        "--dir", agent.remote_dir, "--vllm", load["vllm"], "--base-url", load["base_url"],
        "--model", load["model"], "--tokenizer", load["tokenizer"],
        "--rate", str(load["request_rate"]), "--concurrency", str(load["concurrency"]),
        "--window-s", f"{real_s(plan, load['window_s']):.3f}",
        "--windows", str(2 * windows_planned(plan) + 10),
        "--duration-s", f"{duration:.3f}",
        # room for pauses as long as the soak itself; past that the soak times out
        "--deadline", f"{node_now + 2 * duration + 60:.3f}",
        "--prefix-len", str(load["prefix_len"]), "--suffix-len", str(load["suffix_len"]),
        "--num-prefixes", str(load["num_prefixes"]), "--output-len", str(load["output_len"]),
        "--seed", str(load["seed"]),
        "--probe-every", f"{real_s(plan, correctness['every_s']):.3f}",
        "--probe-max-tokens", str(correctness["max_tokens"]),
        "--probe-timeout", str(correctness["timeout_s"]),
        "--prompts-json", json.dumps([{"id": p["id"], "text": p["text"]}
                                      for p in correctness["prompts"]]),
    ]


def _store_run(soak: Soak, agent: SoakAgent, *, probe: str, parser: str, command: str,
               result, parameters: dict, raw: bytes, started: datetime) -> ProbeRun:
    return ProbeRun.objects.create(
        gate_run_id=soak.gate_run_id, node=agent.node, probe=probe, parser=parser,
        parser_version=PARSER_VERSION, command=command, parameters=parameters,
        tool_version=agent.tool_version, exit_code=result.exit_code, stdout=raw,
        stderr=result.stderr[:65536], stdout_sha256=hashlib.sha256(raw).hexdigest(),
        stdout_size=len(raw), stderr_size=len(result.stderr[:65536]), started_at=started,
        finished_at=_now(), state=ProbeRun.State.PARSED, simulated=agent.simulated,
        labels={"soak": probe})


def _agents_start(soak: Soak, nodes: _Nodes) -> None:
    """Tool version, known-good answers, then every agent started detached."""
    plan = soak.plan
    first_start = None
    for agent in soak.agents.select_related("node__credential"):
        node = agent.node
        version = nodes.run(node, shlex.join(
            ["timeout", "10", *plan["load"]["vllm"].split(), "--version"]), timeout=30)
        text = (version.stdout or version.stderr).decode(errors="replace").strip()
        agent.tool_version = (text.splitlines()[0][:150] if text else "unknown")
        agent.tool_version = f"vllm {agent.tool_version}; soak agent {PARSER_VERSION}"
        agent.simulated = SIMULATED_MARKER.encode() in version.stderr
        args = _agent_args(soak, agent, time.time())
        command = commands.agent_golden_command(
            agent_args=args, timeout_s=int(plan["correctness"]["timeout_s"]) + 30)
        started = _now()
        result = nodes.run(node, command, timeout=plan["correctness"]["timeout_s"] + 60)
        display = f"{plan['load']['vllm']} soak agent --golden (correctness round, RUNBOOK §5.2)"
        run = _store_run(soak, agent, probe="soak_golden", parser="soak_correctness",
                         command=display, result=result, raw=result.stdout,
                         parameters={"prompts": [p["id"] for p in plan["correctness"]["prompts"]]},
                         started=started)
        try:
            answers = json.loads(result.stdout)["answers"]
            golden = {a["id"]: a["text"] for a in answers}
            errors = [f"{a['id']}: {a['error']}" for a in answers if a.get("error")]
        except (ValueError, KeyError, TypeError) as error:
            errors = [f"unreadable answer ({error})"]
            golden = {}
        if result.exit_code != 0 or errors:
            run.state, run.error_kind = ProbeRun.State.FAILED, "exit_status"
            run.error = f"could not record the known-good answers: {'; '.join(errors)}"
            run.save(update_fields=["state", "error_kind", "error"])
            raise _StartFailed(f"{node.name}: {run.error}")
        agent.golden, agent.golden_probe_run = golden, run
        command = commands.agent_start_command(
            remote_dir=agent.remote_dir, deadline_s=int(2 * soak.duration_s + 180),
            agent_args=_agent_args(soak, agent, time.time()))
        agent.command = (f"nohup setsid {plan['load']['vllm']} soak agent in "
                         f"{agent.remote_dir} ({windows_planned(plan)} windows of "
                         f"{real_s(plan, plan['load']['window_s']):g} s)")
        result = nodes.run(node, command, timeout=60)
        said = result.stdout.decode(errors="replace").split()
        if result.exit_code != 0 or len(said) < 4 or said[0] != "pid":
            raise _StartFailed(f"{node.name}: the soak agent did not start: "
                               f"{result.stderr.decode(errors='replace').strip()[:300]}")
        agent.pid, agent.state = int(said[1]), SoakAgent.State.RUNNING
        first_start = min(first_start or float(said[3]), float(said[3]))
        agent.save()
        _event(soak, "agent started", f"{node.name}: agent pid {agent.pid} in "
               f"{agent.remote_dir}; known-good answers of {len(golden)} prompts recorded")
    now = _now()
    Soak.objects.filter(id=soak.id).update(
        state=Soak.State.RUNNING, started_at=now, load_started_at=_at(first_start),
        deadline_at=now + timedelta(seconds=2 * soak.duration_s + 120), heartbeat_at=now)
    soak.refresh_from_db()


class _StartFailed(Exception):
    pass


# --- collection --------------------------------------------------------------------------


def _window_measurements(run: ProbeRun, agent: SoakAgent, raw: bytes) -> list[Measurement]:
    rows = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        index = int(record["soak_window"])
        at = _at(float(record["soak_ended"]))
        labels = {"soak_window": str(index)}
        if record.get("soak_error"):
            planned = max(1, round(float(agent.soak.plan["load"]["request_rate"])
                                   * real_s(agent.soak.plan, agent.soak.plan["load"]["window_s"])))
            error = {**labels, "client_error": str(record["soak_error"])[:200]}
            rows.append(Measurement(metric="failed_requests", value=planned, unit="1",
                                    labels=error))
            rows.append(Measurement(metric="completed_requests", value=0, unit="1",
                                    labels=error))
        else:
            for m in parse_output("vllm_bench", line):
                rows.append(Measurement(metric=m.metric, value=m.value, unit=m.unit,
                                        labels={**m.labels, **labels}))
        rows.append(Measurement(metric="completion_gap_max",
                                value=float(record["soak_completion_gap_max_s"]), unit="s",
                                labels={**labels,
                                        "window_start": f"{record['soak_started']:.3f}",
                                        "first_completion": _num(record,
                                                                 "soak_first_completion"),
                                        "last_completion": _num(record,
                                                                "soak_last_completion")}))
        for row in rows:
            if row.sampled_at is None:
                row.sampled_at = at
        agent.last_window = max(agent.last_window, index)
        if record.get("soak_last_completion"):
            agent.last_completion_at = float(record["soak_last_completion"])
    for row in rows:
        row.gate_run_id, row.probe_run, row.node = run.gate_run_id, run, agent.node
    return rows


def _num(record: dict, key: str) -> str:
    value = record.get(key)
    return "" if value is None else f"{float(value):.3f}"


def _answer_measurements(run: ProbeRun, agent: SoakAgent, raw: bytes) -> list[Measurement]:
    rows = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        at = _at(float(record["t"]))
        for answer in record["answers"]:
            golden = agent.golden.get(answer["id"])
            if answer.get("error") or golden is None:
                value, said = 1.0, f"error: {answer.get('error') or 'no known-good answer'}"
            else:
                value, said = steady.divergence(golden, answer.get("text"))
            rows.append(Measurement(
                gate_run_id=run.gate_run_id, probe_run=run, node=agent.node,
                metric="probe_mismatches", value=value, unit="1", sampled_at=at,
                labels={"prompt": answer["id"], "result": said[:120],
                        "soak_round": str(record["soak_round"])}))
    return rows


READERS = {
    "windows.jsonl": ("soak_windows", "vllm_bench", _window_measurements),
    "probes.jsonl": ("soak_correctness", "soak_correctness", _answer_measurements),
}


def _collect(soak: Soak, agent: SoakAgent, nodes: _Nodes) -> bool:
    """Collect what ``agent`` wrote since the stored offsets; True when it has finished and
    everything it wrote is collected. Raises TransportError when the node cannot be reached."""
    status = nodes.run(agent.node, commands.agent_status_command(agent.remote_dir), timeout=30)
    running, done, _node_time = commands.agent_status_read(status.stdout)
    complete = True
    for name, (probe, parser, reader) in READERS.items():
        offset = int(agent.offsets.get(name, 0))
        path = f"{agent.remote_dir}/{name}"
        command = commands.agent_read_command(path, offset)
        started = _now()
        result = nodes.run(agent.node, command, timeout=60)
        cut = result.stdout.rfind(b"\n") + 1
        if len(result.stdout) >= commands.READ_MAX_BYTES:
            complete = False  # more to read next time
        if cut == 0:
            continue
        raw = result.stdout[:cut]
        with transaction.atomic():
            run = _store_run(soak, agent, probe=probe, parser=parser,
                             command=f"tail -c +{offset + 1} {path} (soak collection)",
                             result=result, raw=raw, started=started,
                             parameters={"file": path, "offset": offset, "length": cut})
            try:
                rows = reader(run, agent, raw)
            except (ParseError, ValueError, KeyError, TypeError) as error:
                run.state, run.error_kind = ProbeRun.State.FAILED, "parse"
                run.error = f"unreadable soak record: {error}"
                run.save(update_fields=["state", "error_kind", "error"])
                rows = []
            Measurement.objects.bulk_create(rows)
            agent.offsets = {**agent.offsets, name: offset + cut}
            agent.last_collected_at = _now()
            agent.save(update_fields=["offsets", "last_collected_at", "last_window",
                                      "last_completion_at"])
    if not running:
        state = SoakAgent.State.FINISHED if done else SoakAgent.State.LOST
        if agent.state != state:
            agent.state = state
            agent.save(update_fields=["state"])
            _event(soak, f"agent {state}", f"{agent.node.name}: "
                   + (f"{done['reason']} after {done['windows']} windows" if done else
                      "the agent is gone without its done record"))
    return complete and not running


def _collect_all(soak: Soak, nodes: _Nodes) -> bool:
    finished = True
    for agent in soak.agents.select_related("node__credential", "soak"):
        if agent.state in (SoakAgent.State.FINISHED, SoakAgent.State.LOST,
                           SoakAgent.State.STOPPED) and agent.last_collected_at:
            continue
        try:
            finished &= _collect(soak, agent, nodes)
            _gap_close(soak, agent.node)
        except TransportError as error:
            _gap_open(soak, agent.node, f"{agent.node.name} unreachable: {error}")
            finished = False
    return finished


def _gap_open(soak: Soak, node: Node | None, reason: str, at: datetime | None = None) -> None:
    if not CollectionGap.objects.filter(soak=soak, node=node, ended_at__isnull=True).exists():
        CollectionGap.objects.create(soak=soak, node=node, started_at=at or _now(),
                                     reason=reason)


def _gap_close(soak: Soak, node: Node | None) -> None:
    CollectionGap.objects.filter(soak=soak, node=node, ended_at__isnull=True).update(
        ended_at=_now())


# --- faults ------------------------------------------------------------------------------


def _loaded_s(soak: Soak) -> float:
    """Real seconds of load since the agents started, pauses excluded."""
    if soak.load_started_at is None:
        return 0.0
    paused = soak.paused_s
    if soak.state == Soak.State.PAUSED and soak.paused_at:
        paused += (_now() - soak.paused_at).total_seconds()
    return (_now() - soak.load_started_at).total_seconds() - paused


def _plan_fault(soak: Soak, fault: FaultWindow) -> dict:
    return next(f for f in soak.plan["faults"] if f["name"] == fault.name)


def _run_checked(nodes: _Nodes, node: Node, command: str) -> tuple[int | None, str]:
    result = nodes.run(node, command, timeout=COMMAND_TIMEOUT_S)
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


def _fault_inject(soak: Soak, fault: FaultWindow, nodes: _Nodes, length_s: float) -> None:
    """Safety checks, heal armed and verified on the node, then the fault (RUNBOOK §5.3)."""
    plan_fault = _plan_fault(soak, fault)
    kind = commands.fault_kind(fault.kind)
    node = fault.node
    ctx = _fault_context(node)
    if fault.fault_target is None or not FaultTarget.objects.filter(
            pk=fault.fault_target_id).exists():
        return _fault_end(soak, fault, FaultWindow.State.REFUSED,
                          "its target is no longer marked for fault injection")
    results = []
    for check in kind.safety(plan_fault, ctx):
        code, said = (None, "") if not check.command else _run_checked(nodes, node,
                                                                        check.command)
        ok, found = check.judge(code, said)
        results.append({"check": check.name, "command": check.command, "said": found, "ok": ok})
    fault.safety = results
    fault.save(update_fields=["safety"])
    failed = [r for r in results if not r["ok"]]
    if failed:
        return _fault_end(soak, fault, FaultWindow.State.REFUSED,
                          "; ".join(f"{r['check']}: {r['said']}" for r in failed))
    fault.heal_token = f"h{fault.id}-{secrets.token_hex(4)}"
    heal = kind.heal_argv(plan_fault, ctx)
    fault.heal_command = shlex.join(heal)
    fault.inject_command = shlex.join(kind.inject_argv(plan_fault, ctx))
    code, said = _run_checked(nodes, node, commands.arm_command(
        token=fault.heal_token, delay_s=length_s, heal_argv=heal, sudo=node.use_sudo))
    if code != 0:
        return _fault_end(soak, fault, FaultWindow.State.FAILED,
                          f"could not arm the heal on the node: {said.strip()[:300]}")
    fault.heal_method = said.strip().splitlines()[-1][:32] if said.strip() else "?"
    fault.heal_armed_at = _now()
    code, said = _run_checked(nodes, node, commands.armed_command(fault.heal_token))
    if commands.armed_read(said.encode())[0] != "armed":
        _run_checked(nodes, node, commands.disarm_command(fault.heal_token, sudo=node.use_sudo))
        return _fault_end(soak, fault, FaultWindow.State.FAILED,
                          f"the heal is not armed on the node ({said.strip()[:200]}): no fault")
    fault.heal_verified_at = _now()
    fault.state = FaultWindow.State.ARMED
    fault.save()
    _event(soak, "heal armed", f"{fault.name}: heal `{fault.heal_command}` armed on "
           f"{node.name} by {fault.heal_method} in {length_s:.3g} s, verified", fault=fault)
    code, said = _run_checked(nodes, node, commands.timed_command(
        kind.inject_argv(plan_fault, ctx), sudo=node.use_sudo))
    if code != 0:
        _fault_heal_now(soak, fault, nodes, "the inject command failed")
        return _fault_end(soak, fault, FaultWindow.State.FAILED,
                          f"inject failed: {said.strip()[:300]}")
    fault.injected_at = _at(_last_float(said)) or _now()
    fault.state = FaultWindow.State.INJECTED
    fault.save(update_fields=["injected_at", "state"])
    _event(soak, "fault injected", f"{fault.name}: `{fault.inject_command}` on {node.name}",
           fault=fault)


def _last_float(text: str) -> float | None:
    for line in reversed(text.strip().splitlines()):
        try:
            return float(line.strip())
        except ValueError:
            continue
    return None


def _fault_end(soak: Soak, fault: FaultWindow, state: str, error: str) -> None:
    fault.state, fault.error = state, error
    fault.save()
    _event(soak, f"fault {state}", f"{fault.name}: {error}", fault=fault)


def _fault_verify_healed(soak: Soak, fault: FaultWindow, nodes: _Nodes) -> tuple[bool, str]:
    plan_fault = _plan_fault(soak, fault)
    kind = commands.fault_kind(fault.kind)
    command = kind.state_command(plan_fault, _fault_context(fault.node))
    if not command:
        return True, "no state command in the plan: the heal's exit status is the evidence"
    code, said = _run_checked(nodes, fault.node, command)
    judge = (kind.state_healed if fault.kind == "link_down"
             else commands.DriveOut.state_healed_for(int(fault.target["drive"])))
    return judge(code, said), said.strip()[:200]


def _fault_heal_now(soak: Soak, fault: FaultWindow, nodes: _Nodes, why: str,
                    how: str = "service") -> None:
    """Heal from the service, then disarm the node's timer (heal first: never both off)."""
    plan_fault = _plan_fault(soak, fault)
    kind = commands.fault_kind(fault.kind)
    node = fault.node
    code, said = _run_checked(nodes, node, commands.timed_command(
        kind.heal_argv(plan_fault, _fault_context(node)), sudo=node.use_sudo))
    if fault.heal_token:
        _run_checked(nodes, node, commands.disarm_command(fault.heal_token, sudo=node.use_sudo))
    if code != 0:
        fault.error = f"heal by the service failed ({said.strip()[:200]}); the armed timer was " \
                      f"disarmed only after"
    if fault.state == FaultWindow.State.INJECTED:
        fault.healed_at = _at(_last_float(said)) or _now()
        fault.heal_how, fault.state = how, FaultWindow.State.HEALED
    fault.save()
    _event(soak, "fault healed", f"{fault.name}: healed by the {how} ({why})", fault=fault)


def _fault_watch(soak: Soak, fault: FaultWindow, nodes: _Nodes, length_s: float) -> None:
    code, said = _run_checked(nodes, fault.node, commands.armed_command(fault.heal_token))
    state, fired_at, heal_code = commands.armed_read(said.encode())
    if state == "fired":
        healed, found = _fault_verify_healed(soak, fault, nodes)
        fault.healed_at, fault.heal_how = _at(fired_at) or _now(), "timer"
        fault.state = FaultWindow.State.HEALED
        if not healed or heal_code:
            fault.error = (f"the armed heal ran (exit {heal_code}) but the target is not "
                           f"restored: {found}")
            fault.save()
            return _fault_heal_now(soak, fault, nodes, "the timer's heal did not restore it")
        fault.save()
        _event(soak, "fault healed", f"{fault.name}: healed on the node by its armed timer "
               f"({found})", fault=fault)
        return
    grace = max(2.0, 0.2 * length_s)
    if fault.injected_at and (_now() - fault.injected_at).total_seconds() > length_s + grace:
        _fault_heal_now(soak, fault, nodes, f"the armed heal had not fired {grace:.3g} s "
                        f"after the window's end ({state})")


def _fault_settle_armed(soak: Soak, fault: FaultWindow, nodes: _Nodes) -> None:
    """A fault left armed but not known injected (the node went away between the two, or the
    worker died): the target's state says whether the inject happened."""
    healthy, found = _fault_verify_healed(soak, fault, nodes)
    if healthy:
        _run_checked(nodes, fault.node, commands.disarm_command(fault.heal_token,
                                                                sudo=fault.node.use_sudo))
        return _fault_end(soak, fault, FaultWindow.State.FAILED,
                          f"armed but not injected (the target is healthy: {found})")
    fault.injected_at = fault.heal_verified_at or _now()
    fault.state = FaultWindow.State.INJECTED
    fault.error = "injected while the service lost track; start taken as the heal's arming"
    fault.save(update_fields=["injected_at", "state", "error"])
    _event(soak, "fault injected", f"{fault.name}: found injected ({found})", fault=fault)


def _faults_tick(soak: Soak, nodes: _Nodes, *, start_new: bool = True) -> None:
    """Inject the faults that are due (unless ``start_new`` is False: paused) and watch those
    on until healed."""
    elapsed = _loaded_s(soak)
    for fault in soak.faults.select_related("node__credential", "node__array").filter(
            state__in=[FaultWindow.State.PLANNED, FaultWindow.State.ARMED,
                       FaultWindow.State.INJECTED]):
        start, length = real_s(soak.plan, fault.start_s), real_s(soak.plan, fault.duration_s)
        try:
            if fault.state == FaultWindow.State.PLANNED and start_new and elapsed >= start:
                if elapsed > start + length / 2:
                    _fault_end(soak, fault, FaultWindow.State.MISSED,
                               f"the service was not attached when it was due ({elapsed:.3g} s "
                               f"of load, due at {start:.3g} s)")
                else:
                    _fault_inject(soak, fault, nodes, length - (elapsed - start))
            elif fault.state == FaultWindow.State.ARMED:
                _fault_settle_armed(soak, fault, nodes)
            elif fault.state == FaultWindow.State.INJECTED:
                _fault_watch(soak, fault, nodes, length)
        except TransportError as error:
            # The heal is armed on the node: it fires without us. Note and try again.
            _gap_open(soak, fault.node, f"{fault.node.name} unreachable during fault "
                      f"{fault.name}: {error}")


# --- the driver loop ---------------------------------------------------------------------


def _owned(soak: Soak, token: str) -> bool:
    """Heartbeat if ``token`` still owns the soak; False when another driver took over."""
    return Soak.objects.filter(id=soak.id, driver_token=token).update(
        heartbeat_at=_now(), loaded_s=max(0.0, _loaded_s(soak))) == 1


def soak_drive(*, soak_id: int, driver_token: str) -> None:
    """Drive the soak until it is decided, aborted or taken over by another driver.

    Bounded: at most (deadline − now) ÷ tick + 100 iterations, never past ``deadline_at``
    (then it aborts, healing first). Returns quietly when ``driver_token`` is not the soak's
    (a duplicate delivery, or a newer driver took over).
    """
    soak = Soak.objects.select_related("gate_run__gate__engagement").get(id=soak_id)
    if soak.driver_token != driver_token or soak.state not in Soak.ACTIVE:
        logger.info("soak %s: driver %s is not the owner; nothing to do", soak_id, driver_token)
        return
    nodes = _Nodes()
    try:
        if soak.state == Soak.State.STARTING:
            try:
                _agents_start(soak, nodes)
            except (_StartFailed, TransportError) as error:
                _abort(soak, nodes, f"the soak could not start: {error}", failed=True)
                return
        _loop(soak, nodes, driver_token)
    except Exception as error:  # recorded; the agents keep running and recovery can re-attach
        logger.exception("soak %s driver failed", soak_id)
        _event(soak, "driver error", f"{type(error).__name__}: {error}")
        raise
    finally:
        nodes.close()


def _sleep_s(soak: Soak, tick: float) -> float:
    """Until the next tick, or sooner when a planned fault falls due before it (faults start
    on time, not up to a sampling interval late)."""
    if soak.state != Soak.State.RUNNING:
        return tick
    elapsed = _loaded_s(soak)
    due = [real_s(soak.plan, f.start_s) - elapsed
           for f in soak.faults.filter(state=FaultWindow.State.PLANNED).only("start_s")]
    soonest = min([d for d in due if d >= 0], default=tick)
    return max(0.05, min(tick, soonest))


def _loop(soak: Soak, nodes: _Nodes, token: str) -> None:
    tick = max(TICK_MIN_S, real_s(soak.plan, soak.plan["sampling_s"]))
    deadline = soak.deadline_at or (_now() + timedelta(seconds=2 * soak.duration_s + 120))
    bound = int((deadline - _now()).total_seconds() / tick) + 100
    for _ in range(max(bound, 1)):
        soak.refresh_from_db()
        if soak.state not in Soak.ACTIVE or not _owned(soak, token):
            return
        if soak.abort_requested_at or cancel_requested(soak.gate_run_id):
            who = soak.abort_requested_by or soak.gate_run.cancel_requested_by or "?"
            _abort(soak, nodes, f"aborted by {who}: {soak.abort_reason or 'run cancelled'}",
                   actor=who)
            return
        if _now() > deadline:
            _abort(soak, nodes, f"timeout: the soak did not finish by {deadline:%H:%M:%S} UTC")
            return
        finished = _collect_all(soak, nodes)
        _faults_tick(soak, nodes, start_new=soak.state != Soak.State.PAUSED)
        soak_checks_update(soak=soak)
        pending = soak.faults.filter(state__in=[FaultWindow.State.ARMED,
                                                FaultWindow.State.INJECTED]).exists()
        if finished and not pending:
            break
        time.sleep(_sleep_s(soak, tick))
    else:
        _abort(soak, nodes, "the driver loop reached its bound")
        return
    if not Soak.objects.filter(id=soak.id, driver_token=token, state__in=Soak.ACTIVE).update(
            state=Soak.State.EVALUATING, heartbeat_at=_now()):
        return
    soak.refresh_from_db()
    unplanned = soak.faults.filter(state=FaultWindow.State.PLANNED)
    for fault in unplanned:
        _fault_end(soak, fault, FaultWindow.State.MISSED, "the load ended before it was due")
    soak_evaluate(soak=soak)


def _abort(soak: Soak, nodes: _Nodes, reason: str, *, failed: bool = False,
           actor: str = "") -> None:
    """Heal every fault still on (service heal, timer disarmed), stop the agents, collect the
    last bytes, and end the soak and its gate run with ``reason`` (no decision)."""
    for fault in soak.faults.select_related("node__credential", "node__array").filter(
            state__in=[FaultWindow.State.ARMED, FaultWindow.State.INJECTED]):
        try:
            _fault_heal_now(soak, fault, nodes, reason, how="abort")
        except TransportError as error:
            fault.error = (f"abort could not reach {fault.node.name} ({error}); the heal armed "
                           f"on the node restores it")
            fault.save(update_fields=["error"])
        if fault.state == FaultWindow.State.ARMED:
            _fault_end(soak, fault, FaultWindow.State.FAILED, f"not injected: {reason}")
    for agent in soak.agents.select_related("node__credential"):
        if agent.state in (SoakAgent.State.RUNNING, SoakAgent.State.STARTING) and agent.pid:
            try:
                nodes.run(agent.node, commands.agent_stop_command(agent.remote_dir))
                _collect(soak, agent, nodes)
            except TransportError as error:
                _gap_open(soak, agent.node, f"abort could not reach {agent.node.name}: {error}")
            agent.refresh_from_db()
            agent.state = SoakAgent.State.STOPPED
            agent.save(update_fields=["state"])
    state = Soak.State.FAILED if failed else Soak.State.ABORTED
    Soak.objects.filter(id=soak.id).update(state=state, finished_at=_now(), error=reason)
    _event(soak, state, reason)
    GateRun.objects.filter(id=soak.gate_run_id, state__in=[
        GateRun.State.RUNNING, GateRun.State.EVALUATING]).update(
        state=GateRun.State.FAILED if failed else GateRun.State.CANCELLED, error=reason,
        finished_at=_now())
    if actor:
        GateRun.objects.filter(id=soak.gate_run_id, cancel_requested_at__isnull=True).update(
            cancel_requested_at=_now(), cancel_requested_by=actor)


# --- engineer's actions ------------------------------------------------------------------


def _active_soak(gate_run: GateRun) -> Soak:
    soak = Soak.objects.filter(gate_run=gate_run).first()
    if soak is None:
        raise SoakRefused(f"{gate_run} is not a soak")
    return soak


def _flag_all(soak: Soak, present: bool) -> list[str]:
    nodes, said = _Nodes(), []
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
        state=Soak.State.PAUSED, paused_at=_now())
    _event(soak, "paused", f"{reason.strip()} ({'; '.join(said)})", actor=actor)
    soak.refresh_from_db()
    return soak


def soak_resume(*, soak: Soak, actor: str) -> Soak:
    """Resume a paused soak; the pause is excluded from the load time and the schedule.
    ValueError when not paused."""
    soak.refresh_from_db()
    if soak.state != Soak.State.PAUSED:
        raise ValueError(f"the soak is {soak.state}, not paused")
    said = _flag_all(soak, False)
    paused = (_now() - soak.paused_at).total_seconds() if soak.paused_at else 0.0
    Soak.objects.filter(id=soak.id, state=Soak.State.PAUSED).update(
        state=Soak.State.RUNNING, paused_at=None, paused_s=soak.paused_s + paused)
    _event(soak, "resumed", f"after {paused:.1f} s ({'; '.join(said)})", actor=actor)
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
        abort_requested_at=_now(), abort_requested_by=actor, abort_reason=reason.strip())
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
        nodes = _Nodes()
        try:
            _abort(soak, nodes, f"aborted by {actor}: {reason.strip()}", actor=actor)
        finally:
            nodes.close()
        soak.refresh_from_db()
    return soak


def _driver_alive(soak: Soak) -> bool:
    lost = timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS)
    return soak.heartbeat_at is not None and soak.heartbeat_at > _now() - lost


def soak_recover(*, after: timedelta | None = None) -> list[str]:
    """Re-attach soaks whose driver stopped heartbeating (worker killed or restarted): record
    the collection gap (from the last heartbeat to now) and send a new driver, which collects
    from the stored byte offsets. Safe to call anywhere, any number of times."""
    cutoff = _now() - (after if after is not None else
                       timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS))
    lines = []
    for soak in Soak.objects.filter(state=Soak.State.EVALUATING, heartbeat_at__lt=cutoff):
        if GateRun.objects.filter(id=soak.gate_run_id, decision__isnull=False).exists():
            reason = ("the worker stopped after recording the decision, before the signed "
                      "report: re-run the report")
            Soak.objects.filter(id=soak.id).update(state=Soak.State.DONE, error=reason)
            GateRun.objects.filter(id=soak.gate_run_id, state=GateRun.State.RUNNING).update(
                state=GateRun.State.FAILED, error=reason, finished_at=_now())
        else:  # evaluation is one transaction: nothing half-stored; evaluate again
            Soak.objects.filter(id=soak.id, state=Soak.State.EVALUATING).update(
                state=Soak.State.COLLECTING)
    for soak in Soak.objects.filter(state__in=Soak.ACTIVE, heartbeat_at__lt=cutoff):
        token = secrets.token_hex(8)
        now = _now()
        if not Soak.objects.filter(id=soak.id, driver_token=soak.driver_token,
                                   heartbeat_at=soak.heartbeat_at).update(
                driver_token=token, heartbeat_at=now):
            continue
        reason = (f"the worker driving the soak stopped (no heartbeat since "
                  f"{soak.heartbeat_at:%H:%M:%S} UTC); re-attached at {now:%H:%M:%S} UTC — the "
                  f"agents kept running, their records are collected from the stored offsets")
        CollectionGap.objects.create(soak=soak, node=None, started_at=soak.heartbeat_at,
                                     ended_at=now, reason=reason)
        _event(soak, "re-attached", reason)
        transaction.on_commit(lambda s=soak.id, t=token: _dispatch(s, t))
        lines.append(f"{soak}: {reason}")
    return lines


# --- live checks and evaluation ----------------------------------------------------------


def soak_inputs(soak: Soak) -> tuple[list[steady.Window], list[steady.Answer],
                                     list[steady.Fault]]:
    """The soak's windows, correctness answers and injected fault windows, from the database
    (the inputs of ``steady.derive``)."""
    per_window: dict[tuple[str, int], dict] = {}
    rows = Measurement.objects.filter(
        gate_run_id=soak.gate_run_id, derived=False,
        metric__in=["completed_requests", "failed_requests", "ttft_p99", "output_throughput",
                    "completion_gap_max"]).select_related("node").only(
        "id", "metric", "value", "labels", "node__name", "sampled_at")
    for m in rows.iterator():
        key = (m.node.name, int(m.labels["soak_window"]))
        entry = per_window.setdefault(key, {"ids": []})
        entry[m.metric] = m.value
        entry["ids"].append(m.id)
        if m.metric == "completion_gap_max":
            entry["start"] = float(m.labels["window_start"])
            entry["end"] = m.sampled_at.timestamp()
            entry["first"] = float(m.labels["first_completion"]) if m.labels.get(
                "first_completion") else None
            entry["last"] = float(m.labels["last_completion"]) if m.labels.get(
                "last_completion") else None
    windows = [
        steady.Window(node, index, e["start"], e["end"], e.get("completed_requests", 0.0),
                      e.get("failed_requests", 0.0), e.get("ttft_p99"),
                      e.get("output_throughput"), e["completion_gap_max"], e["first"],
                      e["last"], tuple(e["ids"]))
        for (node, index), e in sorted(per_window.items()) if "start" in e
    ]
    answers = [steady.Answer(m.node.name, m.sampled_at.timestamp(), m.value, m.id)
               for m in Measurement.objects.filter(
                   gate_run_id=soak.gate_run_id, metric="probe_mismatches", derived=False
               ).select_related("node").only("id", "value", "node__name", "sampled_at")]
    faults = [steady.Fault(f.name, f.injected_at.timestamp(),
                           f.healed_at.timestamp() if f.healed_at else None)
              for f in soak.faults.filter(injected_at__isnull=False)]
    return windows, answers, faults


def soak_figures(soak: Soak) -> list[steady.SpanFigure]:
    """Every span figure of the soak so far (``steady.derive`` on the stored samples)."""
    windows, answers, faults = soak_inputs(soak)
    plan = soak.plan
    return steady.derive(
        windows, answers, faults, baseline_windows=int(plan["steady_state"]["baseline_windows"]),
        before_s=real_s(plan, plan["steady_state"]["before_s"]),
        after_s=real_s(plan, plan["steady_state"]["after_s"]), now=time.time())


def _criteria_specs(soak: Soak) -> list[evaluation.CriterionSpec]:
    return [criterion_spec(c) for c in soak.gate_run.gate.criteria.all()]


def soak_checks_update(*, soak: Soak) -> dict:
    """Judge every criterion on the span figures so far and store the result in
    ``soak.checks`` ({criterion key: {state, value, explanation, at}}): the live check states."""
    figures = soak_figures(soak)
    samples = [evaluation.Sample(i, f.metric, f.value, f.unit, f.labels, f.node)
               for i, f in enumerate(figures)]
    checks = {}
    for spec in _criteria_specs(soak):
        if spec.metric in ("soak_duration", "fault_windows_missed"):
            continue
        verdict = evaluation.evaluate_criterion(spec, samples)
        checks[spec.key] = {"state": verdict.verdict, "value": verdict.measured,
                            "unit": spec.unit, "explanation": verdict.explanation,
                            "at": _now().isoformat()}
    Soak.objects.filter(id=soak.id).update(checks=checks)
    return checks


def _store_figures(soak: Soak) -> None:
    nodes = {n.name: n for n in soak.gate_run.gate.engagement.nodes.all()}
    gate_run = soak.gate_run
    with transaction.atomic():
        for figure in soak_figures(soak):
            row = Measurement.objects.create(
                gate_run=gate_run, node=nodes.get(figure.node), metric=figure.metric,
                value=figure.value, unit=figure.unit, labels=figure.labels, derived=True)
            row.inputs.set(figure.input_ids)
        durations = {}
        for window in soak_inputs(soak)[0]:
            durations.setdefault(window.node, []).append(window)
        for node, windows in durations.items():
            loaded = sum(w.end - w.start for w in windows)
            row = Measurement.objects.create(
                gate_run=gate_run, node=nodes.get(node), metric="soak_duration",
                value=loaded * soak.time_compression, unit="s", derived=True,
                labels={"time_compression": f"{soak.time_compression:g}",
                        "real_s": f"{loaded:.1f}", "windows": str(len(windows))})
            row.inputs.set([i for w in windows for i in w.ids[:1]])
        for fault in soak.faults.all():
            missed = 0.0 if fault.state == FaultWindow.State.HEALED else 1.0
            Measurement.objects.create(
                gate_run=gate_run, node=fault.node, metric="fault_windows_missed",
                value=missed, unit="1", derived=True,
                labels={"fault": fault.name, "state": fault.state,
                        **({"reason": fault.error[:120]} if missed else {})})


def _where(soak: Soak, verdict: evaluation.Verdict, samples: list[evaluation.Sample]) -> str:
    """The node and span a failing verdict's worst figure comes from, in words."""
    chosen = [s for s in samples if s.id in set(verdict.sample_ids)]
    worst = next((s for s in chosen if s.value == verdict.measured
                  and s.node == verdict.node), None)
    if worst is None or "phase" not in worst.labels:
        return verdict.node
    if worst.labels.get("fault"):
        fault = soak.faults.filter(name=worst.labels["fault"]).first()
        span = ""
        if fault and fault.injected_at:
            end = f"{fault.healed_at:%H:%M:%S}" if fault.healed_at else "…"
            span = f" {fault.injected_at:%H:%M:%S}–{end} UTC"
        kind = fault.kind if fault else ""
        return (f"{worst.node} in fault window {worst.labels['fault']} ({kind}{span}), "
                f"{worst.labels['phase']} the fault")
    return f"{worst.node} in steady state"


def soak_evaluate(*, soak: Soak) -> GateRun:
    """Derive the span figures, judge G4's criteria and record the decision and the signed
    report; a run whose evidence cannot decide fails with the reason."""
    from reports.services import report_issue

    gate_run = GateRun.objects.select_related("gate__engagement").get(id=soak.gate_run_id)
    with transaction.atomic():
        decision = _decide(soak, gate_run)
    if decision is None:
        gate_run.refresh_from_db()
        return gate_run
    try:
        report_issue(decision=decision)
    except Exception as error:
        logger.exception("report for decision %s failed", decision.id)
        GateRun.objects.filter(id=gate_run.id).update(
            state=GateRun.State.FAILED, finished_at=_now(),
            error=f"decision recorded ({decision.outcome}) but the signed report could not be "
                  f"issued: {type(error).__name__}: {error}")
        gate_run.refresh_from_db()
        return gate_run
    GateRun.objects.filter(id=gate_run.id).update(state=GateRun.State.DONE, finished_at=_now())
    gate_run.refresh_from_db()
    return gate_run


def _decide(soak: Soak, gate_run: GateRun):
    """Store the span figures and record the decision (None: no decision, the run failed).
    Figures stored by an evaluation a dead worker left unfinished are replaced."""
    Measurement.objects.filter(gate_run=gate_run, derived=True).delete()
    _store_figures(soak)
    criteria = list(gate_run.gate.criteria.all())
    samples = [evaluation.Sample(m.id, m.metric, m.value, m.unit, m.labels,
                                 m.node.name if m.node else "")
               for m in gate_run.measurements.filter(derived=True).select_related("node")]
    specs = [criterion_spec(c) for c in criteria]
    verdicts = [evaluation.evaluate_criterion(spec, samples) for spec in specs]
    verdicts = [replace(v, node=_where(soak, v, samples)) if v.verdict == "fail" else v
                for v in verdicts]
    blocking = {s.key: s.blocking for s in specs}
    outcome = evaluation.gate_outcome(verdicts, blocking)
    now = _now()
    if outcome == "error":
        reason = evaluation.no_decision_reason(verdicts, blocking)
        Soak.objects.filter(id=soak.id).update(state=Soak.State.FAILED, finished_at=now,
                                               error=reason)
        GateRun.objects.filter(id=gate_run.id).update(state=GateRun.State.FAILED,
                                                      error=reason, finished_at=now)
        _event(soak, "no decision", reason)
        return None
    stop = "; ".join(f"{v.key}: {v.explanation} — {v.node}" for v in verdicts
                     if v.verdict == "fail")
    decision = decision_record(gate_run=gate_run, verdicts=verdicts, criteria=criteria,
                               outcome=outcome)
    Soak.objects.filter(id=soak.id).update(state=Soak.State.DONE, finished_at=now,
                                           stop_reason=stop)
    _event(soak, f"decided: {outcome}", decision.sentence)
    return decision


__all__ = ["SoakPlanError", "SoakRefused", "fault_target_mark", "soak_abort",
           "soak_checks_update", "soak_drive", "soak_evaluate", "soak_figures", "soak_pause",
           "soak_recover", "soak_resume", "soak_start"]
