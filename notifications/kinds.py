"""The kinds of notice the service sends, as data: each kind's words and who gets it by default.

Project managers change who gets what per engagement (``Subscription`` rows override these
defaults); each person may mute an engagement or one kind for themselves (``Mute``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy as _

PM, ENGINEER, CUSTOMER = "project_manager", "engineer", "customer"
ROLES = (PM, ENGINEER, CUSTOMER)
ROLE_WORDS = {PM: _("project managers"), ENGINEER: _("engineers"), CUSTOMER: _("customers")}


@dataclass(frozen=True)
class Kind:
    name: str
    words: str  # lazily translated: shown in the reader's language
    default_roles: frozenset[str]


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("gate_decided", _("a gate decided (passed, stopped, review)"),
         frozenset({PM, ENGINEER, CUSTOMER})),
    Kind("signoff_waiting", _("a report waiting for your party's sign-off"),
         frozenset({PM, CUSTOMER})),
    Kind("report_issued", _("a report version issued"), frozenset({PM, CUSTOMER})),
    Kind("run_failed", _("a run failed"), frozenset({PM, ENGINEER})),
    Kind("run_lost", _("a run lost (its worker stopped)"), frozenset({PM, ENGINEER})),
    Kind("run_queued_too_long", _("a run queued too long"), frozenset({PM, ENGINEER})),
    Kind("soak_fault_window_failed", _("a soak fault window failed"), frozenset({PM, ENGINEER})),
    Kind("soak_interrupted", _("a soak interrupted (aborted or failed)"),
         frozenset({PM, ENGINEER})),
    Kind("gate_due_soon", _("a gate due in three days"), frozenset({PM, ENGINEER})),
    Kind("gate_overdue", _("a gate overdue"), frozenset({PM, ENGINEER})),
)}

# A sign-off notice goes only to the party that still has to sign: the vendor's project
# managers, the customer's representatives.
PARTY_ROLES = {"vendor": PM, "customer": CUSTOMER}
