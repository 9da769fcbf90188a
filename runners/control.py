"""Stopping runs: cancel by a person, and recovery of runs whose worker died.

``gate_run_cancel`` marks the run cancelled-by-whom, kills every running probe's process group on
its node (confirmed gone, RUNBOOK-style ``kill`` of the group), and settles jobs no live worker
is executing. ``recover_lost_jobs`` finds jobs whose worker stopped sending heartbeats (a worker
killed with SIGKILL, a machine that rebooted), kills what they left running on the node and
fails them with the reason, so no run stays "running" forever. Neither ever re-runs a probe.

What the broker lost is settled by the sweep too: ``unclaimed_jobs_resend`` sends again a job
sent but never claimed (it never started on the node), ``running_runs_settle`` sends jobs whose
send was refused and evaluates runs whose jobs are all over, ``evaluations_settle`` sends the
evaluation of a run left ``evaluating`` without a decision (evidence kept).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from acceptance import events
from runners.dispatch import evaluation_send, gate_run_finish_if_complete, node_jobs_dispatch
from runners.doorbell import BrokerUnavailable, queue_waiting, ring
from runners.models import GateRun, NodeJob, ProbeRun
from runners.probes import kill_command
from runners.transport import SSHConnection, TransportError

logger = logging.getLogger(__name__)

def lost_after() -> timedelta:
    """How long without a heartbeat makes a job lost (heartbeats come every few seconds)."""
    return timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS)


@dataclass
class CancelReport:
    gate_run: GateRun
    killed: list[str] = field(default_factory=list)
    already_over: bool = False


def _kill(run: ProbeRun) -> str:
    """Kill a probe run's process group on its node over a fresh connection."""
    if not run.remote_token:
        return "nothing started on the node"
    try:
        # One retry at most: a node that went away is not waited for (the sweep says so).
        target = replace(run.node.ssh_target(), connect_retries=1)
        with SSHConnection(target) as connection:
            result = connection.run(kill_command(run.remote_token, sudo=run.node.use_sudo),
                                    timeout=20)
    except TransportError as error:
        return f"NOT confirmed gone ({error})"
    said = result.stdout.decode(errors="replace").strip()
    return said if result.exit_code == 0 else f"NOT confirmed gone ({said})"


def kill_fresh(run: ProbeRun) -> str:
    """Kill ``run``'s process group on its node over a fresh connection (the job's own session
    died); what the node said, or why it is not confirmed gone."""
    return _kill(run)


def _killed_by_its_job(run: ProbeRun) -> str:
    """What the probe run's own node job recorded when it saw the cancel request first and
    killed the process group on the node itself ("" when it did not)."""
    error = ProbeRun.objects.filter(id=run.id, state=ProbeRun.State.CANCELLED).values_list(
        "error", flat=True).first() or ""
    _, mark, said = error.rpartition("remote process group: ")
    return "gone (killed by its node job, which saw the request first)" \
        if mark and said == "gone" else ""


def gate_run_cancel(*, gate_run: GateRun, cancelled_by: str, wait_s: float = 30.0) -> CancelReport:
    """Cancel ``gate_run``: record who, kill its running remote commands (confirmed), and wait up
    to ``wait_s`` for its workers to stop; jobs no worker settles by then are settled here."""
    report = CancelReport(gate_run)
    updated = GateRun.objects.filter(
        id=gate_run.id, state__in=[GateRun.State.QUEUED, GateRun.State.RUNNING],
        cancel_requested_at__isnull=True,
    ).update(cancel_requested_at=timezone.now(), cancel_requested_by=cancelled_by)
    gate_run.refresh_from_db()
    if not updated and not gate_run.cancel_requested_at:
        report.already_over = True
        return report
    NodeJob.objects.filter(gate_run=gate_run, state=NodeJob.State.QUEUED).update(
        state=NodeJob.State.CANCELLED, error_kind="cancelled", finished_at=timezone.now(),
        error=f"cancelled by {cancelled_by} before it started",
    )
    for run in gate_run.probe_runs.select_related("node__credential").filter(
            state=ProbeRun.State.RUNNING, node__isnull=False):
        said = _kill(run)
        if said == "absent":  # its own node job, which reads the request every second, may
            said = _killed_by_its_job(run) or said  # have killed it first (and said so)
        report.killed.append(f"{run.node.name}: {run.probe} (probe run {run.id}): {said}")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and gate_run.node_jobs.filter(
            state__in=NodeJob.ACTIVE).exists():
        time.sleep(0.2)
    now = timezone.now()
    for run in gate_run.probe_runs.filter(state=ProbeRun.State.RUNNING):
        ProbeRun.objects.filter(id=run.id, state=ProbeRun.State.RUNNING).update(
            state=ProbeRun.State.CANCELLED, error_kind="cancelled", finished_at=now,
            error=f"cancelled by {cancelled_by}; no worker settled it")
    NodeJob.objects.filter(gate_run=gate_run, state__in=NodeJob.ACTIVE).update(
        state=NodeJob.State.CANCELLED, error_kind="cancelled", finished_at=now,
        error=f"cancelled by {cancelled_by}; no worker settled it")
    gate_run_finish_if_complete(gate_run_id=gate_run.id)
    gate_run.refresh_from_db()
    return report


