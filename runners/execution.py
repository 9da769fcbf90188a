"""Execution: one node's part of a gate run, over one SSH connection.

``node_job_execute`` claims a node job, connects through the pinned host key
(``Node.ssh_target``; a connection a clean job of the same node left open is reused,
``SSH_POOL``), and runs the node's plan step by step with ``probe_run_execute``: output
stored as it arrives (``runners.live``), the raw output kept by the evidence intake
(``runners.intake``) before anything is parsed. A cancelled or timed-out command has its remote
process group killed. The job then hands back to dispatch: the next queued node, and the
evaluation once every job is over.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NoReturn

from django.conf import settings
from django.db import Error as DatabaseError  # any driver fault: also InterfaceError
from django.db import connection as db_connection
from django.utils import timezone

from acceptance.logging import log_context_add
from acceptance.models import Node
from runners import intake, ledger
from runners.barrier import BarrierBroken, barrier_wait
from runners.control import kill_fresh
from runners.dispatch import gate_run_finish_if_complete, node_jobs_dispatch
from runners.doorbell import BrokerUnavailable
from runners.lease import (
    LeaseLost,
    database_fault,
    db_retry,
    first_line,
    held,
    job_claim,
    job_settle,
    lease_renew,
)
from runners.live import OutputRecorder, cancel_requested, heartbeat
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.outputs import OutputsUnwritable
from runners.parsers import PARSERS
from runners.parsers.base import MeasurementData
from runners.plans import PlanError, node_steps
from runners.probes import Probe, ProbeParameterError, kill_command, probe
from runners.probes.base import NODE_ROOT, scratch_command
from runners.transport import (
    CommandCancelled,
    CommandTimeout,
    OutputCapReached,
    SSHConnection,
    SSHPool,
    TransportError,
    Unreachable,
)

logger = logging.getLogger(__name__)

# One version query in flight per node job: with 64 job threads a worker process, a pool of 4
# queued the nodes' version queries behind each other and held their probes' results.
_VERSION_POOL = ThreadPoolExecutor(max_workers=128, thread_name_prefix="tool-version")


# Open SSH connections kept between a node's jobs (issue 17: the session's set-up is most of a
# job's fixed CPU), keyed on the node's address, user, pinned host key and credential: a job
# ended cleanly gives its connection back; any error closes it (runners.transport.pool).
SSH_POOL = SSHPool(idle_s=settings.SSH_POOL_IDLE_SECONDS,
                   max_age_s=settings.SSH_POOL_MAX_AGE_SECONDS, size=settings.SSH_POOL_SIZE,
                   check_timeout_s=settings.SSH_CONNECT_TIMEOUT)

# On the node (RUNBOOK §3.2/§3.4): each run's result directory is a ``mktemp -d`` under this
# base, which is checked first (owned by the user the probes run as, 0700, not a symlink).
RESULT_ROOT = NODE_ROOT


class ScratchRefused(Exception):
    """The node refused the run's scratch directory; the message is what the node said."""


class DatabaseLost(Exception):
    """The ledger's connection was lost during a probe: the probe run was settled (after
    reconnecting) with kind ``database`` and its remote command killed; the job ends."""


@dataclass
class _JobContext:
    job: NodeJob
    connection: SSHConnection
    versions: dict[str, Future]
    result_dir: str | None = None  # this job's scratch directory on the node, made on first need


def _version_of(connection: SSHConnection, command: str) -> str:
    try:
        result = connection.run(command, timeout=30)
    except TransportError as error:
        return f"unknown ({error.kind})"
    text = (result.stdout or result.stderr).decode(errors="replace").strip()
    return text.splitlines()[0][:200] if text else "unknown"


def _tool_version(ctx: _JobContext, spec: Probe) -> Future:
    """The tool's version, asked once per job on a second channel of its connection,
    concurrently with the probe's own command (so it costs no extra round trip). Never kept
    from an earlier job on a kept connection: a tool upgraded between two runs (an engineer's
    fix after a stop, run again at once) must be recorded as the tool that printed the output."""
    key = " ".join(spec.version_argv)
    if key not in ctx.versions:
        ctx.versions[key] = _VERSION_POOL.submit(_version_of, ctx.connection,
                                                 spec.version_command())
    return ctx.versions[key]


