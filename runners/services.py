"""Running gates on nodes: dispatch, execution of probe runs over SSH, evidence, evaluation.

Postgres (or SQLite) is the ledger, Celery the doorbell: ``gate_run_start`` writes the run and
one ``NodeJob`` per node, then sends one task per job on commit. Each task claims its job with a
conditional update (a duplicate delivery does nothing), runs the node's probes over one SSH
connection, stores raw output and its sha256 before parsing, then the last job to finish
triggers evaluation. Nothing that ran on a node is retried automatically: a re-run is a new
``GateRun`` attempt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from acceptance.models import AuditEntry, Engagement, Node
from gates import derivations, evaluation
from gates.models import Gate
from gates.services import GateRefused, decision_record, gate_check_runnable
from runners.live import OUTPUT_CAP_BYTES, OutputRecorder, cancel_requested, heartbeat
from runners.models import GateRun, Measurement, NodeJob, OutputChunk, ProbeRun
from runners.parsers import PARSERS, parse_output
from runners.parsers.base import ParseError
from runners.plans import node_steps
from runners.probes import SIMULATED_MARKER, Probe, ProbeParameterError, kill_command, probe
from runners.transport import (
    CommandCancelled,
    CommandTimeout,
    SSHConnection,
    SSHTarget,
    TransportError,
)

logger = logging.getLogger(__name__)

_VERSION_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tool-version")
RESULT_ROOT = "/var/tmp/acctest"  # noqa: S108 (on the node, as RUNBOOK says); RUNBOOK §3.2/§3.4: per-run scratch directory on the node
SERVICE_VERSION = "acceptance-service 0.1.0"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bom_snapshot(engagement: Engagement) -> bytes:
    items = [
        {"position": i.position, "description": i.description, "quantity": i.quantity,
         "ticked_by": i.ticked_by, "ticked_at": i.ticked_at.isoformat() if i.ticked_at else None}
        for i in engagement.bom_items.all()
    ]
    return json.dumps({"engagement": engagement.name, "items": items}, indent=1).encode()


def _service_probe_run(*, gate_run: GateRun, probe_name: str) -> None:
    """Evidence the service holds itself (the BOM checklist), stored like any probe run."""
    raw = _bom_snapshot(gate_run.engagement)
    now = timezone.now()
    run = ProbeRun.objects.create(
        gate_run=gate_run, node=None, probe=probe_name, parser=probe_name,
        parser_version=PARSERS[probe_name].PARSER_VERSION,
        command="snapshot of the bill-of-materials checklist", tool_version=SERVICE_VERSION,
        exit_code=0, stdout=raw, stdout_sha256=_sha256(raw), started_at=now, finished_at=now,
    )
    _parse_and_store(run, raw)


def _roles_needed(gate: Gate) -> set[str]:
    return {step["role"] for step in gate.probe_plan if step["role"] != "service"}


OVER = (GateRun.State.DONE, GateRun.State.FAILED, GateRun.State.CANCELLED)
# Plan expansions measured on every node of the role at the same time (RUNBOOK §4.5): one node
# re-measured alone would not be the same measurement, so such nodes are never re-run alone.
CONCURRENT_EXPANSIONS = frozenset({"shared_readback"})


class ConfirmationRequired(GateRefused):
    """Re-running a gate that has passed needs ``confirmed=True`` and a reason: the new attempt's
    decision replaces the pass as the gate's standing (and may stop the engagement)."""


def passed_rerun_check(*, gate: Gate, reason: str, confirmed: bool) -> None:
    """Raise ConfirmationRequired when ``gate`` has passed and its re-run (any kind: all nodes,
    one node, a soak) is not confirmed with a reason; nothing to check for other gates."""
    if gate.state != Gate.State.PASSED:
        return
    if not confirmed:
        raise ConfirmationRequired(_(
            "%(gate)s has passed: a re-run makes a new attempt and a new decision that "
            "replaces the pass (a stop would stop the engagement). Confirm it and give a "
            "reason.") % {"gate": gate.code})
    if not reason:
        raise ConfirmationRequired(_(
            "%(gate)s has passed: re-running it needs a reason (recorded in the audit "
            "trail).") % {"gate": gate.code})


