"""Launching a gate: the one door every launcher uses (``run_gate``, the API, the web pages).

``gate_launch`` checks the launch's parameters against the gate (probe timeout overrides: known
probes that this gate runs, 1 … 604800 s; none for a soak, whose times are its plan's) and starts
the right kind of run: a soak for a soak gate (G4, ``runners.soak``), a run of the node probes
otherwise (``runners.dispatch``), or one node of the latest attempt again. It refuses with the
reason and creates nothing: :class:`LaunchInvalid` for a bad parameter (naming it),
``GateRefused`` (``ConfirmationRequired`` for a passed gate) when the gate may not run now.

``runs_recover`` settles whatever dead workers left behind, node jobs and soaks alike, and asks
for the signed report of a decision that lacks its own (``reports_missing_recover``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from gates.models import Decision, Gate
from gates.services import GateRefused, decision_is_latest
from runners.control import (
    evaluations_settle,
    lost_after,
    recover_lost_jobs,
    running_runs_settle,
    unclaimed_jobs_resend,
)
from runners.dispatch import gate_run_rerun_node, gate_run_start, gate_run_unsent_fail
from runners.doorbell import BrokerUnavailable, broker_check, ring
from runners.models import GateRun
from runners.plans import PlanError, node_steps
from runners.probes import PROBES
from runners.soak.driver import soak_recover, soak_start
from runners.soak.plan import SoakPlanError

MAX_PROBE_TIMEOUT_S = 7 * 24 * 3600

logger = logging.getLogger(__name__)


class LaunchInvalid(ValueError):
    """A launch parameter is wrong; ``field`` names it (``probe_timeouts``, ``node``, ``plan``).
    Nothing was created."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def probe_timeouts_check(*, gate: Gate, probe_timeouts: dict[str, int]) -> None:
    """Raise LaunchInvalid unless every override names a probe that ``gate`` runs on the
    engagement's nodes, with 1 … 604800 seconds; a soak takes none."""
    if not probe_timeouts:
        return
    if gate.is_soak:
        raise LaunchInvalid("probe_timeouts", _(
            "probe timeouts do not apply to %(gate)s: a soak's times come from its plan")
            % {"gate": gate.code})
    unknown = sorted(set(probe_timeouts) - set(PROBES))
    if unknown:
        raise LaunchInvalid("probe_timeouts", _(
            "unknown probe(s) %(names)s (probes: %(known)s)")
            % {"names": ", ".join(unknown), "known": ", ".join(sorted(PROBES))})
    for name, seconds in probe_timeouts.items():
        if not isinstance(seconds, int) or not 1 <= seconds <= MAX_PROBE_TIMEOUT_S:
            raise LaunchInvalid("probe_timeouts", _(
                "%(name)s: seconds must be 1 … %(max)s") % {"name": name,
                                                           "max": MAX_PROBE_TIMEOUT_S})
    planned = {step["probe"] for node in gate.engagement.nodes.all()
               for step in node_steps(gate, node)}
    stray = sorted(set(probe_timeouts) - planned)
    if stray:
        raise LaunchInvalid("probe_timeouts", _(
            "%(gate)s does not run %(stray)s (its probes: %(planned)s)")
            % {"gate": gate.code, "stray": ", ".join(stray),
               "planned": ", ".join(sorted(planned)) or _("none")})


def plan_check(*, gate: Gate) -> None:
    """``gate``'s probe plan expands for every node of its engagement: a malformed step (the
    read-back's ``planned_nodes`` 0, ``min_overlap_s`` "x") is LaunchInvalid("plan") naming it,
    before anything is created, not a worker's traceback after."""
    try:
        for node in gate.engagement.nodes.all():
            node_steps(gate, node)
    except PlanError as error:
        raise LaunchInvalid("plan", _("%(gate)s's probe plan: %(error)s")
                            % {"gate": gate.code, "error": error}) from None


