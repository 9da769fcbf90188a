"""One presentation of a measurement, shared by the run pages and anything else that lists
evidence.

A :class:`MeasurementRow` is one stored ``runners.models.Measurement`` as people read it: the
metric, where it was measured (node and labels), the value in display units (``acceptance.units``)
next to the canonical value and unit it is stored in, whether it was derived or simulated, and
whether it is evidence carried from an earlier attempt. Only models and units are imported, so
pages, the API and reports can all use it without reaching upward.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acceptance.units import measurement_text
from runners.models import Measurement


@dataclass(frozen=True, kw_only=True)
class MeasurementRow:
    """One measurement, its value both canonical and as people read it."""

    metric: str
    value: float  # in the canonical ``unit``
    unit: str  # B/s, ratio, s, 1 …
    value_text: str  # "12.50 GB/s": as people read it, unit included
    node: str  # "—" for service-level or aggregate figures
    labels: dict[str, str] = field(default_factory=dict)
    labels_text: str = ""  # "arm array · round 2", sorted by label name
    derived: bool = False
    simulated: bool = False
    carried: str = ""  # "carried from attempt #1": evidence of an earlier attempt, by reference


def labels_text(labels: dict[str, str]) -> str:
    """``arm array · round 2``: a measurement's labels, sorted by name; a label without a
    value is left out (a bare "model" read as a word of the text)."""
    return " · ".join(f"{k} {v}" for k, v in sorted(labels.items()) if v not in ("", None))


def measurement_row(measurement: Measurement, *, simulated: bool,
                    carried: str = "") -> MeasurementRow:
    """``measurement`` as a row (its node read through ``select_related("node")``)."""
    return MeasurementRow(
        metric=measurement.metric, value=measurement.value, unit=measurement.unit,
        value_text=measurement_text(measurement.value, measurement.unit),
        node=measurement.node.name if measurement.node else "—",
        labels=dict(measurement.labels), labels_text=labels_text(measurement.labels),
        derived=measurement.derived, simulated=simulated, carried=carried)