def passed_rerun_audit(*, gate: Gate, gate_run: GateRun, actor: str, reason: str) -> None:
    """Record in the audit trail that ``actor`` re-ran passed ``gate`` as ``gate_run`` and why,
    naming the decision the new attempt may replace."""
    decision = gate.decisions.order_by("-decided_at", "-id").first()
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=actor, action="passed gate re-run", reason=reason,
        details={"gate": gate.code, "gate_run": gate_run.id, "attempt": gate_run.attempt,
                 "node": gate_run.rerun_node.name if gate_run.rerun_node_id else "",
                 "passed_decision": decision.id if decision else None,
                 "passed_sentence": decision.sentence if decision else ""},
    )


def _gate_run_create(*, gate: Gate, started_by: str, probe_timeouts: dict | None,
                     reason: str, **extra) -> GateRun:
    """The next attempt of ``gate`` with the evidence the service holds (the BOM snapshot)
    taken now; the caller adds the node jobs."""
    attempt = (gate.runs.aggregate(m=Max("attempt"))["m"] or 0) + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=started_by,
                                      state=GateRun.State.RUNNING, reason=reason,
                                      probe_timeouts=dict(probe_timeouts or {}), **extra)
    for step in gate.probe_plan:
        if step["role"] == "service":
            _service_probe_run(gate_run=gate_run, probe_name=step["probe"])
    return gate_run


@transaction.atomic
def gate_run_start(*, gate: Gate, started_by: str,
                   probe_timeouts: dict[str, int] | None = None, reason: str = "",
                   confirmed: bool = False) -> GateRun:
    """Create a run of ``gate`` and dispatch one Celery task per node (on commit), at most the
    site's ``max_parallel_nodes`` at once. ``probe_timeouts`` overrides probe timeouts (s).

    A gate that has passed runs again only with ``confirmed=True`` and a ``reason`` (recorded
    in the audit trail with who and the decision it may replace).

    Raises GateRefused when the gate may not run (order, stopped engagement, missing nodes),
    ConfirmationRequired (a GateRefused) for a passed gate without confirmation and reason;
    nothing is created then.
    """
    Gate.objects.select_for_update().get(pk=gate.pk)
    gate.refresh_from_db()
    gate_check_runnable(gate=gate)
    if gate.is_soak:
        raise GateRefused(_("%(gate)s is a soak: start it from its soak plan page or with "
                            "run_gate, not as a run of node probes.") % {"gate": gate.code})
    reason = (reason or "").strip()
    passed_rerun_check(gate=gate, reason=reason, confirmed=confirmed)
    engagement = gate.engagement
    roles = _roles_needed(gate)
    nodes = list(engagement.nodes.filter(role__in=roles).order_by("name"))
    missing = roles - {n.role for n in nodes}
    if missing:
        raise GateRefused(_("%(gate)s: engagement %(name)s has no node of role %(roles)s "
                            "registered.") % {"gate": gate.code, "name": engagement.name,
                                              "roles": ", ".join(sorted(missing))})
    gate_run = _gate_run_create(gate=gate, started_by=started_by, probe_timeouts=probe_timeouts,
                                reason=reason)
    if gate.state == Gate.State.PASSED:
        passed_rerun_audit(gate=gate, gate_run=gate_run, actor=started_by, reason=reason)
    NodeJob.objects.bulk_create(NodeJob(gate_run=gate_run, node=node) for node in nodes)
    transaction.on_commit(lambda: node_jobs_dispatch(gate_run_id=gate_run.id))
    return gate_run


def _origin(job: NodeJob) -> NodeJob:
    return job.carried_from if job.carried_from_id else job


