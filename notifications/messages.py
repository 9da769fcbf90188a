"""What a notice says: subject, text, link and data, built from the ids an event carries.

One builder per kind (``BUILDERS``); each reads the rows it names and returns a ``Message``.
The same message becomes the e-mail (subject + text + link) and the webhook's JSON body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop, ngettext

from acceptance.models import Engagement
from gates.models import Decision, Gate
from reports.models import Report
from runners.models import GateRun, NodeJob
from runners.soak.models import FaultWindow, Soak

MAX_TEXT = 2000  # an error may be long; the page has the rest


@dataclass
class Message:
    engagement: Engagement
    kind: str
    subject: str
    text: str
    path: str
    data: dict = field(default_factory=dict)
    parties: list[str] = field(default_factory=list)  # sign-off: who still has to sign

    @property
    def url(self) -> str:
        return settings.NOTIFICATIONS_BASE_URL.rstrip("/") + self.path


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"


def _run_path(gate_run: GateRun) -> str:
    return reverse("run-detail", args=[gate_run.id])


# The outcome's word in the mail's language; the webhook's data keeps the code.
OUTCOME_WORDS = {"passed": gettext_noop("passed"), "stopped": gettext_noop("stopped"),
                 "review": gettext_noop("review")}


def gate_decided(*, decision_id: int) -> Message:
    decision = Decision.objects.select_related("gate__engagement", "gate_run").get(
        id=decision_id)
    gate, engagement = decision.gate, decision.gate.engagement
    return Message(
        engagement, "gate_decided",
        gettext("[%(engagement)s] %(gate)s %(outcome)s: %(name)s") % {
            "engagement": engagement.name, "gate": gate.code,
            "outcome": gettext(OUTCOME_WORDS.get(decision.outcome, decision.outcome)),
            "name": gate.name}, decision.sentence,
        _run_path(decision.gate_run),
        {"gate": gate.code, "outcome": decision.outcome, "sentence": decision.sentence,
         "decision": decision.id, "gate_run": decision.gate_run_id,
         "attempt": decision.gate_run.attempt, "decided_at": decision.decided_at.isoformat()})


def _report_data(report: Report) -> dict:
    return {"report": report.id, "kind": report.kind, "version": report.version,
            "gate": report.about.gate.code if report.about else None,
            "sha256": report.sha256, "reason": report.reason,
            "download": settings.NOTIFICATIONS_BASE_URL.rstrip("/")
            + reverse("report-download", args=[report.id])}


def _report(report_id: int) -> Report:
    return Report.objects.select_related("engagement", "about__gate").get(id=report_id)


def report_issued(*, report_id: int) -> Message:
    report = _report(report_id)
    engagement = report.engagement
    return Message(
        engagement, "report_issued",
        gettext("[%(engagement)s] %(title)s version %(version)s issued") % {
            "engagement": engagement.name, "title": report.series_title,
            "version": report.version},
        gettext("%(title)s, version %(version)s: %(reason)s (sha256 %(sha256)s).") % {
            "title": report.series_title, "version": report.version, "reason": report.reason,
            "sha256": report.sha256},
        reverse("engagement-reports", args=[engagement.name]), _report_data(report))


PARTY_WORDS = {"vendor": gettext_noop("the vendor's project manager"),
               "customer": gettext_noop("the customer's representative")}


def signoff_waiting(*, report_id: int, parties: list[str]) -> Message:
    report = _report(report_id)
    engagement = report.engagement
    who = gettext(" and ").join(gettext(PARTY_WORDS[p]) for p in parties)
    return Message(
        engagement, "signoff_waiting",
        gettext("[%(engagement)s] %(title)s v%(version)s awaits sign-off") % {
            "engagement": engagement.name, "title": report.series_title,
            "version": report.version},
        gettext("%(title)s, version %(version)s, awaits the sign-off of %(who)s.") % {
            "title": report.series_title, "version": report.version, "who": who},
        reverse("engagement-reports", args=[engagement.name]),
        {**_report_data(report), "waiting_for": list(parties)}, parties=list(parties))


def run_failed(*, gate_run_id: int) -> Message:
    run = GateRun.objects.select_related("gate__engagement").get(id=gate_run_id)
    engagement = run.gate.engagement
    decision = Decision.objects.filter(gate_run=run).only("outcome").first()
    if decision is None:
        subject = gettext("[%(engagement)s] %(gate)s run #%(attempt)s failed (no decision)")
    else:  # decided, but the signed report could not be issued: the gate has not moved yet
        subject = gettext("[%(engagement)s] %(gate)s run #%(attempt)s: decided %(outcome)s, "
                          "signed report not issued")
    return Message(
        engagement, "run_failed",
        subject % {"engagement": engagement.name, "gate": run.gate.code,
                   "attempt": run.attempt, "outcome": decision.outcome if decision else ""},
        _clip(run.error), _run_path(run),
        {"gate": run.gate.code, "gate_run": run.id, "attempt": run.attempt,
         "error": _clip(run.error)})


def run_lost(*, node_job_id: int) -> Message:
    job = NodeJob.objects.select_related("gate_run__gate__engagement", "node").get(
        id=node_job_id)
    run = job.gate_run
    engagement = run.gate.engagement
    return Message(
        engagement, "run_lost",
        gettext("[%(engagement)s] %(gate)s run #%(attempt)s: node %(node)s lost") % {
            "engagement": engagement.name, "gate": run.gate.code, "attempt": run.attempt,
            "node": job.node.name},
        _clip(job.error), _run_path(run),
        {"gate": run.gate.code, "gate_run": run.id, "attempt": run.attempt,
         "node": job.node.name, "error": _clip(job.error)})


def run_queued_too_long(*, gate_run_id: int, waited_s: float) -> Message:
    run = GateRun.objects.select_related("gate__engagement").get(id=gate_run_id)
    engagement = run.gate.engagement
    minutes = int(waited_s // 60)
    return Message(
        engagement, "run_queued_too_long",
        gettext("[%(engagement)s] %(gate)s run #%(attempt)s queued for %(minutes)s min") % {
            "engagement": engagement.name, "gate": run.gate.code, "attempt": run.attempt,
            "minutes": minutes},
        gettext("%(gate)s run #%(attempt)s has node jobs no worker has picked up for "
                "%(minutes)s minutes: is a worker running?") % {
            "gate": run.gate.code, "attempt": run.attempt, "minutes": minutes},
        _run_path(run),
        {"gate": run.gate.code, "gate_run": run.id, "attempt": run.attempt,
         "queued_s": round(waited_s)})


def soak_fault_window_failed(*, fault_window_id: int) -> Message:
    fault = FaultWindow.objects.select_related("soak__gate_run__gate__engagement", "node").get(
        id=fault_window_id)
    run = fault.soak.gate_run
    engagement = run.gate.engagement
    return Message(
        engagement, "soak_fault_window_failed",
        gettext("[%(engagement)s] %(gate)s soak: fault window %(fault)s failed") % {
            "engagement": engagement.name, "gate": run.gate.code, "fault": fault.name},
        _clip(gettext("%(fault)s (%(kind)s on %(node)s): %(error)s") % {
            "fault": fault.name, "kind": fault.kind, "node": fault.node.name,
            "error": fault.error}),
        reverse("soak-detail", args=[fault.soak_id]),
        {"gate": run.gate.code, "gate_run": run.id, "soak": fault.soak_id,
         "fault": fault.name, "fault_kind": fault.kind, "node": fault.node.name,
         "error": _clip(fault.error)})


def soak_interrupted(*, soak_id: int) -> Message:
    soak = Soak.objects.select_related("gate_run__gate__engagement").get(id=soak_id)
    run = soak.gate_run
    engagement = run.gate.engagement
    return Message(
        engagement, "soak_interrupted",
        gettext("[%(engagement)s] %(gate)s soak %(state)s") % {
            "engagement": engagement.name, "gate": run.gate.code, "state": soak.state},
        _clip(soak.error),
        reverse("soak-detail", args=[soak.id]),
        {"gate": run.gate.code, "gate_run": run.id, "soak": soak.id, "state": soak.state,
         "error": _clip(soak.error)})


def _gate(gate_id: int) -> Gate:
    return Gate.objects.select_related("engagement").get(id=gate_id)


def gate_due_soon(*, gate_id: int, due: str) -> Message:
    gate = _gate(gate_id)
    engagement = gate.engagement
    days = (date.fromisoformat(due) - timezone.localdate()).days
    when = gettext("today") if days == 0 else ngettext(
        "in %(days)s day", "in %(days)s days", days) % {"days": days}
    return Message(
        engagement, "gate_due_soon",
        gettext("[%(engagement)s] %(gate)s %(name)s due %(when)s (%(due)s)") % {
            "engagement": engagement.name, "gate": gate.code, "name": gate.name,
            "when": when, "due": due},
        gettext("%(gate)s %(name)s is due on %(due)s and is %(state)s.") % {
            "gate": gate.code, "name": gate.name, "due": due, "state": gate.state},
        reverse("engagement-detail", args=[engagement.name]),
        {"gate": gate.code, "due": due, "state": gate.state, "days_left": days})


def gate_overdue(*, gate_id: int, due: str) -> Message:
    gate = _gate(gate_id)
    engagement = gate.engagement
    return Message(
        engagement, "gate_overdue",
        gettext("[%(engagement)s] %(gate)s %(name)s overdue (due %(due)s)") % {
            "engagement": engagement.name, "gate": gate.code, "name": gate.name, "due": due},
        gettext("%(gate)s %(name)s was due on %(due)s and is still %(state)s.") % {
            "gate": gate.code, "name": gate.name, "due": due, "state": gate.state},
        reverse("engagement-detail", args=[engagement.name]),
        {"gate": gate.code, "due": due, "state": gate.state})


BUILDERS = {
    "gate_decided": gate_decided, "report_issued": report_issued,
    "signoff_waiting": signoff_waiting, "run_failed": run_failed, "run_lost": run_lost,
    "run_queued_too_long": run_queued_too_long,
    "soak_fault_window_failed": soak_fault_window_failed, "soak_interrupted": soak_interrupted,
    "gate_due_soon": gate_due_soon, "gate_overdue": gate_overdue,
}