def _fold_output(run: ProbeRun, recorder: OutputRecorder) -> None:
    """The live files become the stored raw output (renamed to their sha256), indexed on the
    row; nothing of it is held in memory."""
    intake.raw_output_record(run, recorder.finish(), cap=recorder.cap,
                             simulated=recorder.simulated)
    run.progress = recorder.progress


def _settle(ctx: _JobContext, run: ProbeRun, recorder: OutputRecorder,
            fields: list[str], *, parse: bool = False) -> None:
    """Save the run's result — its live files renamed to their sha256 names and indexed on the
    row — while the job is still this worker's (LeaseLost otherwise), reconnecting to the
    database when its connection was lost.

    With ``parse`` the stored stdout (its file and sha256 already kept) is parsed in memory
    first, and the result, the parse's verdict and the measurements are one fenced transaction:
    one lease check, one row update and one insert. A parser that breaks unexpectedly still
    leaves the result saved (state ``parsing``, the raw output indexed) before its error goes
    on."""
    try:
        _fold_output(run, recorder)  # files only: done once, whatever the database does
    except OutputsUnwritable as error:
        _output_lost(ctx, run, recorder, fields, error)
    rows: list[MeasurementData] = []
    if parse:
        try:
            rows = intake.raw_output_read(run)
        except Exception:
            run.state = ProbeRun.State.PARSING
            _save(ctx, run, fields, [])
            raise
    _save(ctx, run, fields, rows)


def _output_lost(ctx: _JobContext, run: ProbeRun, recorder: OutputRecorder | None,
                 fields: list[str], error: OutputsUnwritable, said: str = "") -> NoReturn:
    """The outputs directory refused the run's output (full disk): its live files are removed,
    the run is saved failed with kind ``storage`` (what happened before, if anything, kept in
    its error) and the job ends: no later probe could be recorded either."""
    if recorder is not None:
        recorder.discard()
    before = f"; before that: {run.error}" if run.error else ""
    remote = f"; remote process group: {said}" if said else ""
    run.state, run.error_kind = ProbeRun.State.FAILED, "storage"
    run.error = f"{error}{remote}{before}"
    run.finished_at = run.finished_at or timezone.now()
    run.progress = recorder.progress if recorder is not None else None
    _save(ctx, run, fields, [])
    raise error


def _save(ctx: _JobContext, run: ProbeRun, fields: list[str],
          rows: list[MeasurementData]) -> None:
    def save() -> None:
        ledger.probe_run_save(run, fields, ctx.job, rows)

    db_retry(save, what=f"probe run {run.id}")


