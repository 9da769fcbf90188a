"""An engagement's reference profile applied to its criteria (``acceptance_core.profiles``).

A criterion with a ``reference_figure`` takes its bounds, source text and benchmark concurrency
from the engagement's profile and records the profile's key (``reference_profile``); the
vLLM benchmark of a gate whose criteria compare with one row runs at that row's concurrency.
Changing the profile (``engagement_profile_set``) re-derives all of them at once, audited, or
refuses naming the profile and the figure it lacks: never a fallback to another profile's
figure. A gate whose criteria hold another profile's figures than the engagement's does not
run (``profile_mismatch``), so a comparison never mixes profiles. A bound a person edits
(``criterion_threshold_edit``) becomes the engagement's own and leaves the profile, recorded.
"""

from __future__ import annotations

import copy

from django.db import transaction
from django.utils.translation import gettext as _

from acceptance.models import AuditEntry, Engagement
from acceptance_core.profiles import ProfileError, profile_get
from gates.defaults import profile_fields
from gates.models import Criterion, Gate

PROFILE_FIELDS = ("threshold", "threshold_high", "reference_value", "label_filter", "source",
                  "reference_profile")
BOUND_FIELDS = ("threshold", "threshold_high", "reference_value")
DETACH_FIELDS = ("reference_figure", "reference_profile", "source")


class ProfileRefused(ValueError):
    """The profile cannot be chosen or used; the message names the profile and the figure."""


def criterion_dict(criterion: Criterion) -> dict:
    return {"key": f"{criterion.gate.code} {criterion.key}", "label_filter": criterion.label_filter,
            "reference_figure": criterion.reference_figure}


def bench_concurrency(probe_plan: list, concurrency: int | None) -> list:
    """``probe_plan`` with its ``vllm_bench_serve`` steps at ``concurrency`` (unchanged when
    None: a profile without one row's concurrency)."""
    plan = copy.deepcopy(probe_plan)
    if concurrency is None:
        return plan
    for step in plan:
        if step.get("probe") == "vllm_bench_serve":
            step["params"] = {**step.get("params", {}), "concurrency": concurrency}
    return plan


def seed_values(definition: dict, criterion: dict, profile_key: str) -> dict:
    """The profile-derived fields of a default criterion for a new engagement."""
    if not criterion.get("reference_figure"):
        return {}
    try:
        return profile_fields({**criterion, "key": f"{definition['code']} {criterion['key']}"},
                              profile_key)
    except ProfileError as error:
        raise ProfileRefused(str(error)) from None


def seed_plan(definition: dict, profile_key: str) -> list:
    """The probe plan of a default gate for a new engagement of ``profile_key``."""
    if not any("concurrency" in c.get("label_filter", {}) and c.get("reference_figure")
               for c in definition["criteria"]):
        return definition["probe_plan"]
    return bench_concurrency(definition["probe_plan"], profile_get(profile_key).concurrency)


def profile_mismatch(gate: Gate) -> str:
    """Why ``gate``'s criteria do not hold the engagement's profile ("" when they do)."""
    chosen = gate.engagement.reference_profile
    for criterion in gate.criteria.exclude(reference_figure=""):
        if criterion.reference_profile != chosen:
            return _("%(gate)s %(key)s holds reference profile %(held)s's figure but the "
                     "engagement's profile is %(chosen)s: choose the profile again so that "
                     "every criterion takes it") % {
                "gate": gate.code, "key": criterion.key,
                "held": criterion.reference_profile or "(none)", "chosen": chosen}
    return ""


def bound_edit_detach(old: dict, new: dict[str, float], criterion: Criterion,
                      reason: str) -> dict:
    """When an edit changes a bound that came from the profile, the criterion's bounds become
    the engagement's own: it leaves the profile (``reference_figure``/``reference_profile``
    emptied, so a later profile choice does not overwrite them) and its source says so. Returns
    what it left, for the audit trail ({} when nothing)."""
    if not criterion.reference_figure or all(new.get(n, old.get(n)) == old.get(n)
                                             for n in BOUND_FIELDS if n in new):
        return {}
    left = {"reference_profile": criterion.reference_profile,
            "reference_figure": criterion.reference_figure, "source": criterion.source}
    criterion.reference_figure = criterion.reference_profile = ""
    criterion.source = (f"set for this engagement ({reason.strip()}); was "
                        f"{left['source']}")[:200]
    return left


@transaction.atomic
def engagement_profile_set(*, engagement: Engagement, profile: str, actor: str,
                           reason: str) -> Engagement:
    """Choose ``profile`` for ``engagement``: every criterion with a reference figure takes the
    profile's value, source and concurrency, the benchmark steps of their gates the
    concurrency; old → new recorded in the audit trail with the reason.

    ProfileRefused (nothing changed) when the reason is blank, the profile is unknown or lacks
    a figure one of the criteria needs (naming both), it is the current one, the engagement is
    accepted, or a run of an affected gate is in progress."""
    if not (reason or "").strip():
        raise ProfileRefused(_("choosing a reference profile needs a reason"))
    engagement = Engagement.objects.select_for_update().get(pk=engagement.pk)
    try:
        chosen = profile_get(profile)
    except ProfileError as error:
        raise ProfileRefused(str(error)) from None
    if engagement.state == Engagement.State.ACCEPTED:
        raise ProfileRefused(_("engagement %(name)s is accepted; its criteria are final") % {
            "name": engagement.name})
    if engagement.reference_profile == profile:
        raise ProfileRefused(_("nothing changed: %(profile)s is the current profile") % {
            "profile": profile})
    criteria = list(Criterion.objects.select_for_update().select_related("gate")
                    .filter(gate__engagement=engagement).exclude(reference_figure=""))
    changes, details = [], {}
    for criterion in criteria:
        try:
            values = profile_fields(criterion_dict(criterion), profile)
        except ProfileError as error:
            raise ProfileRefused(str(error)) from None
        old = {name: getattr(criterion, name) for name in PROFILE_FIELDS}
        changes.append((criterion, values))
        details[f"{criterion.gate.code} {criterion.key}"] = {
            "old": old, "new": {name: values.get(name, old[name]) for name in PROFILE_FIELDS}}
    gates = {criterion.gate for criterion, _values in changes}
    for gate in sorted(gates, key=lambda g: g.order):
        if gate.runs.filter(state__in=["queued", "running", "evaluating"]).exists():
            raise ProfileRefused(_("%(gate)s: a run is in progress; choose the profile after "
                                   "it") % {"gate": gate.code})
    for criterion, values in changes:
        for name, value in values.items():
            setattr(criterion, name, value)
        criterion.save(update_fields=list(values))
    plans = {}
    for gate in gates:
        if any("concurrency" in c.label_filter for c, _v in changes if c.gate_id == gate.pk):
            plan = bench_concurrency(gate.probe_plan, chosen.concurrency)
            if plan != gate.probe_plan:
                plans[gate.code] = {"old": gate.probe_plan, "new": plan}
                gate.probe_plan = plan
                gate.save(update_fields=["probe_plan"])
    old_profile = engagement.reference_profile
    engagement.reference_profile = profile
    engagement.save(update_fields=["reference_profile"])
    AuditEntry.objects.create(
        engagement=engagement, actor=actor, action="reference profile changed",
        reason=reason.strip(),
        details={"old": old_profile, "new": profile, "title": chosen.title,
                 "criteria": details, "probe_plans": plans})
    return engagement
