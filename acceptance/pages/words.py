"""The words and formats every engagement page shares: gate titles, state and verdict words,
dates as the pages print them, and links into the engineers' app.

The pages of ``acceptance.pages`` (dashboard, engagement, portal) and other apps' pages that
speak of engagements (the soak's verdict words, the run pages' origin words) read them here, so
a state reads the same wherever it is shown.
"""

from __future__ import annotations

from datetime import date, datetime

from django.urls import NoReverseMatch, reverse
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, ngettext

from acceptance.models import ENGAGEMENT_WEEKS, Engagement
from gates.models import Gate

# The default gates' names (gates.defaults), marked so they are translated where shown.
GATE_NAMES = (gettext_noop("Arrival acceptance"), gettext_noop("Single-node baseline"),
              gettext_noop("Main joint test"), gettext_noop("Stability and acceptance"))

GATE_STATE_WORDS = {
    "pending": gettext_lazy("pending"), "passed": gettext_lazy("passed"),
    "stopped": gettext_lazy("stopped"), "review": gettext_lazy("in review"),
}
ENGAGEMENT_STATE_WORDS = {
    "active": gettext_lazy("active"), "stopped": gettext_lazy("stopped"),
    "accepted": gettext_lazy("accepted"),
}
VERDICT_WORDS = {
    "pass": gettext_lazy("met"), "fail": gettext_lazy("not met"),
    "review": gettext_lazy("outside the reference range: review"),
    "insufficient": gettext_lazy("insufficient data"), "unstable": gettext_lazy("unstable"),
}
RUN_STATE_WORDS = {
    "queued": gettext_lazy("queued"), "running": gettext_lazy("running"),
    "evaluating": gettext_lazy("evaluating"), "done": gettext_lazy("done"),
    "failed": gettext_lazy("failed: no decision"), "cancelled": gettext_lazy("cancelled"),
}
# The audit trail's actions as the services record them (plain English data), in words.
AUDIT_ACTION_WORDS = {
    "criterion threshold changed": gettext_lazy("criterion threshold changed"),
    "engagement re-opened": gettext_lazy("engagement re-opened"),
    "review accepted": gettext_lazy("review accepted"),
    "node enrolled": gettext_lazy("node enrolled"),
    "node host key re-pinned": gettext_lazy("node host key re-pinned"),
    "lab engagement created": gettext_lazy("lab engagement created"),
    "engagement created": gettext_lazy("engagement created"),
    "due date moved": gettext_lazy("due date moved"),
    "BOM item added": gettext_lazy("BOM item added"),
    "BOM item changed": gettext_lazy("BOM item changed"),
    "BOM item removed": gettext_lazy("BOM item removed"),
    "BOM uploaded": gettext_lazy("BOM uploaded"),
    "business parameters changed": gettext_lazy("business parameters changed"),
    "fault target confirmed": gettext_lazy("fault target confirmed"),
    "gates seeded": gettext_lazy("gates seeded"),
    "lab soak prepared": gettext_lazy("lab soak prepared"),
    "reference profile changed": gettext_lazy("reference profile changed"),
    "soak plan changed": gettext_lazy("soak plan changed"),
    # stored under their machine keys (reports.services, acceptance.people)
    "report_reissue": gettext_lazy("report re-issued"),
    "report_signoff": gettext_lazy("report signed off"),
    "report_countersigned": gettext_lazy("report countersigned"),
    "report_recovered": gettext_lazy("report recovered"),
    "final_report": gettext_lazy("final report issued"),
    "customer_certificate": gettext_lazy("customer certificate registered"),
    "webhook_set": gettext_lazy("webhook set"),
    "webhook_remove": gettext_lazy("webhook removed"),
}
ORIGIN_WORDS = {"ssh": gettext_lazy("collected over SSH"),
                "imported": gettext_lazy("imported evidence bundle")}


def gate_title(gate: Gate) -> str:
    """``G1 Arrival acceptance`` (the name translated where it is one of the defaults)."""
    return f"{gate.code} {_(gate.name)}"


def gate_phrase(gate: Gate) -> str:
    """``G1 arrival acceptance``: the gate inside a sentence."""
    return f"{gate.code} {_(gate.name).lower()}"


def day(value: date | datetime | None) -> str:
    """``2026-12-14`` ("" for None)."""
    if value is None:
        return ""
    # What date_format(…, "Y-m-d") gives, without its per-call formatter (200 rows × 10 dates).
    return (value.date() if isinstance(value, datetime) else value).isoformat()


def minute(value: datetime | None) -> str:
    """``2026-12-14 09:40 UTC`` ("" for None)."""
    return "" if value is None else date_format(value, "Y-m-d H:i") + " UTC"


def run_url(gate_run_id: int) -> str:
    """The page of a gate run (the engineers' pages own it)."""
    return optional_url("run-detail", gate_run_id) or f"/runs/{gate_run_id}/"


def optional_url(name: str, *args) -> str:
    """A link to a page of the engineers' app, or "" where this version has no such page."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


def days_text(due: date, today: date) -> str:
    """``in 3 days``, ``due today``, ``2 days overdue``."""
    days = (due - today).days
    if days == 0:
        return _("due today")
    if days > 0:
        return ngettext("in %(n)d day", "in %(n)d days", days) % {"n": days}
    return ngettext("%(n)d day overdue", "%(n)d days overdue", -days) % {"n": -days}


def is_overdue(gate: Gate, today: date) -> bool:
    """Due before ``today`` and not passed."""
    return gate.state != Gate.State.PASSED and gate.due_date < today


def week_text(engagement: Engagement, today: date) -> str:
    """``week 3 of 10``, ``starts on …``, ``after week 10 (ended …)``."""
    days = (today - engagement.start_date).days
    if days < 0:
        return _("starts on %(date)s") % {"date": day(engagement.start_date)}
    week = days // 7 + 1
    if week > ENGAGEMENT_WEEKS:
        return _("after week %(weeks)d (ended %(date)s)") % {
            "weeks": ENGAGEMENT_WEEKS, "date": day(engagement.end_date)}
    return _("week %(week)d of %(weeks)d") % {"week": week, "weeks": ENGAGEMENT_WEEKS}


class PageWords:
    """Translated words of one page build, each worked out once (200 engagements share their
    gate titles, state words and "in N days" texts); the active language cannot change
    within one request."""

    def __init__(self) -> None:
        self._titles: dict[tuple[str, str], str] = {}
        self._states: dict[str, str] = {}
        self._days: dict[tuple[date, date], str] = {}

    def title(self, gate: Gate) -> str:
        key = (gate.code, gate.name)
        if key not in self._titles:
            self._titles[key] = gate_title(gate)
        return self._titles[key]

    def state(self, state: str) -> str:
        if state not in self._states:
            self._states[state] = str(GATE_STATE_WORDS.get(state, state))
        return self._states[state]

    def days(self, due: date, today: date) -> str:
        key = (due, today)
        if key not in self._days:
            self._days[key] = days_text(due, today)
        return self._days[key]