def _scratch_make(ctx: _JobContext) -> str:
    """This job's result directory: ``mktemp -d`` under the checked RESULT_ROOT, one per gate run
    and node (lab nodes share one filesystem; the node's name stays in the directory's name)."""
    node = ctx.job.node
    prefix = f"gate-run-{ctx.job.gate_run_id}-{node.name}"
    result = ctx.connection.run(scratch_command(prefix=prefix, sudo=node.use_sudo,
                                                root=RESULT_ROOT), timeout=30)
    path = result.stdout.decode(errors="replace").strip()
    if result.exit_code != 0 or not path.startswith(f"{RESULT_ROOT}/{prefix}."):
        said = (result.stderr or result.stdout).decode(errors="replace").strip()[:500]
        raise ScratchRefused(f"{node.name}: the node's scratch directory under {RESULT_ROOT} "
                             f"was refused (exit {result.exit_code}): {said or 'no reason given'}")
    return path


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
    log_context_add(probe=spec.name)
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
        with held(job):
            run.save()
        return run
    version = _tool_version(ctx, spec)
    # The token names the run's process group on the node: the job's id and 64 random bits,
    # known before the row is written, so the start is one fenced insert.
    run.remote_token = f"pr-{job.id}-{secrets.token_hex(8)}"
    # A probe starts only on a job still this worker's; a cancelled run inserts no row and
    # sends nothing to the node.
    if ledger.probe_run_start(run, job, refuse_if_cancelled=cancellable) and cancellable:
        raise CommandCancelled("cancelled before the next probe")
    sent = spec.command(values, sudo=node.use_sudo, timeout_s=override, token=run.remote_token)
    seconds = (override or spec.timeout_s) + 15
    fields = ["exit_code", "finished_at", "state", "error_kind", "error", "tool_version",
              "progress", *intake.OUTPUT_FIELDS]
    if spec.clock:
        fields.append("labels")
    try:
        recorder = OutputRecorder(run, job, spec.progress, cancellable=cancellable)
    except OutputsUnwritable as error:  # before anything was sent to the node
        run.tool_version = version.result()
        _output_lost(ctx, run, None, fields, error)
    sent_at = time.time()
    try:
        result = ctx.connection.run(sent, timeout=seconds, on_output=recorder.on_output,
                                    on_tick=recorder.on_tick, keep_output=False)
        if spec.clock:  # the SSH round trip around the node's clock reading (its skew)
            run.labels = {**run.labels, "service_sent": f"{sent_at:.6f}",
                          "service_received": f"{time.time():.6f}"}
    except OutputCapReached as error:
        run.finished_at = timezone.now()
        run.tool_version = version.result()
        said = _kill_remote(ctx, run)
        run.state, run.error_kind = ProbeRun.State.FAILED, "output_cap"
        run.error = (f"{error} ({recorder.cap / (1 << 20):g} MiB): the first {recorder.cap} "
                     f"bytes are kept and hashed, the command was stopped; remote process "
                     f"group: {said}")
        _settle(ctx, run, recorder, fields)
        return run
    except OutputsUnwritable as error:
        said = _kill_remote(ctx, run)  # it would run on unrecorded
        run.tool_version = version.result()
        _output_lost(ctx, run, recorder, fields, error, said)
    except DatabaseError as error:
        # The ledger's connection dropped while output was stored: the command is killed on
        # the node (it would run on unrecorded), then the run is settled once reconnected.
        said = _kill_remote(ctx, run)
        run.finished_at = timezone.now()
        run.tool_version = version.result()
        run.state, run.error_kind = ProbeRun.State.FAILED, "database"
        run.error = (f"{database_fault(error)} during the probe ({first_line(error)}); remote "
                     f"process group: {said}")
        _settle(ctx, run, recorder, fields)
        raise DatabaseLost(f"{node.name}: {spec.name}: {run.error}") from None
    except TransportError as error:
        run.finished_at = timezone.now()
        run.tool_version = version.result()
        run.error_kind, run.error = error.kind, str(error)
        run.state = ProbeRun.State.FAILED
        if isinstance(error, CommandCancelled | CommandTimeout):
            said = _kill_remote(ctx, run)
            run.error = f"{error}; remote process group: {said}"
            if isinstance(error, CommandCancelled):
                run.state = ProbeRun.State.CANCELLED
        elif isinstance(error, Unreachable):
            # The node's session died: the kill goes over a fresh connection.
            run.error = f"{error}; remote process group: {kill_fresh(run)}"
        _settle(ctx, run, recorder, fields)
        raise
    # No last live flush: the whole output is stored with the run (``_settle``) just below.
    run.tool_version = version.result()
    run.exit_code = result.exit_code
    run.finished_at = result.finished_at
    if result.exit_code != 0 and cancellable and cancel_requested(run.gate_run_id):
        # The canceller killed it on the node before this worker noticed the request.
        run.state, run.error_kind = ProbeRun.State.CANCELLED, "cancelled"
        run.error = f"cancelled: the remote command ended with status {result.exit_code}"
        _settle(ctx, run, recorder, fields)
        raise CommandCancelled(f"{node.name}: {spec.name} cancelled")
    if result.exit_code is None or not spec.parse_exit(result.exit_code):
        run.state = ProbeRun.State.FAILED
        run.error_kind, run.error = intake.exit_error(result.exit_code, recorder.stderr_tail)
        _settle(ctx, run, recorder, fields)
    else:  # measurements only from a job still this worker's, with the result
        _settle(ctx, run, recorder, fields, parse=True)
    return run