@transaction.atomic
def gate_run_rerun_node(*, gate_run: GateRun, node_name: str, started_by: str, reason: str,
                        confirmed: bool = False,
                        probe_timeouts: dict[str, int] | None = None) -> GateRun:
    """Re-run the probes of one node of a finished attempt of a gate.

    The new attempt (``rerun_of`` = ``gate_run``, ``rerun_node`` = the node) dispatches only to
    that node. Every other node of ``gate_run`` gets a job in the new attempt that is already
    done and carries its evidence *by reference* (``NodeJob.carried_from``: the job that
    really ran on the node, never a copy); the evidence the service holds (the BOM snapshot)
    is taken afresh. The gate is then decided over the node's new probe runs plus the carried
    ones, exactly as a full run (``evidence_probe_runs``, ``evidence_measurements``); derived
    figures are computed again. Audited ("node re-run": who, why, which attempt and node).

    Raises GateRefused, with nothing created, when: the reason is blank; ``gate_run`` is not
    over or is not the gate's latest attempt (superseded); it holds imported evidence; the
    gate may not run now (``gate_check_runnable``); ``node_name`` is not one of its nodes; the
    node's role measures at the same time as the others (``CONCURRENT_EXPANSIONS``); another
    node's evidence is not complete (its job did not finish done, or a probe run of it did
    not parse) — then only a full re-run can decide. ConfirmationRequired when the gate has
    passed and ``confirmed`` is not set.
    """
    reason = (reason or "").strip()
    gate = Gate.objects.select_for_update().get(pk=gate_run.gate_id)
    previous = GateRun.objects.get(pk=gate_run.pk)
    where = _("%(gate)s attempt #%(n)s") % {"gate": gate.code, "n": previous.attempt}
    if not reason:
        raise GateRefused(_("%(where)s: re-running one node needs a reason (it is recorded in "
                            "the audit trail).") % {"where": where})
    if previous.state not in OVER:
        raise GateRefused(_("%(where)s is still %(state)s: a node can be re-run once the "
                            "attempt has finished.") % {"where": where,
                                                        "state": previous.state})
    latest = gate.runs.order_by("-attempt").first()
    if latest is not None and latest.pk != previous.pk:
        raise GateRefused(_("%(where)s is superseded by attempt #%(latest)s: re-run a node of "
                            "the latest attempt.") % {"where": where, "latest": latest.attempt})
    if previous.origin != GateRun.Origin.SSH:
        raise GateRefused(_("%(where)s holds imported evidence: import a new bundle for the "
                            "node instead.") % {"where": where})
    gate_check_runnable(gate=gate)
    jobs = list(previous.node_jobs.select_related("node", "carried_from").order_by("node__name"))
    target = next((j for j in jobs if j.node.name == node_name), None)
    if target is None:
        raise GateRefused(_("%(where)s ran on no node named %(node)s (its nodes: %(nodes)s).")
                          % {"where": where, "node": repr(node_name),
                             "nodes": ", ".join(j.node.name for j in jobs) or "—"})
    if any(step.get("expand") in CONCURRENT_EXPANSIONS and step["role"] == target.node.role
           for step in gate.probe_plan):
        raise GateRefused(_("%(gate)s measures every %(role)s node at the same time, so "
                            "%(node)s cannot be re-measured alone: re-run the whole gate.")
                          % {"gate": gate.code, "role": target.node.role,
                             "node": target.node.name})
    others = [j for j in jobs if j.pk != target.pk]
    incomplete = []
    for job in others:
        origin = _origin(job)
        if origin.state != NodeJob.State.DONE:
            incomplete.append(f"{job.node.name} ({origin.state}"
                              + (f": {origin.error_kind})" if origin.error_kind else ")"))
        elif ProbeRun.objects.filter(gate_run_id=origin.gate_run_id, node=job.node).exclude(
                state=ProbeRun.State.PARSED).exists():
            incomplete.append(_("%(node)s (a probe run without parsed output)")
                              % {"node": job.node.name})
    if incomplete:
        raise GateRefused(_("%(where)s: a one-node re-run carries the other nodes' evidence, "
                            "so theirs must be complete; it is not for %(nodes)s. Re-run the "
                            "whole gate instead.") % {"where": where,
                                                      "nodes": "; ".join(incomplete)})
    passed_rerun_check(gate=gate, reason=reason, confirmed=confirmed)
    new = _gate_run_create(gate=gate, started_by=started_by, probe_timeouts=probe_timeouts,
                           reason=reason, rerun_of=previous, rerun_node=target.node)
    NodeJob.objects.create(gate_run=new, node=target.node)
    NodeJob.objects.bulk_create(
        NodeJob(gate_run=new, node=job.node, state=NodeJob.State.DONE,
                carried_from=_origin(job), started_at=_origin(job).started_at,
                finished_at=_origin(job).finished_at)
        for job in others)
    decision = getattr(previous, "decision", None) if previous.state == "done" else None
    AuditEntry.objects.create(
        engagement=gate.engagement, actor=started_by, action="node re-run", reason=reason,
        details={"gate": gate.code, "node": target.node.name, "gate_run": new.id,
                 "attempt": new.attempt, "previous_gate_run": previous.id,
                 "previous_attempt": previous.attempt, "previous_state": previous.state,
                 "previous_outcome": decision.outcome if decision else "",
                 "carried": {job.node.name: _origin(job).gate_run_id for job in others}},
    )
    if gate.state == Gate.State.PASSED:
        passed_rerun_audit(gate=gate, gate_run=new, actor=started_by, reason=reason)
    transaction.on_commit(lambda: node_jobs_dispatch(gate_run_id=new.id))
    return new


