"""One presentation of a criterion's verdict, shared by the pages, the API and the reports.

A :class:`VerdictRow` is what any surface shows of one criterion as judged: what it measures,
what it requires, what was measured (with its unit, as people read it), where the figure comes
from, the verdict and its one-line explanation. The engagement page, the engineers' run page,
the G4 soak's live checks and the gate report all show these rows; each surface puts the
verdict in its own words (``verdict_word``: "met" on the engagement page, "PASS" in the
report), because the same verdict reads differently to a customer and in a signed document.

:func:`verdict_row` builds one from a stored ``gates.models.CriterionVerdict``; the soak builds
its live check rows directly. Nothing here queries: the rows are plain frozen data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acceptance.data_texts import data_text, explanation_text
from acceptance.units import measured_text
from gates.plain import Figure, headline, plain_sentence

if TYPE_CHECKING:
    from gates.models import Criterion, CriterionVerdict

# A bound named in a description ("Sequential read reaches {threshold} of the link's line
# rate"); "{-threshold}" says a negative bound as its size ("at most {-threshold} below").
_BOUND = re.compile(r"\{(-?)(threshold|threshold_high|reference_value|tolerance)\}")
BOUND_FIELDS = ("threshold", "threshold_high", "reference_value", "tolerance")


def bound_words(value: float, unit: str, name: str) -> str:
    """A bound as a description says it: a ratio or a tolerance in % (0.83 → "83 %"), a
    whole number of hours as hours (259200 s → "72 h"), else the value and its unit."""
    if name == "tolerance" or unit == "ratio":
        return f"{value * 100:g} %"
    if unit == "s" and value >= 3600 and value % 3600 == 0:
        return f"{value / 3600:g} h"
    return f"{value:g}" if unit == "1" else f"{value:g} {unit}"


def description_with_bounds(description: str, bounds: Mapping[str, Any], unit: str) -> str:
    """``description`` in the active language with each ``{bound}`` replaced by the stored
    value of ``bounds`` (a criterion's fields or a verdict's snapshot of them), so the text
    always says what is stored; a description without placeholders is shown as it is."""
    def bound(found: re.Match[str]) -> str:
        value = bounds.get(found[2])
        if value is None:
            return found[0]
        return bound_words(-value if found[1] else value, unit, found[2])

    return _BOUND.sub(bound, data_text(description))


def criterion_text(criterion: Criterion) -> str:
    """The criterion's description with its stored bounds, in the active language."""
    return description_with_bounds(
        criterion.description, {f: getattr(criterion, f) for f in BOUND_FIELDS},
        criterion.unit)

def snapshot_bounds(snapshot: Mapping[str, Any]) -> tuple[float, ...]:
    """The bounds a verdict's criterion snapshot judges its figure against, so the measured
    text prints enough digits to tell the figure from them (``acceptance.units``)."""
    if snapshot.get("operator") == "within":
        reference, tolerance = snapshot.get("reference_value"), snapshot.get("tolerance")
        if reference is None or tolerance is None:
            return ()
        return (reference * (1 - tolerance), reference * (1 + tolerance))
    return tuple(snapshot[f] for f in ("threshold", "threshold_high")
                 if snapshot.get(f) is not None)


#: Every verdict a row may carry: the evaluation's (``gates.evaluation``) and ``waiting``, a
#: live soak check before its first judgement.
VERDICTS: tuple[str, ...] = ("pass", "fail", "review", "insufficient", "unstable", "waiting")


@dataclass(frozen=True, kw_only=True)
class VerdictRow:
    """One criterion with what was measured against it and the verdict."""

    metric: str
    description: str  # in the active language where it is one of the default criteria
    requirement: str  # ">= 24", "0.29 … 0.4", "17.31 s ± 10 %"
    measured_text: str  # "23", "12.50 GB/s", "0.880 (88.0 %)", "—": the unit included
    verdict: str
    explanation: str
    key: str = ""  # the criterion's key within its gate ("drive-count")
    measured: float | None = None  # the judged figure in the canonical ``unit``
    unit: str = ""  # canonical unit of ``measured`` (B/s, ratio, s, 1)
    reference_source: str = ""  # "DOMAIN.md G1", "R2 local NVMe c16"
    verdict_word: str = ""  # the verdict in the words of the surface showing it
    title: str = ""  # a short name of the check (the soak's check cards)
    at: str = ""  # when a live check was last judged, ISO 8601 (the soak)
    # what was measured against what, in plain words (gates.plain); "" where not asked for
    plain: str = ""
    headline: bool = False  # page 1 leads with it (a comparison, or a check not met)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {self.verdict!r}")


def _figure(m: Any, inputs: bool = True) -> Figure:
    return Figure(m.metric, m.value, m.unit, dict(m.labels or {}),
                  m.node.name if m.node_id else "",
                  tuple(_figure(i, False) for i in m.inputs.all()) if inputs else ())


def verdict_figures(verdict: CriterionVerdict) -> list[Figure]:
    """The measurements ``verdict`` links to, each with its inputs (prefetch
    ``measurements__inputs__node`` and ``measurements__node`` to read them in three queries)."""
    return [_figure(m) for m in verdict.measurements.all()]


def verdict_row(verdict: CriterionVerdict, *, words: Mapping[str, object] | None = None,
                stored_explanation: bool = False, plain: bool = False) -> VerdictRow:
    """``verdict`` (a stored ``CriterionVerdict``) as a row, its texts in the active language.

    ``words``: the surface's verdict words (lazy translations are fine); without them
    ``verdict_word`` stays "" for the caller to fill. ``stored_explanation``: keep the
    explanation exactly as the evaluation recorded it (the signed report quotes it so).
    ``plain``: add what was measured against what in plain words (reads the verdict's
    measurements and their inputs).
    """
    snapshot = verdict.criterion_snapshot
    description = description_with_bounds(snapshot.get("description", ""), snapshot,
                                          snapshot.get("unit", verdict.unit))
    sentence = plain_sentence(snapshot=snapshot, description=description,
                              measured=verdict.measured_value, unit=verdict.unit,
                              figures=verdict_figures(verdict)) if plain else ""
    return VerdictRow(
        plain=sentence, headline=plain and headline(snapshot, verdict.verdict),
        key=snapshot.get("key", ""), metric=snapshot["metric"], description=description,
        requirement=snapshot["requirement"],
        measured=verdict.measured_value, unit=verdict.unit,
        measured_text=measured_text(verdict.measured_value, verdict.unit,
                                    snapshot_bounds(snapshot)),
        reference_source=data_text(snapshot.get("source", "")),
        verdict=verdict.verdict,
        verdict_word=str(words.get(verdict.verdict, verdict.verdict)) if words else "",
        explanation=verdict.explanation if stored_explanation
        else explanation_text(verdict.explanation))
