"""The business case of an engagement: its parameters saved (validated, audited) and the case
computed from G3's decided evidence (``business.case``, pure)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import fields
from typing import Any

from django.db import transaction

from acceptance.models import AuditEntry, Engagement
from business.case import ArmRound, Case, Evidence, Parameters, business_case
from business.models import BusinessParameters
from gates.models import Gate
from runners.models import Measurement

# field → (unit, low, high) for the one-line refusals; None is "not given"
FIELDS: dict[str, tuple[str, float, float]] = {
    "nodes": ("nodes", 1, 100_000),
    "gpus_per_node": ("GPUs", 1, 64),
    "gpu_cost_per_hour": ("currency per GPU-hour", 0, 10_000),
    "gpu_purchase_price": ("currency per GPU", 0, 1e9),
    "gpu_depreciation_years": ("years", 0.5, 20),
    "hosting_per_node_year": ("currency per node-year", 0, 1e9),
    "tokens_per_day": ("output tokens per day", 1, 1e15),
    "resume_share": ("share 0–1", 0, 1),
    "cache_hit_share": ("share 0–1", 0, 1),
    "switches_per_hour": ("switches per hour", 0, 3600),
    "array_price": ("currency per array", 0, 1e10),
    "arrays": ("arrays", 1, 10_000),
    "horizon_years": ("years", 0.5, 20),
}
#: A number as a person types it: ASCII digits, one point, an exponent ("nan" and "inf" are
#: refused as not finite by their own check).
DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf|infinity)",
                     re.IGNORECASE | re.ASCII)
INTEGERS = frozenset({"nodes", "gpus_per_node", "arrays"})
CURRENCIES = frozenset({"CNY", "USD", "EUR", "JPY", "HKD", "SGD", "GBP"})


class ParameterInvalid(ValueError):
    """One line naming the field and what was wrong."""


def parameters_clean(data: dict[str, Any]) -> dict[str, Any]:
    """Validated values (None for empty) of the fields present in ``data``."""
    clean: dict[str, Any] = {}
    for name, raw in data.items():
        if name == "currency":
            if raw is not None and not isinstance(raw, str):
                raise ParameterInvalid(f"currency: {raw!r} is not a currency code (one of "
                                       f"{', '.join(sorted(CURRENCIES))})")
            value = (raw or "").strip().upper()
            if value and value not in CURRENCIES:
                raise ParameterInvalid(f"currency: {raw!r} is not one of "
                                       f"{', '.join(sorted(CURRENCIES))}")
            clean[name] = value
            continue
        if name not in FIELDS:
            raise ParameterInvalid(f"{name}: no such parameter")
        unit, low, high = FIELDS[name]
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            clean[name] = None
            continue
        try:
            if isinstance(raw, bool):  # JSON true is not 1 node
                raise TypeError(raw)
            if isinstance(raw, str) and not DECIMAL.fullmatch(raw.strip()):
                raise ValueError(raw)  # float() also reads "1_000", "٣" and "infinity"
            number = float(raw)
        except (TypeError, ValueError, OverflowError):
            raise ParameterInvalid(f"{name}: {raw!r} is not a number ({unit})") from None
        if not math.isfinite(number):
            raise ParameterInvalid(f"{name}: {raw!r} is not a finite number ({unit})")
        if not low <= number <= high:
            raise ParameterInvalid(f"{name}: {raw} is outside {low:g} … {high:g} ({unit})")
        if name in INTEGERS:
            if number != int(number):
                raise ParameterInvalid(f"{name}: {raw} is not a whole number ({unit})")
            clean[name] = int(number)
        else:
            clean[name] = number
    return clean


def parameters_of(engagement: Engagement) -> BusinessParameters:
    found = BusinessParameters.objects.filter(engagement=engagement).first()
    return found or BusinessParameters(engagement=engagement)


def parameters_save(*, engagement: Engagement, actor: str,
                    data: dict[str, Any]) -> BusinessParameters:
    """Save the given parameters (validated); the change is audited with before and after."""
    clean = parameters_clean(data)
    with transaction.atomic():
        row, _ = BusinessParameters.objects.select_for_update().get_or_create(
            engagement=engagement)
        changed = {name: [getattr(row, name), value] for name, value in clean.items()
                   if getattr(row, name) != value}
        for name, value in clean.items():
            setattr(row, name, value)
        row.updated_by = actor
        row.save()
        if changed:
            AuditEntry.objects.create(
                engagement=engagement, actor=actor, action="business parameters changed",
                reason="business-case parameters entered", details={"changed": changed})
    return row


def parameters_pure(row: BusinessParameters, overrides: dict[str, Any] | None = None
                    ) -> Parameters:
    values = {f.name: getattr(row, f.name) for f in fields(Parameters)}
    values["currency"] = values["currency"] or None
    values.update(overrides or {})
    return Parameters(**values)


def g3_evidence(engagement: Engagement) -> Evidence:
    """G3's decision and the per-round output throughput of each arm it rests on."""
    gate = Gate.objects.filter(engagement=engagement, code="G3").first()
    if gate is None:
        return Evidence(False, "the engagement has no G3")
    decision = gate.decisions.select_related("gate_run").first()
    if gate.state != Gate.State.PASSED or decision is None:
        why = {Gate.State.STOPPED: "G3 stopped", Gate.State.REVIEW: "G3 awaits review",
               Gate.State.PENDING: "G3 has not been decided"}.get(gate.state, "G3 not passed")
        sentence = decision.sentence if decision is not None else ""
        return Evidence(False, f"{why}: {sentence}" if sentence else why)
    rows = (decision.gate_run.evidence_measurements()
            .filter(metric="output_throughput", derived=False)
            .select_related("node", "probe_run").order_by("id"))
    # (node, concurrency) → round → arm → measurement
    by_point: dict[tuple[str, str], dict[str, dict[str, Measurement]]] = defaultdict(
        lambda: defaultdict(dict))
    for m in rows:
        labels = m.labels or {}
        if labels.get("phase") != "compare" or labels.get("pass") != "measured":
            continue
        arm = labels.get("arm", m.arm)
        if arm in ("local", "array") and "round" in labels:
            node = m.node.name if m.node else ""
            by_point[(node, labels.get("concurrency", ""))][labels["round"]][arm] = m
    if not by_point:
        return Evidence(False, "G3 passed but holds no measured throughput of both arms")
    point = max(by_point, key=lambda k: (len(by_point[k]), k[1]))
    rounds, simulated = [], False
    for round_, arms in sorted(by_point[point].items()):
        if {"local", "array"} <= arms.keys():
            local, array = arms["local"], arms["array"]
            simulated |= any(m.probe_run is not None and m.probe_run.simulated
                             for m in (local, array))
            rounds.append(ArmRound(round_, local.value, array.value, (local.id, array.id)))
    return Evidence(True, rounds=tuple(rounds), simulated=simulated or engagement.is_lab)


def case_for(engagement: Engagement, overrides: dict[str, Any] | None = None) -> Case:
    """The engagement's case; ``overrides`` (validated) make a what-if that is not stored."""
    row = parameters_of(engagement)
    clean = parameters_clean(overrides) if overrides else None
    return business_case(parameters_pure(row, clean), g3_evidence(engagement))


def case_dict(case: Case) -> dict[str, Any]:
    """The case as plain data (API, pages, report context)."""
    label = "simulated evidence" if case.simulated else ""
    return {
        "established": case.established,
        "reason": case.reason,
        "missing": list(case.missing),
        "simulated": case.simulated,
        "evidence_label": label,
        "kind": "a model computed from measured figures and the customer's parameters",
        "switching": case.switching,
        "measurement_ids": list(case.measurement_ids),
        "parameters_used": case.parameters_used,
        "vendor_storage_share_claim": 0.10,
        "scenarios": [
            {**{k: v for k, v in vars(s).items() if k != "cumulative_saving"},
             "cumulative_saving": list(s.cumulative_saving), "label": label}
            for s in case.scenarios
        ],
    }