def _carried_sources(gate_run: GateRun) -> dict[int, list[int]]:
    """Gate run id → node ids whose evidence ``gate_run`` carries from that run."""
    sources: dict[int, list[int]] = {}
    for run_id, node_id in NodeJob.objects.filter(
            gate_run=gate_run, carried_from__isnull=False).values_list(
            "carried_from__gate_run_id", "node_id"):
        sources.setdefault(run_id, []).append(node_id)
    return sources


def evidence_probe_runs(gate_run: GateRun) -> QuerySet[ProbeRun]:
    """Every probe run a decision of ``gate_run`` rests on: its own, plus — in a per-node
    re-run — the other nodes' runs it carries from the attempt that ran them."""
    where = Q(gate_run=gate_run)
    for run_id, nodes in _carried_sources(gate_run).items():
        where |= Q(gate_run_id=run_id, node_id__in=nodes)
    return ProbeRun.objects.filter(where)


def evidence_measurements(gate_run: GateRun) -> QuerySet[Measurement]:
    """The measurements ``gate_run`` is judged on: its own (read and derived) plus the read
    measurements of the carried probe runs (their derived figures are computed again)."""
    where = Q(gate_run=gate_run)
    for run_id, nodes in _carried_sources(gate_run).items():
        where |= Q(gate_run_id=run_id, node_id__in=nodes, derived=False,
                   probe_run__isnull=False)
    return Measurement.objects.filter(where)


def node_target(node: Node) -> SSHTarget:
    """Where and how to reach ``node``: through its jump host (``via``) when it has one."""
    credential = node.credential
    return SSHTarget(
        name=node.name, host=node.address, port=node.port, user=node.ssh_user,
        host_key=node.host_key, private_key=credential.private_key(),
        passphrase=credential.passphrase(), connect_timeout=settings.SSH_CONNECT_TIMEOUT,
        connect_retries=settings.SSH_CONNECT_RETRIES,
        via=node_target(node.jump_host) if node.jump_host_id else None,
    )


@dataclass
class _JobContext:
    job: NodeJob
    connection: SSHConnection
    versions: dict[str, Future]


def _version_of(connection: SSHConnection, command: str) -> str:
    try:
        result = connection.run(command, timeout=30)
    except TransportError as error:
        return f"unknown ({error.kind})"
    text = (result.stdout or result.stderr).decode(errors="replace").strip()
    return text.splitlines()[0][:200] if text else "unknown"


def _tool_version(ctx: _JobContext, spec: Probe) -> Future:
    """The tool's version, asked once per node and job on a second channel of the same
    connection, concurrently with the probe's own command (so it costs no extra round trip)."""
    key = " ".join(spec.version_argv)
    if key not in ctx.versions:
        ctx.versions[key] = _VERSION_POOL.submit(_version_of, ctx.connection,
                                                 spec.version_command())
    return ctx.versions[key]


def _parse_and_store(run: ProbeRun, raw: bytes) -> list[Measurement]:
    try:
        parsed = parse_output(run.parser, raw)
    except ParseError as error:
        run.state, run.error_kind, run.error = ProbeRun.State.FAILED, "parse", str(error)
        run.save(update_fields=["state", "error_kind", "error"])
        return []
    rows = Measurement.objects.bulk_create(
        Measurement(gate_run_id=run.gate_run_id, probe_run=run, node=run.node,
                    metric=m.metric, value=m.value, unit=m.unit,
                    labels={**m.labels, **run.labels}, arm=run.arm)
        for m in parsed
    )
    run.state = ProbeRun.State.PARSED
    run.save(update_fields=["state"])
    return rows


