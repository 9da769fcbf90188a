"""Dispatch: starting gate runs and their node jobs, and knowing when a run is complete.

Postgres (or SQLite) is the ledger, Celery the doorbell: ``gate_run_start`` writes the run and
one ``NodeJob`` per node, then rings one task per job on commit (``runners.doorbell``). Each task
claims its job with a conditional update (a duplicate delivery does nothing) and runs it
(``runners.execution``); the last job to finish rings the evaluation (``runners.decision``).
Nothing that ran on a node is retried automatically: a re-run is a new ``GateRun`` attempt.
"""

from __future__ import annotations

import json
import logging
import threading

from django.db import connection, transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.translation import gettext as _

from acceptance.models import AuditEntry, Engagement
from gates.models import Gate
from gates.services import GateRefused, gate_check_runnable
from runners import intake
from runners.barrier import barrier_capacity_check
from runners.doorbell import BrokerUnavailable, ring, rings_in_process
from runners.live import cancel_requested
from runners.models import GateRun, NodeJob, ProbeRun
from runners.outputs import OutputsUnwritable
from runners.parsers import PARSERS

SERVICE_VERSION = "acceptance-service 0.1.0"
logger = logging.getLogger(__name__)


def _bom_snapshot(engagement: Engagement) -> bytes:
    items = [
        {"position": i.position, "description": i.description, "quantity": i.quantity,
         "ticked_by": i.ticked_by, "ticked_at": i.ticked_at.isoformat() if i.ticked_at else None}
        for i in engagement.bom_items.all()
    ]
    return json.dumps({"engagement": engagement.name, "items": items}, indent=1).encode()


def service_probe_run(*, gate_run: GateRun, probe_name: str) -> None:
    """Evidence the service holds itself (the BOM checklist), stored like any probe run."""
    raw = _bom_snapshot(gate_run.engagement)
    now = timezone.now()
    run = ProbeRun(
        gate_run=gate_run, node=None, probe=probe_name, parser=probe_name,
        parser_version=PARSERS[probe_name].PARSER_VERSION,
        command="snapshot of the bill-of-materials checklist", tool_version=SERVICE_VERSION,
        exit_code=0, started_at=now, finished_at=now,
    )
    try:
        intake.raw_output_keep(run, stdout=raw, stderr=b"", simulated=False)
    except OutputsUnwritable as error:  # a full disk: no run starts that could not be recorded
        raise GateRefused(_("%(gate)s: the bill-of-materials snapshot could not be stored: "
                            "%(error)s; nothing was started.") % {
            "gate": gate_run.gate.code, "error": error}) from None
    run.save()
    intake.raw_output_parse(run)


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
    decision = gate.decisions.reported().order_by("-decided_at", "-id").first()
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
            service_probe_run(gate_run=gate_run, probe_name=step["probe"])
    return gate_run


@transaction.atomic
def gate_run_start(*, gate: Gate, started_by: str,
                   probe_timeouts: dict[str, int] | None = None, reason: str = "",
                   confirmed: bool = False) -> GateRun:
    """Create a run of ``gate`` and dispatch one Celery task per node (on commit), at most the
    site's ``max_parallel_nodes`` at once. ``probe_timeouts`` overrides probe timeouts (s).

    A gate that has passed runs again only with ``confirmed=True`` and a ``reason`` (recorded
    in the audit trail with who and the decision it may replace).

    Raises GateRefused when the gate may not run (order, stopped engagement, missing nodes,
    more nodes in a step they start at the same time than can run at once: runners.barrier),
    ConfirmationRequired (a GateRefused) for a passed gate without confirmation and reason;
    nothing is created then.
    """
    gate.refresh_from_db(from_queryset=Gate.objects.select_for_update())  # locked, read once
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
    barrier_capacity_check(gate=gate, nodes=nodes)
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


#: Set while this thread is inside ``node_jobs_dispatch``. With tasks run in-process (the
#: embedded default) a sent job runs inside the send, and its end asks for the next job: without
#: this, every node would nest one call deeper (a 128-node run ended in RecursionError); with it,
#: the inner call returns and the outer loop sends the next job.
_dispatching = threading.local()


def node_jobs_dispatch(*, gate_run_id: int) -> int:
    """Send tasks for queued jobs of a run, keeping at most the site's ``max_parallel_nodes``
    in flight. Each job is sent once (claimed by a conditional update). Returns how many.

    A broker that does not take a task raises BrokerUnavailable (with the run's id) and leaves
    that job unsent (``dispatched_at`` empty again), so it is sent later or settled."""
    if getattr(_dispatching, "active", False):
        return 0  # in-process: the loop below, further up this thread's stack, sends the next
    _dispatching.active = True
    try:
        return _node_jobs_send(gate_run_id)
    finally:
        _dispatching.active = False


# Claims the next ``room`` unsent jobs of a run, in id order, in one statement (issue 17: a
# 128-node run counted, read and claimed its jobs one by one, three statements a node); a job
# another dispatcher claimed meanwhile is left out (its row no longer matches), so the ids
# returned are the ones this call must send.
_CLAIM_SQL = (
    'UPDATE "runners_nodejob" SET "dispatched_at" = %s, "sends" = "sends" + 1 '
    'WHERE "dispatched_at" IS NULL AND "state" = %s AND "id" IN ('
    'SELECT "id" FROM "runners_nodejob" WHERE "gate_run_id" = %s AND "dispatched_at" IS NULL '
    'AND "state" = %s ORDER BY "id" LIMIT %s) RETURNING "id"'
)


