"""Stopping runs: cancel by a person, and recovery of runs whose worker died.

``gate_run_cancel`` marks the run cancelled-by-whom, kills every running probe's process group on
its node (confirmed gone, RUNBOOK-style ``kill`` of the group), and settles jobs no live worker
is executing. ``recover_lost_jobs`` finds jobs whose worker stopped sending heartbeats (a worker
killed with SIGKILL, a machine that rebooted), kills what they left running on the node and
fails them with the reason, so no run stays "running" forever. Neither ever re-runs a probe.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from acceptance import events
from runners.dispatch import gate_run_finish_if_complete
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
        with SSHConnection(run.node.ssh_target()) as connection:
            result = connection.run(kill_command(run.remote_token, sudo=run.node.use_sudo),
                                    timeout=20)
    except TransportError as error:
        return f"NOT confirmed gone ({error})"
    said = result.stdout.decode(errors="replace").strip()
    return said if result.exit_code == 0 else f"NOT confirmed gone ({said})"


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
        reason = (f"lost: no heartbeat from its worker since {job.heartbeat_at:%Y-%m-%d %H:%M:%S} "
                  f"UTC (worker stopped or killed); not re-run automatically")
        if not NodeJob.objects.filter(id=job.id, state__in=NodeJob.ACTIVE,
                                      heartbeat_at__lt=cutoff).update(
                state=NodeJob.State.FAILED, error_kind="lost", error=reason,
                finished_at=timezone.now()):
            continue  # it came back to life or someone else recovered it
        for run in job.gate_run.probe_runs.select_related("node__credential").filter(
                node=job.node, state__in=[ProbeRun.State.RUNNING, ProbeRun.State.PARSING]):
            said = _kill(run) if run.state == ProbeRun.State.RUNNING else "was parsing"
            ProbeRun.objects.filter(id=run.id).update(
                state=ProbeRun.State.FAILED, error_kind="lost", finished_at=timezone.now(),
                error=f"{reason}; remote process group: {said}")
        lines.append(f"{job.gate_run} on {job.node.name}: {reason}")
        events.announce(events.run_lost, node_job_id=job.id)  # notifications
        logger.warning("recovered lost node job %s: %s", job.id, reason)
        gate_run_finish_if_complete(gate_run_id=job.gate_run_id)
    # A run left in "evaluating" by a worker that died while deciding: no decision was
    # recorded (that is one transaction), so it ends as an error asking for a re-run.
    for gate_run in GateRun.objects.filter(state=GateRun.State.EVALUATING, decision__isnull=True):
        last = gate_run.node_jobs.order_by("-finished_at").values_list("finished_at", flat=True)
        finished = next(iter(last), None) or gate_run.created_at
        if finished >= cutoff:
            continue
        reason = ("evaluation lost: the worker evaluating this run stopped before recording a "
                  "decision; re-run the gate")
        if GateRun.objects.filter(id=gate_run.id, state=GateRun.State.EVALUATING).update(
                state=GateRun.State.FAILED, error=reason, finished_at=timezone.now()):
            lines.append(f"{gate_run}: {reason}")
            events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications
    return lines