def _exit_error(exit_code: int | None, stderr: bytes) -> tuple[str, str]:
    tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
    detail = " | ".join(tail)
    if exit_code == 127:
        return "command_not_found", f"command not found on the node (exit 127): {detail}"
    if exit_code in (124, 137):
        return "timeout", f"stopped by the node-side timeout (exit {exit_code}): {detail}"
    return "exit_status", f"exited with status {exit_code}: {detail}"


def _fold_output(run: ProbeRun, recorder: OutputRecorder, stdout: bytes, stderr: bytes) -> None:
    """The full raw output replaces the live chunks (one copy kept), capped as stated."""
    run.stdout = stdout[:OUTPUT_CAP_BYTES]
    run.stderr = stderr[:OUTPUT_CAP_BYTES]
    run.stdout_size, run.stderr_size = len(run.stdout), len(run.stderr)
    run.stdout_sha256 = _sha256(bytes(run.stdout))
    run.simulated = SIMULATED_MARKER.encode() in run.stderr
    run.progress = recorder.progress
    OutputChunk.objects.filter(probe_run=run).delete()


def _kill_remote(ctx: _JobContext, run: ProbeRun) -> str:
    """Kill the run's process group on the node; returns what the node said (gone/absent)."""
    try:
        result = ctx.connection.run(kill_command(run.remote_token, sudo=ctx.job.node.use_sudo),
                                    timeout=20)
        said = result.stdout.decode(errors="replace").strip() or f"exit {result.exit_code}"
        return said if result.exit_code == 0 else f"NOT confirmed gone: {said}"
    except TransportError as error:
        return f"NOT confirmed gone: {error}"


def probe_run_execute(*, ctx: _JobContext, spec: Probe, values: dict,
                      labels: dict | None = None, arm: str = "",
                      cancellable: bool = True) -> ProbeRun:
    """Run one probe on the job's node: output stored as it arrives, the raw output and its hash
    kept before anything is parsed, then parsed.

    ``labels`` are added to every measurement of the run, ``arm`` names its G3 tier arm.
    Raises TransportError (after recording it) when the node cannot be used any more, and
    CommandCancelled when the gate run was cancelled (the remote command killed first).
    """
    job = ctx.job
    node = job.node
    override = job.gate_run.probe_timeouts.get(spec.name)
    run = ProbeRun(gate_run=job.gate_run, node=node, probe=spec.name, parser=spec.parser,
                   parser_version=PARSERS[spec.parser].PARSER_VERSION, parameters=dict(values),
                   labels=dict(labels or {}), arm=arm,
                   started_at=timezone.now(), origin=GateRun.Origin.SSH)
    try:
        run.command = spec.command(values, sudo=node.use_sudo, timeout_s=override)
    except ProbeParameterError as error:
        run.state, run.error_kind, run.error = ProbeRun.State.FAILED, "parameters", str(error)
        run.finished_at = run.started_at
        run.save()
        return run
    version = _tool_version(ctx, spec)
    run.save()
    run.remote_token = f"pr-{run.id}-{secrets.token_hex(4)}"
    run.save(update_fields=["remote_token"])
    sent = spec.command(values, sudo=node.use_sudo, timeout_s=override, token=run.remote_token)
    recorder = OutputRecorder(run, job, spec.progress, cancellable=cancellable)
    seconds = (override or spec.timeout_s) + 15
    fields = ["exit_code", "stdout", "stderr", "stdout_sha256", "finished_at", "simulated",
              "state", "error_kind", "error", "tool_version", "stdout_size", "stderr_size",
              "progress"]
    try:
        result = ctx.connection.run(sent, timeout=seconds, on_output=recorder.on_output,
                                    on_tick=recorder.on_tick)
    except TransportError as error:
        recorder.flush()
        stdout = b"".join(bytes(c.data) for c in run.chunks.filter(stream="stdout"))
        stderr = b"".join(bytes(c.data) for c in run.chunks.filter(stream="stderr"))
        _fold_output(run, recorder, stdout, stderr)
        run.finished_at = timezone.now()
        run.tool_version = version.result()
        run.error_kind, run.error = error.kind, str(error)
        run.state = ProbeRun.State.FAILED
        if isinstance(error, CommandCancelled | CommandTimeout):
            said = _kill_remote(ctx, run)
            run.error = f"{error}; remote process group: {said}"
            if isinstance(error, CommandCancelled):
                run.state = ProbeRun.State.CANCELLED
        run.save(update_fields=fields)
        raise
    recorder.flush()
    run.tool_version = version.result()
    run.exit_code = result.exit_code
    run.finished_at = result.finished_at
    _fold_output(run, recorder, result.stdout, result.stderr)
    if result.exit_code != 0 and cancellable and cancel_requested(run.gate_run_id):
        # The canceller killed it on the node before this worker noticed the request.
        run.state, run.error_kind = ProbeRun.State.CANCELLED, "cancelled"
        run.error = f"cancelled: the remote command ended with status {result.exit_code}"
        run.save(update_fields=fields)
        raise CommandCancelled(f"{node.name}: {spec.name} cancelled")
    if recorder.capped:
        run.state, run.error_kind = ProbeRun.State.FAILED, "output_cap"
        run.error = f"output exceeded the stored cap of {OUTPUT_CAP_BYTES >> 20} MiB per stream"
    elif result.exit_code is None or not spec.parse_exit(result.exit_code):
        run.state = ProbeRun.State.FAILED
        run.error_kind, run.error = _exit_error(result.exit_code, result.stderr)
    else:
        run.state = ProbeRun.State.PARSING
    run.save(update_fields=fields)
    if run.state == ProbeRun.State.PARSING:
        _parse_and_store(run, bytes(run.stdout))
    return run


