"""A person's iCalendar feed (RFC 5545, written by the ``icalendar`` library): for every
engagement they may see, each gate's due date, the G4 soak window, and report sign-offs still
awaited.

UIDs are stable (one per gate, soak, report series), so a calendar client replaces an entry
when it changes. What the feed last said about each UID is kept (``CalendarEntry``): a change of
dates or words raises its SEQUENCE and moves LAST-MODIFIED and DTSTAMP (a feed without METHOD:
DTSTAMP is the time the information was last revised, RFC 5545 §3.8.7.2).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import icalendar
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Engagement
from acceptance.permissions import engagements_for
from gates.models import Gate
from notifications.models import CalendarEntry
from reports.models import Report, SignOff
from runners.soak.models import Soak

PRODID = "-//acceptance-service//engagement calendar//EN"
UID_DOMAIN = "acceptance-service"
PARTIES = {SignOff.Party.VENDOR: "the vendor's project manager",
           SignOff.Party.CUSTOMER: "the customer's representative"}


@dataclass
class Entry:
    uid: str
    summary: str
    start: date | datetime
    end: date | datetime
    description: str
    url: str

    def fingerprint(self) -> str:
        text = json.dumps([self.summary, self.start.isoformat(), self.end.isoformat(),
                           self.description, self.url])
        return hashlib.sha256(text.encode()).hexdigest()


def _link(path: str) -> str:
    return settings.NOTIFICATIONS_BASE_URL.rstrip("/") + path


def _soak_plan_seconds(gate: Gate) -> float | None:
    for step in gate.probe_plan:
        if step.get("expand") == "soak":
            try:
                return float(step["soak"]["duration_s"])
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _soak_entry(engagement: Engagement, gate: Gate) -> Entry | None:
    """The soak running now (its real window), or — for a pending soak gate — the planned
    window ending on the due date (the latest start that still meets it)."""
    soak = Soak.objects.filter(gate_run__gate=gate).order_by("-id").first()
    if soak is not None and soak.state in Soak.ACTIVE:
        start = soak.started_at or soak.gate_run.created_at
        end = start + timedelta(seconds=soak.duration_s + soak.paused_s)
        return Entry(f"soak-{soak.id}@{UID_DOMAIN}",
                     f"{engagement.name} {gate.code} soak ({soak.state})", start, end,
                     f"{gate.code} soak run #{soak.gate_run.attempt}: {soak.state}; planned "
                     f"load {soak.duration_s / 3600:g} h", _link(reverse("soak-detail",
                                                                         args=[soak.id])))
    seconds = _soak_plan_seconds(gate)
    if gate.state != Gate.State.PENDING or seconds is None:
        return None
    end = datetime.combine(gate.due_date, time.min, tzinfo=UTC)
    return Entry(f"gate-{gate.id}-soak-plan@{UID_DOMAIN}",
                 f"{engagement.name} {gate.code} soak window (planned)",
                 end - timedelta(seconds=seconds), end,
                 f"{gate.code}: {seconds / 3600:g} h of continuous load, ending by the due "
                 f"date {gate.due_date.isoformat()}",
                 _link(reverse("engagement-detail", args=[engagement.name])))


def _signoff_entries(engagement: Engagement) -> list[Entry]:
    latest: dict[tuple, Report] = {}
    for report in Report.objects.filter(engagement=engagement).select_related(
            "about__gate").order_by("kind", "about_id", "version"):
        latest[(report.kind, report.about_id)] = report
    entries = []
    for (kind, about_id), report in latest.items():
        signed = set(SignOff.objects.filter(report__in=report.series()).values_list(
            "party", flat=True))
        waiting = [words for party, words in PARTIES.items() if party not in signed]
        if not waiting or report.signoff_complete:
            continue
        day = timezone.localdate(report.signed_at)
        entries.append(Entry(
            f"signoff-{engagement.id}-{kind}-{about_id or 'final'}@{UID_DOMAIN}",
            f"{engagement.name}: sign-off awaited, {report.series_title} v{report.version}",
            day, day + timedelta(days=1), "Awaiting " + " and ".join(waiting) + ".",
            _link(reverse("engagement-reports", args=[engagement.name]))))
    return entries


def entries_for(engagement: Engagement) -> list[Entry]:
    entries = []
    for gate in engagement.gates.all():
        due = gate.due_date
        entries.append(Entry(
            f"gate-{gate.id}-due@{UID_DOMAIN}", f"{engagement.name} {gate.code} {gate.name} due",
            due, due + timedelta(days=1), f"{gate.code} {gate.name}: {gate.state}",
            _link(reverse("engagement-detail", args=[engagement.name]))))
        soak = _soak_entry(engagement, gate)
        if soak is not None:
            entries.append(soak)
    return entries + _signoff_entries(engagement)


@transaction.atomic
def _revision(entry: Entry, now: datetime) -> CalendarEntry:
    """The stored revision of ``entry``: a new sequence when its content changed."""
    fingerprint = entry.fingerprint()
    row = CalendarEntry.objects.select_for_update().filter(uid=entry.uid).first()
    if row is None:
        return CalendarEntry.objects.create(uid=entry.uid, fingerprint=fingerprint,
                                            sequence=0, modified_at=now)
    if row.fingerprint != fingerprint:
        row.fingerprint, row.sequence, row.modified_at = fingerprint, row.sequence + 1, now
        row.save(update_fields=["fingerprint", "sequence", "modified_at"])
    return row


def feed_ical(user, *, engagement_name: str | None = None) -> bytes:
    """The feed of every engagement ``user`` may see (or the one named), as iCalendar bytes."""
    engagements = engagements_for(user).order_by("name")
    if engagement_name is not None:
        engagements = engagements.filter(name=engagement_name)
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", f"Acceptance: {engagement_name}" if engagement_name
                 else "Acceptance engagements")
    now = timezone.now().replace(microsecond=0)
    for engagement in engagements:
        for entry in entries_for(engagement):
            revision = _revision(entry, now)
            event = icalendar.Event()
            event.add("uid", entry.uid)
            event.add("summary", entry.summary)
            event.add("dtstart", entry.start)
            event.add("dtend", entry.end)
            event.add("description", entry.description)
            event.add("url", entry.url)
            event.add("sequence", revision.sequence)
            modified = revision.modified_at.astimezone(UTC).replace(microsecond=0)
            event.add("dtstamp", modified)
            event.add("last-modified", modified)
            event.add("transp", "TRANSPARENT")
            calendar.add_component(event)
    return calendar.to_ical()