def plan_values(step: dict, spec: Probe, node: Node, gate_run: GateRun | None,
                *, result_dir: str | None = None) -> dict:
    """A step's parameter values on ``node``; ``result_dir`` is the run's scratch directory made
    on the node (``_scratch_make``), else one fixed place for collection scripts."""
    values = dict(step.get("params") or {})
    for param, field in spec.node_params.items():
        values[param] = getattr(node, field) or None
    if "result_dir" in spec.params:
        run_dir = f"gate-run-{gate_run.id}" if gate_run else "collected"
        # Per node too: lab nodes (and nodes with a shared home) share one filesystem.
        values["result_dir"] = result_dir or f"{RESULT_ROOT}/{run_dir}/{node.name}"
    return values


def _for_each_values(job: NodeJob, rule: dict) -> list[str]:
    """The label values a ``for_each`` step repeats over; on an array controller whose array
    names its drive model, only that model's drives (G1 self-tests the array's drives, not a
    boot SSD or a fabrics controller)."""
    labels = Measurement.objects.filter(
        gate_run=job.gate_run, node=job.node, metric=rule["metric"]
    ).values_list("labels", flat=True)
    array = job.node.array if job.node.role == job.node.Role.ARRAY else None
    model = array.drive_model if array else ""
    return sorted({lab[rule["label"]] for lab in labels if rule["label"] in lab
                   and (not model or "model" not in lab or lab["model"] == model)})