def _plan_values(step: dict, spec: Probe, node: Node, gate_run: GateRun | None) -> dict:
    values = dict(step.get("params") or {})
    for param, field in spec.node_params.items():
        values[param] = getattr(node, field) or None
    if "result_dir" in spec.params:  # per run over SSH; one fixed place for collection scripts
        run_dir = f"gate-run-{gate_run.id}" if gate_run else "collected"
        # Per node too: lab nodes (and nodes with a shared home) share one filesystem.
        values["result_dir"] = f"{RESULT_ROOT}/{run_dir}/{node.name}"
    return values


def _for_each_values(job: NodeJob, rule: dict) -> list[str]:
    labels = Measurement.objects.filter(
        gate_run=job.gate_run, node=job.node, metric=rule["metric"]
    ).values_list("labels", flat=True)
    return sorted({lab[rule["label"]] for lab in labels if rule["label"] in lab})


def node_job_execute(*, node_job_id: int) -> None:
    """Claim and run one node's part of a gate run; the last job to finish evaluates the gate.

    A duplicate delivery finds the job claimed and does nothing. The job heartbeats while it
    runs (``recover_lost_jobs`` fails jobs whose worker died).
    """
    now = timezone.now()
    claimed = NodeJob.objects.filter(id=node_job_id, state=NodeJob.State.QUEUED).update(
        state=NodeJob.State.CONNECTING, started_at=now, heartbeat_at=now
    )
    if not claimed:
        logger.info("node job %s already claimed; duplicate delivery ignored", node_job_id)
        return
    job = NodeJob.objects.select_related("node__credential", "gate_run__gate").get(id=node_job_id)
    gate_run = job.gate_run
    steps = node_steps(gate_run.gate, job.node)
    pending: dict[tuple, tuple] = {}  # undo steps owed: (probe, parameters) -> (spec, values)
    try:
        with SSHConnection(node_target(job.node)) as connection:
            NodeJob.objects.filter(id=job.id).update(state=NodeJob.State.RUNNING,
                                                     heartbeat_at=timezone.now())
            ctx = _JobContext(job, connection, {})
            try:
                for step in steps:
                    if cancel_requested(gate_run.id):
                        raise CommandCancelled("cancelled before the next probe")
                    spec = probe(step["probe"])
                    values = _plan_values(step, spec, job.node, gate_run)
                    rule = step.get("for_each")
                    tags = {"labels": step.get("labels") or {}, "arm": step.get("arm", "")}
                    if rule:
                        for item in _for_each_values(job, rule):
                            probe_run_execute(ctx=ctx, spec=spec, **tags,
                                              values={**values, rule["param"]: item})
                    else:
                        _track_cleanup(pending, spec, values, probe_run_execute(
                            ctx=ctx, spec=spec, values=values, **tags))
                    heartbeat(job)
            finally:
                # Undo steps still owed (an engine a cancelled arm left running), on the same
                # connection while it is open.
                _run_cleanups(ctx, pending)
        job.state = NodeJob.State.DONE
    except CommandCancelled as error:
        job.state, job.error_kind, job.error = NodeJob.State.CANCELLED, "cancelled", str(error)
    except TransportError as error:
        state = NodeJob.State.TIMED_OUT if error.kind == "timeout" else NodeJob.State.FAILED
        job.state, job.error_kind, job.error = state, error.kind, str(error)
    except Exception as error:  # recorded, never swallowed silently: the run becomes an error
        logger.exception("node job %s failed", node_job_id)
        job.state, job.error_kind = NodeJob.State.FAILED, "internal"
        job.error = f"{type(error).__name__}: {error}"
    job.finished_at = timezone.now()
    # Only a job still ours is finished here (recovery may have declared it lost meanwhile).
    NodeJob.objects.filter(id=job.id, state__in=NodeJob.ACTIVE).update(
        state=job.state, error_kind=job.error_kind, error=job.error, finished_at=job.finished_at
    )
    node_jobs_dispatch(gate_run_id=gate_run.id)
    gate_run_finish_if_complete(gate_run_id=gate_run.id)