def recover_lost_jobs(*, after: timedelta | None = None) -> list[str]:
    """Fail jobs whose worker stopped heartbeating; kill what they left on the node (soaks are
    re-attached by ``runners.launch.runs_recover``, which calls this too).

    Returns one line per recovered job. Safe to call from anywhere, any number of times.
    """
    cutoff = timezone.now() - (after if after is not None else lost_after())
    lines = []
    for job in NodeJob.objects.select_related("node__credential").filter(
            state__in=NodeJob.ACTIVE, heartbeat_at__lt=cutoff):
        # stored after the kind "lost" (pages and run_gate show "lost: …" once)
        words = (f"no heartbeat from its worker since {job.heartbeat_at:%Y-%m-%d %H:%M:%S} "
                 f"UTC (worker stopped or killed); not re-run automatically")
        reason = f"lost: {words}"
        if not NodeJob.objects.filter(id=job.id, state__in=NodeJob.ACTIVE,
                                      heartbeat_at__lt=cutoff).update(
                state=NodeJob.State.FAILED, error_kind="lost", error=words,
                finished_at=timezone.now()):
            continue  # it came back to life or someone else recovered it
        for run in job.gate_run.probe_runs.select_related("node__credential").filter(
                node=job.node, state__in=[ProbeRun.State.RUNNING, ProbeRun.State.PARSING]):
            said = _kill(run) if run.state == ProbeRun.State.RUNNING else "was parsing"
            ProbeRun.objects.filter(id=run.id).update(
                state=ProbeRun.State.FAILED, error_kind="lost", finished_at=timezone.now(),
                error=f"{words}; remote process group: {said}")
        lines.append(f"{job.gate_run} on {job.node.name}: {reason}")
        events.announce(events.run_lost, node_job_id=job.id)  # notifications
        logger.warning("recovered lost node job %s: %s", job.id, reason)
        gate_run_finish_if_complete(gate_run_id=job.gate_run_id)
    return lines


def unclaimed_after() -> timedelta:
    """How long a sent node job may wait unclaimed before it is sent again."""
    return timedelta(seconds=settings.RUNS_UNCLAIMED_AFTER_SECONDS)


def unclaimed_jobs_resend() -> list[str]:
    """Jobs the broker lost: sent, never claimed within ``RUNS_UNCLAIMED_AFTER_SECONDS``.

    Each is sent again (it never started on the node, and a second delivery of one that was
    claimed after all does nothing), at most ``RUNS_RESEND_MAX`` times. After the last send
    has waited its bound too, a job is failed with the reason — unless messages still wait in
    the broker's queue (the workers are busy, the job may be one of them: it waits on). Jobs
    whose send the broker refused (``dispatched_at`` empty) are sent when it answers again.
    One line per job re-sent or failed.
    """
    lines: list[str] = []
    cutoff = timezone.now() - unclaimed_after()
    stale = list(NodeJob.objects.select_related("node").filter(
        state=NodeJob.State.QUEUED, dispatched_at__lt=cutoff,
        gate_run__state=GateRun.State.RUNNING, gate_run__cancel_requested_at__isnull=True))
    waiting = queue_waiting() if stale else None
    for job in stale:
        if job.sends <= settings.RUNS_RESEND_MAX:
            if not NodeJob.objects.filter(id=job.id, state=NodeJob.State.QUEUED,
                                          dispatched_at=job.dispatched_at).update(
                    dispatched_at=timezone.now(), sends=F("sends") + 1):
                continue
            try:
                ring("runners.node_job_execute", node_job_id=job.id)
            except BrokerUnavailable as error:
                NodeJob.objects.filter(id=job.id, state=NodeJob.State.QUEUED).update(
                    dispatched_at=None, sends=F("sends") - 1)
                lines.append(f"{job.gate_run} on {job.node.name}: not re-sent: {error}")
                continue
            lines.append(f"{job.gate_run} on {job.node.name}: re-sent (never claimed within "
                         f"{unclaimed_after().total_seconds():g} s; send {job.sends + 1})")
            continue
        if waiting:
            continue  # busy workers: the broker still holds messages, this one may be there
        reason = (f"never started: sent {job.sends} times, and no worker claimed it within "
                  f"{unclaimed_after().total_seconds():g} s of any send (are workers running, "
                  f"does the broker keep its messages?); nothing ran on the node — re-run "
                  f"the gate")
        if NodeJob.objects.filter(id=job.id, state=NodeJob.State.QUEUED).update(
                state=NodeJob.State.FAILED, error_kind="unclaimed", error=reason,
                finished_at=timezone.now()):
            lines.append(f"{job.gate_run} on {job.node.name}: {reason}")
            gate_run_finish_if_complete(gate_run_id=job.gate_run_id)
    return lines


