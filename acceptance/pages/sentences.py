"""A gate's standing in one sentence a customer reads (the engagement page and the portal)."""

from __future__ import annotations

from datetime import date

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from acceptance.pages.words import day, days_text, gate_phrase
from gates.models import Decision, Gate
from gates.presentation import verdict_row


def _failing_text(decision: Decision) -> str:
    parts = []
    for v in decision.verdicts.all():
        if v.verdict in ("fail", "review"):
            row = verdict_row(v)
            parts.append(_("%(what)s (required %(requirement)s, measured %(measured)s)") % {
                "what": row.description or row.metric, "requirement": row.requirement,
                "measured": row.measured_text})
    return "; ".join(parts)


def gate_sentence(gate: Gate, decision: Decision | None, today: date) -> str:
    """The gate's standing in one sentence a customer reads."""
    title = gate_phrase(gate)
    if decision is None:
        if gate.state == Gate.State.PASSED:
            return _("%(gate)s passed.") % {"gate": title}
        return _("%(gate)s is due on %(date)s (%(when)s); no decision yet.") % {
            "gate": title, "date": day(gate.due_date),
            "when": days_text(gate.due_date, today)}
    when = day(decision.decided_at)
    if not hasattr(decision, "report"):  # a decision counts only with its signed report
        return _("%(gate)s was decided %(outcome)s on %(date)s, but its signed report is not "
                 "issued yet: it does not count until it is (recovery issues it).") % {
            "gate": title, "outcome": _(decision.outcome), "date": when}
    if decision.outcome == Decision.Outcome.PASSED:
        count = len(decision.verdicts.all())
        return ngettext("%(gate)s passed on %(date)s: its %(count)d criterion was met.",
                        "%(gate)s passed on %(date)s: all %(count)d criteria met.", count) % {
            "gate": title, "date": when, "count": count}
    failing = _failing_text(decision)
    if decision.outcome == Decision.Outcome.REVIEW:
        if gate.state == Gate.State.PASSED:
            return _("%(gate)s passed: on %(date)s %(failing)s was outside the reference "
                     "range, and a person accepted it with a recorded reason.") % {
                "gate": title, "date": when, "failing": failing}
        return _("%(gate)s needs review since %(date)s: %(failing)s is outside the reference "
                 "range; a person must accept it with a reason or re-run it.") % {
            "gate": title, "date": when, "failing": failing}
    sentence = _("%(gate)s stopped on %(date)s: %(failing)s.") % {
        "gate": title, "date": when, "failing": failing}
    if gate.state == Gate.State.PENDING:
        sentence += " " + _("The engagement was re-opened since; the gate will run again.")
    return sentence