def _jobs_claim(gate_run_id: int, room: int) -> list[int]:
    """Mark up to ``room`` queued, unsent jobs of the run as sent; their ids, in order."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    queued = str(NodeJob.State.QUEUED)
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [now, queued, gate_run_id, queued, room])
        return sorted(row[0] for row in cursor.fetchall())


def _node_jobs_send(gate_run_id: int) -> int:
    unsent = NodeJob.objects.filter(gate_run_id=gate_run_id, dispatched_at__isnull=True,
                                    state=NodeJob.State.QUEUED)
    if not unsent.exists():  # every job's end asks: one query when nothing waits (issue 17)
        return 0
    gate_run = GateRun.objects.select_related("gate__engagement").get(id=gate_run_id)
    if gate_run.cancel_requested_at:
        return 0
    limit = gate_run.gate.engagement.max_parallel_nodes
    sent = 0
    while True:
        in_flight = NodeJob.objects.filter(
            gate_run_id=gate_run_id, dispatched_at__isnull=False,
            state__in=[NodeJob.State.QUEUED, *NodeJob.ACTIVE]).count()
        if in_flight >= limit:
            return sent
        # In-process a ring runs its job inside the call: one claimed at a time, so no job
        # waits marked as sent behind another's whole run (the sweep would send it again).
        wanted = 1 if rings_in_process() else limit - in_flight
        claimed = _jobs_claim(gate_run_id, wanted)
        if not claimed:
            return sent
        for index, job_id in enumerate(claimed):
            try:
                ring("runners.node_job_execute", node_job_id=job_id)
            except BrokerUnavailable as error:
                # this job and the claimed ones after it were not sent: unsent again
                NodeJob.objects.filter(id__in=claimed[index:], state=NodeJob.State.QUEUED).update(
                    dispatched_at=None, sends=F("sends") - 1)
                raise BrokerUnavailable(str(error), gate_run_id=gate_run_id) from None
            sent += 1
        if len(claimed) < wanted:  # none was left unsent: no second count and claim
            return sent


# Whether a gate run still has a node job to run or running: asked at the end of every job
# (issue 17: as SQL, without the ORM building it each time).
_JOBS_LEFT_SQL = (
    'SELECT 1 FROM "runners_nodejob" WHERE "runners_nodejob"."gate_run_id" = %s AND '
    '"runners_nodejob"."state" IN (%s, %s, %s) LIMIT 1'
)


def gate_run_finish_if_complete(*, gate_run_id: int) -> None:
    """When every node job is done, claim evaluation once and evaluate."""
    with connection.cursor() as cursor:
        cursor.execute(_JOBS_LEFT_SQL, [gate_run_id, str(NodeJob.State.QUEUED),
                                        *map(str, NodeJob.ACTIVE)])
        if cursor.fetchone() is not None:
            return
    if cancel_requested(gate_run_id):
        GateRun.objects.filter(id=gate_run_id, state=GateRun.State.RUNNING).update(
            state=GateRun.State.CANCELLED, finished_at=timezone.now()
        )
        return
    claimed = GateRun.objects.filter(id=gate_run_id, state=GateRun.State.RUNNING).update(
        state=GateRun.State.EVALUATING, evaluation_sent_at=timezone.now(),
        evaluation_sends=F("evaluation_sends") + 1,
    )
    if claimed:
        evaluation_send(gate_run_id=gate_run_id)


def evaluation_send(*, gate_run_id: int) -> bool:
    """Ring the evaluation of an evaluating run. When the broker does not take it, the run
    stays ``evaluating`` with ``evaluation_sent_at`` empty — its evidence kept — and the
    periodic sweep (``runners.control.evaluations_settle``) sends it again."""
    try:
        ring("runners.gate_run_evaluate", gate_run_id=gate_run_id)
        return True
    except BrokerUnavailable as error:
        logger.warning("evaluation of gate run %s not sent: %s", gate_run_id, error)
        GateRun.objects.filter(id=gate_run_id, state=GateRun.State.EVALUATING).update(
            evaluation_sent_at=None, evaluation_sends=F("evaluation_sends") - 1)
        return False


def gate_run_unsent_fail(*, gate_run_id: int, reason: str) -> None:
    """A run whose tasks the broker refused as it started ends at once as an error: its jobs
    still queued are failed (kind ``broker``; a task that did get through finds its job
    settled and does nothing), so no half-dispatched run blocks the gate."""
    now = timezone.now()
    NodeJob.objects.filter(gate_run_id=gate_run_id, state=NodeJob.State.QUEUED).update(
        state=NodeJob.State.FAILED, error_kind="broker", finished_at=now,
        error=f"not started: {reason}")
    if NodeJob.objects.filter(gate_run_id=gate_run_id, state__in=NodeJob.ACTIVE).exists():
        return  # a job that got through runs on; the run ends when it does
    GateRun.objects.filter(id=gate_run_id, state=GateRun.State.RUNNING).update(
        state=GateRun.State.FAILED, finished_at=now,
        error=f"not started: {reason}; nothing ran on the nodes — start the gate again once "
              f"the broker answers")