def _track_cleanup(pending: dict, spec: Probe, values: dict, run: ProbeRun) -> None:
    """Remember the undo step a successful probe owes (a started engine must be stopped), and
    forget it once the plan itself ran that undo step with the same parameters."""
    def key(name: str, params: dict) -> tuple:
        return name, json.dumps(params, sort_keys=True, default=str)

    if spec.cleanup and run.state == ProbeRun.State.PARSED:
        undo = probe(spec.cleanup)
        undo_values = {k: v for k, v in values.items() if k in undo.params}
        pending[key(undo.name, undo_values)] = (undo, undo_values)
    pending.pop(key(spec.name, values), None)


def _run_cleanups(ctx: _JobContext, pending: dict) -> None:
    """Run the undo steps still owed (best effort, not cancellable), e.g. stop an engine that a
    cancelled or failed G3 arm left running on the node."""
    for undo, values in list(pending.values()):
        try:
            probe_run_execute(ctx=ctx, spec=undo, values=values,
                              labels={"phase": "cleanup"}, cancellable=False)
        except Exception as error:  # the connection may be what failed; the job says why
            logger.warning("cleanup %s on %s failed: %s", undo.name, ctx.job.node.name, error)
    pending.clear()


def node_jobs_dispatch(*, gate_run_id: int) -> int:
    """Send tasks for queued jobs of a run, keeping at most the site's ``max_parallel_nodes``
    in flight. Each job is sent once (claimed by a conditional update). Returns how many."""
    gate_run = GateRun.objects.select_related("gate__engagement").get(id=gate_run_id)
    if gate_run.cancel_requested_at:
        return 0
    limit = gate_run.gate.engagement.max_parallel_nodes
    sent = 0
    from runners.tasks import node_job_execute as task

    while True:
        in_flight = NodeJob.objects.filter(
            gate_run_id=gate_run_id, dispatched_at__isnull=False,
            state__in=[NodeJob.State.QUEUED, *NodeJob.ACTIVE]).count()
        if in_flight >= limit:
            return sent
        candidate = NodeJob.objects.filter(gate_run_id=gate_run_id, dispatched_at__isnull=True,
                                           state=NodeJob.State.QUEUED).order_by("id").first()
        if candidate is None:
            return sent
        if NodeJob.objects.filter(id=candidate.id, dispatched_at__isnull=True).update(
                dispatched_at=timezone.now()):
            sent += 1
            task.delay(node_job_id=candidate.id)


def gate_run_finish_if_complete(*, gate_run_id: int) -> None:
    """When every node job is done, claim evaluation once and evaluate."""
    if NodeJob.objects.filter(gate_run_id=gate_run_id,
                              state__in=[NodeJob.State.QUEUED, *NodeJob.ACTIVE]).exists():
        return
    if cancel_requested(gate_run_id):
        GateRun.objects.filter(id=gate_run_id, state=GateRun.State.RUNNING).update(
            state=GateRun.State.CANCELLED, finished_at=timezone.now()
        )
        return
    claimed = GateRun.objects.filter(id=gate_run_id, state=GateRun.State.RUNNING).update(
        state=GateRun.State.EVALUATING
    )
    if claimed:
        from runners.tasks import gate_run_evaluate

        gate_run_evaluate.delay(gate_run_id=gate_run_id)


