"""The customer portal: each engagement a customer's organisation has, in plain words — its
timeline, each gate's standing in one sentence, and the signed reports to download: of each
report series (a gate decision's report, the final report) the latest version, saying which
version it is and where its sign-off stands ("version 2 of 2, signed off by both parties
on …")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from acceptance.models import Engagement
from acceptance.pages.sentences import gate_sentence
from acceptance.pages.timeline import timeline
from acceptance.pages.words import (
    ENGAGEMENT_STATE_WORDS,
    GATE_STATE_WORDS,
    day,
    gate_title,
    minute,
    week_text,
)
from gates.models import Decision, Gate
from reports.models import Report, SignOff


@dataclass
class PortalGate:
    code: str
    state: str
    state_word: str
    sentence: str


@dataclass
class PortalReport:
    title: str
    outcome: str
    outcome_word: str
    signed_at: str
    url: str
    simulated: bool
    version: int = 1
    version_text: str = ""  # "version 2 of 2, signed off by both parties on 2026-12-02"


@dataclass
class PortalEngagement:
    name: str
    url: str
    state: str
    state_word: str
    start_date: str
    end_date: str
    week_text: str
    stopped: bool
    timeline: SafeString
    gates: list[PortalGate]
    reports: list[PortalReport]


def version_text(latest: Report, total: int, parties: set[str]) -> str:
    """Which version ``latest`` is of its series of ``total`` and where its sign-off stands
    (``parties``: who signed off in the series)."""
    where = {"n": latest.version, "total": total, "date": minute(latest.signed_at)}
    if latest.origin == Report.Origin.COUNTERSIGNED:
        return _("version %(n)s of %(total)s, countersigned by the customer on %(date)s") % where
    if latest.signoff_complete:
        return _("version %(n)s of %(total)s, signed off by both parties on %(date)s") % where
    if SignOff.Party.VENDOR in parties:
        return _("version %(n)s of %(total)s, signed off by the vendor; awaiting the "
                 "customer's sign-off") % where
    if SignOff.Party.CUSTOMER in parties:
        return _("version %(n)s of %(total)s, signed off by the customer; awaiting the "
                 "vendor's sign-off") % where
    return _("version %(n)s of %(total)s, awaiting sign-off") % where


def _series(engagements: QuerySet[Engagement]) -> tuple[dict[int, dict[tuple, list[Report]]],
                                                       dict[int, set[str]]]:
    """Engagement id → (kind, about id) → the series' versions, oldest first; and report id →
    the parties that signed off that version. One query: reports joined with their sign-offs."""
    series: dict[int, dict[tuple, list[Report]]] = {}
    parties: dict[int, set[str]] = {}
    rows = Report.objects.filter(engagement__in=engagements).order_by("version", "id").values(
        "id", "engagement_id", "kind", "about_id", "version", "origin", "signoff_complete",
        "signed_at", "simulated", "outcome", "signoffs__party")
    for row in rows:
        party = row.pop("signoffs__party")
        if row["id"] not in parties:
            parties[row["id"]] = set()
            series.setdefault(row["engagement_id"], {}).setdefault(
                (row["kind"], row["about_id"]), []).append(Report(**row))
        if party:
            parties[row["id"]].add(party)
    return series, parties


def _report_row(versions: list[Report], title: str, outcome: str,
                signed: dict[int, set[str]]) -> PortalReport:
    latest = versions[-1]
    parties = set().union(*(signed[v.id] for v in versions))
    return PortalReport(
        title=title, outcome=outcome,
        outcome_word=str(GATE_STATE_WORDS.get(outcome, outcome)) if outcome else "",
        signed_at=minute(latest.signed_at),
        url=reverse("report-download", args=[latest.id]), simulated=latest.simulated,
        version=latest.version, version_text=version_text(latest, len(versions), parties))


def portal_rows(engagements: QuerySet[Engagement], today: date) -> list[PortalEngagement]:
    series, signed = _series(engagements)
    engagements = engagements.select_related("customer").prefetch_related(
        Prefetch("gates", queryset=Gate.objects.order_by("order").prefetch_related(
            Prefetch("decisions", queryset=Decision.objects.select_related("report")
                     .prefetch_related("verdicts").order_by("-decided_at", "-id")))))
    rows = []
    for engagement in engagements.order_by("name"):
        gates, reports = [], []
        gate_rows = list(engagement.gates.all())
        mine = series.get(engagement.id, {})
        for gate in gate_rows:
            decisions = list(gate.decisions.all())
            gates.append(PortalGate(
                code=gate.code, state=gate.state,
                state_word=str(GATE_STATE_WORDS.get(gate.state, gate.state)),
                sentence=gate_sentence(gate, decisions[0] if decisions else None, today)))
            for decision in decisions:
                versions = mine.get((Report.Kind.GATE, decision.id))
                if versions:
                    reports.append(_report_row(
                        versions, _("%(gate)s report, decision of %(date)s") % {
                            "gate": gate_title(gate), "date": day(decision.decided_at)},
                        decision.outcome, signed))
        final = mine.get((Report.Kind.FINAL, None))
        if final:
            reports.append(_report_row(final, _("Final acceptance report"),
                                       final[-1].outcome, signed))
        rows.append(PortalEngagement(
            name=engagement.name,
            url=reverse("engagement-detail", args=[engagement.name]),
            state=engagement.state,
            state_word=str(ENGAGEMENT_STATE_WORDS.get(engagement.state, engagement.state)),
            start_date=day(engagement.start_date), end_date=day(engagement.end_date),
            week_text=week_text(engagement, today),
            stopped=engagement.state == Engagement.State.STOPPED,
            timeline=timeline(engagement, gate_rows, today), gates=gates, reports=reports))
    return rows