def node_job_execute(*, node_job_id: int) -> None:
    """Claim and run one node's part of a gate run; the last job to finish evaluates the gate.

    A duplicate delivery (or a re-send of a job that was claimed after all) finds the job
    claimed and does nothing. The job heartbeats while it runs (``recover_lost_jobs`` fails
    jobs whose worker died), and every step checks the job's lease (``runners.lease``): a
    worker whose job was declared lost stops there, touching neither the node nor the ledger.
    """
    # A database that refuses a connection now ('too many clients': each job thread holds one
    # while it runs) is waited for within RUNS_DB_RETRY_SECONDS, not left to the sweep's
    # re-send minutes later; only the connection is retried, never the claim.
    db_retry(db_connection.ensure_connection, what=f"node job {node_job_id}")
    if job_claim(node_job_id) is None:
        logger.info("node job %s already claimed; duplicate delivery ignored", node_job_id)
        return
    job = NodeJob.objects.select_related("node__credential", "gate_run__gate__engagement").get(
        id=node_job_id)
    gate_run = job.gate_run
    log_context_add(engagement=gate_run.gate.engagement.name, gate_run=gate_run.id,
                    node=job.node.name)
    logger.info("node job %s started", job.id)
    pending: dict[tuple, tuple] = {}  # undo steps owed: (probe, parameters) -> (spec, values)
    try:
        # a plan changed after its launch was checked: the job fails naming the step, never a
        # worker's traceback left to be declared lost
        steps = node_steps(gate_run.gate, job.node)
        with SSH_POOL.connection(job.node.ssh_target()) as connection:
            lease_renew(job, state=NodeJob.State.RUNNING)
            ctx = _JobContext(job, connection, {})
            try:
                for step in steps:
                    spec = probe(step["probe"])
                    # A probe's start reads the cancel request with its lease (``held``); a
                    # step that waits or touches the node first reads it here.
                    if (step.get("barrier") or step.get("for_each") or (
                            "result_dir" in spec.params and ctx.result_dir is None)) and \
                            cancel_requested(gate_run.id):
                        raise CommandCancelled("cancelled before the next probe")
                    if step.get("barrier"):
                        barrier_wait(job=job, name=step["barrier"])
                    if "result_dir" in spec.params and ctx.result_dir is None:
                        ctx.result_dir = _scratch_make(ctx)
                    values = plan_values(step, spec, job.node, gate_run,
                                         result_dir=ctx.result_dir)
                    rule = step.get("for_each")
                    tags = {"labels": step.get("labels") or {}, "arm": step.get("arm", "")}
                    if rule:
                        for item in _for_each_values(job, rule):
                            # Each run names its item (G1: the controller it self-tested).
                            probe_run_execute(
                                ctx=ctx, spec=spec, arm=tags["arm"],
                                labels={**tags["labels"], rule["label"]: item},
                                values={**values, rule["param"]: item})
                    else:
                        _track_cleanup(pending, spec, values, probe_run_execute(
                            ctx=ctx, spec=spec, values=values, **tags))
                    heartbeat(job)
            except LeaseLost:
                pending.clear()  # the job is not ours: no cleanup on the node either
                raise
            finally:
                # Undo steps still owed (an engine a cancelled arm left running), on the same
                # connection while it is open.
                _run_cleanups(ctx, pending)
        job.state = NodeJob.State.DONE
    except LeaseLost as error:
        logger.warning("node job %s: %s", node_job_id, error)
        return
    except CommandCancelled as error:
        job.state, job.error_kind, job.error = NodeJob.State.CANCELLED, "cancelled", str(error)
    except ScratchRefused as error:
        job.state, job.error_kind, job.error = NodeJob.State.FAILED, "scratch", str(error)
    except BarrierBroken as error:
        job.state, job.error_kind, job.error = NodeJob.State.FAILED, "barrier", str(error)
    except PlanError as error:
        job.state, job.error_kind = NodeJob.State.FAILED, "plan"
        job.error = f"the gate's probe plan: {error}"
    except TransportError as error:
        state = NodeJob.State.TIMED_OUT if error.kind == "timeout" else NodeJob.State.FAILED
        job.state, job.error_kind, job.error = state, error.kind, str(error)
    except OutputsUnwritable as error:
        job.state, job.error_kind = NodeJob.State.FAILED, "storage"
        job.error = f"{job.node.name}: {error}"
    except DatabaseLost as error:
        job.state, job.error_kind, job.error = NodeJob.State.FAILED, "database", str(error)
    except DatabaseError as error:  # between probes: nothing of the node was left running
        job.state, job.error_kind = NodeJob.State.FAILED, "database"
        job.error = f"{database_fault(error)}: {first_line(error)}"
    except Exception as error:  # recorded, never swallowed silently: the run becomes an error
        logger.exception("node job %s failed", node_job_id)
        job.state, job.error_kind = NodeJob.State.FAILED, "internal"
        job.error = f"{type(error).__name__}: {error}"
    job.finished_at = timezone.now()
    # Only a job still ours is finished here (recovery may have declared it lost meanwhile).
    if not db_retry(lambda: job_settle(job), what=f"node job {job.id}"):
        logger.warning("node job %s was settled by someone else meanwhile; its %s result is "
                       "not written", job.id, job.state)
        return
    logger.info("node job %s ended %s", job.id, job.state)
    if job.state != NodeJob.State.DONE:
        db_retry(lambda: _probe_runs_close(job), what=f"node job {job.id}")
    try:
        node_jobs_dispatch(gate_run_id=gate_run.id)
    except BrokerUnavailable as error:  # the periodic sweep sends them once it answers
        logger.warning("next node jobs of gate run %s not sent: %s", gate_run.id, error)
    gate_run_finish_if_complete(gate_run_id=gate_run.id)


def _probe_runs_close(job: NodeJob) -> int:
    """A job that ended without finishing leaves none of its probe runs running: one whose
    result could not be stored (the database refused it, the job broke between its start and
    its result) ends failed with the job's kind and words. Its remote command was killed or had
    ended (the job's own error paths kill it); its live output files stay unindexed, as a lost
    job's do."""
    return ProbeRun.objects.filter(
        gate_run_id=job.gate_run_id, node_id=job.node_id,
        state__in=[ProbeRun.State.RUNNING, ProbeRun.State.PARSING],
    ).update(state=ProbeRun.State.FAILED,
             error_kind=job.error_kind if job.error_kind in ProbeRun.ErrorKind.values
             else ProbeRun.ErrorKind.INTERNAL,
             finished_at=job.finished_at,
             error=(f"the node job ended ({job.error_kind}) before this probe's result was "
                    f"stored: {job.error}").replace("\x00", "\ufffd")[:4000])


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
        except LeaseLost:
            break
        except Exception as error:  # the connection may be what failed; the job says why
            logger.warning("cleanup %s on %s failed: %s", undo.name, ctx.job.node.name, error)
    pending.clear()
