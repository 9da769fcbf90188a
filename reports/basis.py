"""What a decision rests on, written into a report's ``summary.json`` so that anyone holding the
signed PDF can decide the gate again without the service (``acceptance_core redecide``).

``decision_basis(decision)`` is plain JSON data: the criteria as they were judged (operator,
thresholds, tolerance, reference value and its source, aggregation, label filter — the snapshot
the decision recorded) with the recorded figure and verdict of each, the derivation inputs — the
same ones ``runners.decision`` gives ``gates.derivations.derive_all``: ``arrays``, each node's
array and the array port's line rate (G2's line efficiency, G3's shared read-back), and
``drives``, per array controller node its array, the array's drive model (``""``: the model most
drives report) and expected drive count (G1), ``readback``, the shared read-back's planned
node count and shortest overlap (G3) — and, per probe run, the
parser and its version, the labels the run gave its measurements and the measurements recorded
from its raw output (matched to the embedded raw output by its sha256). A G4 soak's decision
rests on figures derived from its windows, correctness answers and fault windows
(``gates.soak_derivations``): they are listed as recorded (``derived``) and ``soak`` carries
what they are derived with besides the raw outputs (``runners.soak.report.soak_basis``: the
plan's steady-state numbers, time compression, planned requests per window, fault windows).
"""

from __future__ import annotations

import json

from django.db.models import TextField
from django.db.models.functions import Cast

from acceptance_core.profiles import PROFILES
from gates.models import Decision
from gates.services import array_drive_plans, node_array_line_rates, readback_plan
from runners.models import Measurement
from runners.soak.report import soak_basis

#: The version of the re-decision data; ``acceptance_core.redecide`` refuses other versions.
BASIS_SCHEMA = "acceptance-redecide/1"

_SPEC_FIELDS = ("key", "metric", "label_filter", "aggregation", "operator", "threshold",
                "threshold_high", "reference_value", "tolerance", "above_range_verdict", "unit",
                "min_samples", "blocking")


def _measurement(m) -> dict:
    return {"metric": m.metric, "value": m.value, "unit": m.unit, "labels": dict(m.labels),
            "node": m.node.name if m.node else ""}


def _reference_profile(criteria: list[dict]) -> dict | None:
    """The reference profile the criteria's figures come from (key and title); None when no
    criterion compares with one. Several would be a mix: the first is named and the verifier
    reports every criterion that holds another."""
    keys = [c["reference_profile"] for c in criteria if c.get("reference_profile")]
    if not keys:
        return None
    profile = PROFILES.get(keys[0])
    return {"key": keys[0], "title": profile.title if profile else ""}


def _readback(decision: Decision) -> dict | None:
    plan = readback_plan(gate=decision.gate)
    return None if plan is None else {"planned_nodes": plan.planned_nodes,
                                      "min_overlap_s": plan.min_overlap_s}


def decision_basis(decision: Decision) -> dict:
    """The re-decision data of ``decision`` (see the module docstring)."""
    gate_run = decision.gate_run
    criteria = []
    for v in decision.verdicts.order_by("position"):
        snapshot = v.criterion_snapshot
        spec = {name: snapshot.get(name) for name in _SPEC_FIELDS}
        spec["key"] = snapshot.get("key") or v.criterion.key
        criteria.append({
            **spec, "requirement": snapshot.get("requirement", ""),
            "reference_source": snapshot.get("source", ""),
            "reference_profile": snapshot.get("reference_profile", ""),
            "recorded": {"measured": v.measured_value, "verdict": v.verdict},
        })
    runs = []
    probe_runs = gate_run.evidence_probe_runs().select_related("node").order_by("started_at",
                                                                               "id")
    # each run's read measurements in one query of plain rows (5000 at 128 nodes; a G4 soak
    # at 128 nodes × 72 h: 0.6 M). Labels come as JSON text, each distinct text decoded once
    # and its dict shared by the figures that carry it (a window's 16 figures carry one), as
    # are the names: the summary is written from these, never changed.
    read: dict[int, list[dict]] = {}
    labels_of: dict[str, dict] = {}
    names: dict[str, str] = {}
    for run_id, metric, value, unit, labels, node in Measurement.objects.filter(
            probe_run__in=probe_runs, derived=False).order_by("id").values_list(
            "probe_run_id", "metric", "value", "unit", Cast("labels", TextField()),
            "node__name").iterator(chunk_size=10000):  # streamed: never all rows at once
        decoded = labels_of.get(labels)
        if decoded is None:
            decoded = labels_of[labels] = json.loads(labels)
        read.setdefault(run_id, []).append({
            "metric": names.setdefault(metric, metric), "value": value,
            "unit": names.setdefault(unit, unit), "labels": decoded,
            "node": names.setdefault(node or "", node or "")})
    del labels_of, names
    # plain rows, not models: 74 k collection records at 128 nodes × 72 h
    for run_id, sha256, node, probe, parser, parser_version, state, labels in (
            probe_runs.values_list("id", "stdout_sha256", "node__name", "probe", "parser",
                                   "parser_version", "state", "labels").iterator(
                chunk_size=10000)):
        runs.append({
            "sha256": sha256, "node": node or "", "probe": probe, "parser": parser,
            "parser_version": parser_version, "state": state, "labels": dict(labels),
            "measurements": read.get(run_id, []),
        })
    unrun = gate_run.evidence_measurements().filter(derived=False, probe_run__isnull=True)
    derived = gate_run.measurements.filter(derived=True)
    soak = soak_basis(gate_run.id)
    arrays = node_array_line_rates(engagement=gate_run.engagement)
    drives = array_drive_plans(engagement=gate_run.engagement)
    return {
        "schema": BASIS_SCHEMA,
        "gate": decision.gate.code,
        "outcome": decision.outcome,
        "derivation": "soak_spans" if soak is not None else "gate",
        "criteria": criteria,
        "reference_profile": _reference_profile(criteria),
        "arrays": {node: [array, rate] for node, (array, rate) in sorted(arrays.items())},
        "drives": {node: {"array": plan.array, "drive_model": plan.drive_model,
                          "expected": plan.expected} for node, plan in sorted(drives.items())},
        "readback": _readback(decision),
        "runs": runs,
        # measurements that came from no probe run (nothing to re-parse): taken as recorded
        "other_measurements": [_measurement(m) for m in unrun.select_related("node")],
        "derived": [_measurement(m) for m in derived.select_related("node").order_by("id")],
        **({"soak": soak} if soak is not None else {}),
    }