def gate_launch(*, gate: Gate, started_by: str, reason: str = "", confirmed: bool = False,
                probe_timeouts: dict[str, int] | None = None, node: str = "",
                rerun_of: GateRun | None = None) -> GateRun:
    """Start ``gate``: its soak, a run of its node probes, or — with ``node`` — that node alone
    again in the latest finished attempt (``rerun_of``, default the gate's latest attempt),
    carrying the other nodes' evidence. Raises LaunchInvalid or GateRefused, nothing created.

    Raises BrokerUnavailable (one line: "the task broker is not answering (…)") when the broker
    does not answer: asked before anything is created; a send refused after the run was
    written ends that run at once as an error (``gate_run_unsent_fail``), nothing half-sent."""
    timeouts = dict(probe_timeouts or {})
    probe_timeouts_check(gate=gate, probe_timeouts=timeouts)
    broker_check()
    try:
        return _launch(gate=gate, started_by=started_by, reason=reason, confirmed=confirmed,
                       timeouts=timeouts, node=node, rerun_of=rerun_of)
    except BrokerUnavailable as error:
        if error.gate_run_id is None:
            raise
        gate_run_unsent_fail(gate_run_id=error.gate_run_id, reason=str(error))
        attempt = GateRun.objects.get(id=error.gate_run_id).attempt
        raise BrokerUnavailable(_("%(error)s; attempt #%(n)s was ended as an error, nothing ran "
                                  "on the nodes") % {"error": error, "n": attempt},
                                gate_run_id=error.gate_run_id) from None


def _launch(*, gate: Gate, started_by: str, reason: str, confirmed: bool,
            timeouts: dict[str, int], node: str, rerun_of: GateRun | None) -> GateRun:
    if gate.is_soak:
        if node:
            raise LaunchInvalid("node", _("%(gate)s is a soak: it runs on every inference node "
                                          "at once, never one node alone") % {"gate": gate.code})
        try:
            return soak_start(gate=gate, started_by=started_by, reason=reason,
                              confirmed=confirmed)
        except SoakPlanError as error:
            raise LaunchInvalid("plan", str(error)) from None
    plan_check(gate=gate)
    if node:
        previous = rerun_of or gate.runs.order_by("-attempt").first()
        if previous is None:
            raise GateRefused(_("%(gate)s has no attempt yet, so there is nothing to re-run "
                                "%(node)s in; run the whole gate first")
                              % {"gate": gate.code, "node": node})
        return gate_run_rerun_node(gate_run=previous, node_name=node, started_by=started_by,
                                   reason=reason, confirmed=confirmed, probe_timeouts=timeouts)
    return gate_run_start(gate=gate, started_by=started_by, probe_timeouts=timeouts,
                          reason=reason, confirmed=confirmed)


def runs_recover(*, after: timedelta | None = None) -> list[str]:
    """Settle node jobs whose worker died and re-attach soaks whose driver stopped (its agents
    on the nodes kept running; the gap is recorded); then what the broker lost: jobs sent and
    never claimed, runs stalled by a refused send, evaluations never sent or never decided; and
    issue the signed reports of decisions that lack theirs. One line per run recovered. Safe to
    call from anywhere, any number of times."""
    return (recover_lost_jobs(after=after) + soak_recover(after=after)
            + unclaimed_jobs_resend() + running_runs_settle() + evaluations_settle(after=after)
            + reports_missing_recover(after=after))


def reports_missing_recover(*, after: timedelta | None = None) -> list[str]:
    """A decision whose signed report is missing (a worker killed while rendering it, a full
    disk) does not count for its gate: ring ``runners.decision_report_issue`` for each one
    older than ``after`` (default the lost threshold) that is still its gate's latest. Issuing
    is idempotent (the decision's row lock), so racing a live worker stores nothing twice; a
    failure ends the run as an error saying so, and the next sweep tries again."""
    cutoff = timezone.now() - (after if after is not None else lost_after())
    lines = []
    for decision in (Decision.objects.unreported().filter(decided_at__lt=cutoff)
                     .select_related("gate", "gate_run").order_by("decided_at", "id")):
        if not decision_is_latest(decision):
            continue  # superseded by a later decision on its gate: it never counts
        what = (f"{decision.gate_run}: decision {decision.outcome} of "
                f"{decision.decided_at:%Y-%m-%d %H:%M:%S} UTC has no signed report")
        try:
            ring("runners.decision_report_issue", decision_id=decision.id)
        except Exception as error:  # a sweep goes on; the next one tries again
            logger.exception("the report of decision %s could not be asked for", decision.id)
            lines.append(f"{what}; issuing it could not be asked for: {error}")
            continue
        decision.refresh_from_db()
        issued = hasattr(decision, "report")
        lines.append(f"{what}: " + ("issued" if issued else "issuing asked for"))
    return lines