def running_runs_settle() -> list[str]:
    """Running runs the broker left stalled: jobs whose send was refused are sent now, and a
    run whose jobs are all over is taken to its evaluation (its last job's worker could not
    ring it). One line per run moved on."""
    lines = []
    # Runs of node jobs only: a soak's run (no node jobs) is its driver's, an imported one
    # its import's.
    for gate_run in GateRun.objects.filter(
            state=GateRun.State.RUNNING, cancel_requested_at__isnull=True,
            origin=GateRun.Origin.SSH, node_jobs__isnull=False).distinct():
        jobs = gate_run.node_jobs
        if jobs.filter(state=NodeJob.State.QUEUED, dispatched_at__isnull=True).exists():
            try:
                sent = node_jobs_dispatch(gate_run_id=gate_run.id)
            except BrokerUnavailable as error:
                lines.append(f"{gate_run}: queued jobs not sent: {error}")
                continue
            if sent:
                lines.append(f"{gate_run}: {sent} queued job(s) sent")
        elif not jobs.filter(state__in=[NodeJob.State.QUEUED, *NodeJob.ACTIVE]).exists():
            gate_run_finish_if_complete(gate_run_id=gate_run.id)
            lines.append(f"{gate_run}: every job over; evaluation claimed")
    return lines


def evaluations_settle(*, after: timedelta | None = None) -> list[str]:
    """Evaluating runs with no decision yet. Evaluation not sent (the broker was down when the
    last job finished): sent now, the evidence kept. Sent, but no decision recorded within
    the lost bound (a message lost with the broker, a worker that died while deciding —
    deciding is one transaction, so nothing half-done stays): sent again, up to
    ``RUNS_RESEND_MAX`` times; then — with nothing waiting in the broker's queue — the run
    ends as an error that says so."""
    lines = []
    bound = after if after is not None else lost_after()
    cutoff = timezone.now() - bound
    evaluating = GateRun.objects.filter(state=GateRun.State.EVALUATING, decision__isnull=True)
    for gate_run in evaluating.filter(node_jobs__isnull=True, created_at__lt=cutoff):
        # Not a run of node jobs (a soak's, an import's): its own door evaluates it; one left
        # evaluating past the bound ends as an error, as before.
        reason = ("evaluation lost: the worker evaluating this run stopped before recording a "
                  "decision; re-run the gate")
        if GateRun.objects.filter(id=gate_run.id, state=GateRun.State.EVALUATING).update(
                state=GateRun.State.FAILED, error=reason, finished_at=timezone.now()):
            lines.append(f"{gate_run}: {reason}")
            events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
    for gate_run in evaluating.filter(origin=GateRun.Origin.SSH,
                                      node_jobs__isnull=False).distinct():
        if gate_run.evaluation_sent_at is None or (
                gate_run.evaluation_sent_at < cutoff
                and gate_run.evaluation_sends <= settings.RUNS_RESEND_MAX):
            if GateRun.objects.filter(
                    id=gate_run.id, state=GateRun.State.EVALUATING,
                    evaluation_sent_at=gate_run.evaluation_sent_at).update(
                    evaluation_sent_at=timezone.now(),
                    evaluation_sends=F("evaluation_sends") + 1):
                sent = evaluation_send(gate_run_id=gate_run.id)
                lines.append(f"{gate_run}: evaluation " + ("sent again" if sent else
                                                           "not sent: the broker is down"))
            continue
        if gate_run.evaluation_sent_at >= cutoff or queue_waiting():
            continue  # maybe still deciding, or waiting behind busy workers
        reason = (f"evaluation lost: sent {gate_run.evaluation_sends} times and no decision "
                  f"was recorded within {bound.total_seconds():g} s of any send; the evidence "
                  f"is kept — re-run the gate")
        if GateRun.objects.filter(id=gate_run.id, state=GateRun.State.EVALUATING).update(
                state=GateRun.State.FAILED, error=reason, finished_at=timezone.now()):
            lines.append(f"{gate_run}: {reason}")
            events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
    return lines
