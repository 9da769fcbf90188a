"""The customer portal: each engagement a customer's organisation has, in plain words — its
timeline, each gate's standing in one sentence, and the signed reports to download."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from acceptance.models import Engagement
from acceptance.pages.engagement import has_report
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


def portal_rows(engagements: QuerySet[Engagement], today: date) -> list[PortalEngagement]:
    engagements = engagements.select_related("customer").prefetch_related(
        Prefetch("gates", queryset=Gate.objects.order_by("order").prefetch_related(
            Prefetch("decisions", queryset=Decision.objects.select_related("report")
                     .prefetch_related("verdicts").order_by("-decided_at", "-id")))))
    rows = []
    for engagement in engagements.order_by("name"):
        gates, reports = [], []
        gate_rows = list(engagement.gates.all())
        for gate in gate_rows:
            decisions = list(gate.decisions.all())
            gates.append(PortalGate(
                code=gate.code, state=gate.state,
                state_word=str(GATE_STATE_WORDS.get(gate.state, gate.state)),
                sentence=gate_sentence(gate, decisions[0] if decisions else None, today)))
            for decision in decisions:
                if has_report(decision):
                    reports.append(PortalReport(
                        title=_("%(gate)s report, decision of %(date)s") % {
                            "gate": gate_title(gate), "date": day(decision.decided_at)},
                        outcome=decision.outcome,
                        outcome_word=str(GATE_STATE_WORDS.get(decision.outcome,
                                                              decision.outcome)),
                        signed_at=minute(decision.report.signed_at),
                        url=reverse("report-download", args=[decision.report.id]),
                        simulated=decision.report.simulated))
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