def _evidence_errors(gate_run: GateRun) -> list[str]:
    errors = [
        f"{job.node.name}: {job.error_kind}: {job.error}"
        for job in gate_run.node_jobs.select_related("node").filter(
            state__in=[NodeJob.State.FAILED, NodeJob.State.TIMED_OUT])
    ]
    for run in evidence_probe_runs(gate_run).select_related("node").filter(
            state=ProbeRun.State.FAILED):
        where = run.node.name if run.node else "service"
        message = f"{where}: {run.probe}: {run.error_kind}: {run.error}"
        if not any(message in e for e in errors):
            errors.append(message)
    return errors


def _fail(gate_run: GateRun, reason: str) -> GateRun:
    gate_run.state, gate_run.error = GateRun.State.FAILED, reason
    gate_run.finished_at = timezone.now()
    gate_run.save(update_fields=["state", "error", "finished_at"])
    return gate_run


def _samples(gate_run: GateRun) -> list[evaluation.Sample]:
    return [
        evaluation.Sample(m.id, m.metric, m.value, m.unit, m.labels,
                          m.node.name if m.node else "")
        for m in evidence_measurements(gate_run).select_related("node")
    ]


@transaction.atomic
def _store_derived(gate_run: GateRun, samples: list[evaluation.Sample]) -> None:
    nodes = {n.name: n for n in gate_run.engagement.nodes.all()}
    # G3 (issue 4): all derivations, the aggregate read-back against each array's port.
    from gates.services import node_array_line_rates

    arrays = node_array_line_rates(engagement=gate_run.engagement)
    for d in derivations.derive_all(samples, arrays):
        row = Measurement.objects.create(
            gate_run=gate_run, node=nodes.get(d.node), metric=d.metric, value=d.value,
            unit=d.unit, labels=d.labels, derived=True,
        )
        row.inputs.set(d.input_ids)


@transaction.atomic
def _store_deviations(gate_run: GateRun, criteria, verdicts) -> None:
    """baseline_deviation (METRICS.md) for every ``within`` criterion, linked to its inputs."""
    by_key = {c.key: c for c in criteria}
    for v in verdicts:
        if v.deviation is None:
            continue
        criterion = by_key[v.key]
        row = Measurement.objects.create(
            gate_run=gate_run, metric="baseline_deviation", value=v.deviation, unit="ratio",
            labels={"figure": criterion.metric, **criterion.label_filter}, derived=True,
        )
        row.inputs.set(v.sample_ids)


def gate_run_evaluate(*, gate_run_id: int) -> GateRun:
    """Evaluate a finished run: any missing evidence makes it an error; else record the
    decision and issue the signed report."""
    from reports.services import report_issue

    gate_run = GateRun.objects.select_related("gate__engagement").get(id=gate_run_id)
    errors = _evidence_errors(gate_run)
    if errors:
        return _fail(gate_run, "the run did not produce the evidence needed to decide:\n"
                     + "\n".join(errors))
    _store_derived(gate_run, _samples(gate_run))
    criteria = list(gate_run.gate.criteria.all())
    from gates.services import criterion_spec

    specs = [criterion_spec(c) for c in criteria]
    samples = _samples(gate_run)
    verdicts = [evaluation.evaluate_criterion(spec, samples) for spec in specs]
    blocking = {s.key: s.blocking for s in specs}
    outcome = evaluation.gate_outcome(verdicts, blocking)
    if outcome == "error":  # insufficient or unstable (issue 4): no decision, says why
        return _fail(gate_run, evaluation.no_decision_reason(verdicts, blocking))
    _store_deviations(gate_run, criteria, verdicts)
    decision = decision_record(gate_run=gate_run, verdicts=verdicts, criteria=criteria,
                               outcome=outcome)
    try:
        report_issue(decision=decision)
    except Exception as error:
        logger.exception("report for decision %s failed", decision.id)
        return _fail(gate_run, f"decision recorded ({decision.outcome}) but the signed report "
                               f"could not be issued: {type(error).__name__}: {error}")
    gate_run.state, gate_run.finished_at = GateRun.State.DONE, timezone.now()
    gate_run.save(update_fields=["state", "finished_at"])
    return gate_run


__all__ = ["ConfirmationRequired", "GateRefused", "evidence_measurements", "evidence_probe_runs",
           "gate_run_evaluate", "gate_run_rerun_node", "gate_run_start", "node_job_execute"]
