"""Measurements in the units people read; storage stays in the canonical units (B/s, B, ratio,
s, 1, tok/s, K).

Pure Python (no Django), so every app that prints a figure (gates, runners, reports, the pages)
can import it from below, and ``mypy --strict`` can check it on its own. The template filter
``{{ value|measurement:unit }}`` (``acceptance/templatetags/units.py``) is a thin wrapper.

``measurement_text(value, unit)``: B/s → GB/s (SI, as the gates are stated: 100 GbE = 12.5 GB/s),
ratio → "0.880 (88.0 %)", s → "17.5 s", counts as integers.

``against``: the bounds the figure is judged against. Where the usual digits would print the
figure equal to a bound it is not on (24.99 % as "25.0 %" beside "required >= 0.25"), more
digits are printed until the two differ ("0.2499 (24.99 %)"); a figure on a bound (within the
evaluation's relative tolerance of 1e-9) keeps the usual digits.
"""

from __future__ import annotations

from collections.abc import Sequence

_REL_TOL = 1e-9  # gates.evaluation.REL_TOL: on a bound within this relative tolerance


def _on(value: float, bound: float) -> bool:
    return abs(value - bound) <= _REL_TOL * max(abs(value), abs(bound))


def _decimals(value: float, against: Sequence[float], scale: float, usual: int) -> int:
    """The fewest decimals, from ``usual`` on, that print ``value × scale`` apart from every
    bound × scale that ``value`` is not on."""
    for decimals in range(usual, usual + 10):
        shown = round(value * scale, decimals)
        if not any(shown == round(b * scale, decimals) and not _on(value, b) for b in against):
            return decimals
    return usual + 10


def measurement_text(value: float, unit: str, against: Sequence[float] = ()) -> str:
    """``value`` (in the canonical ``unit``) as people read it, with its display unit; enough
    digits to tell it from the bounds ``against`` it is judged by."""
    if unit == "B/s":
        return f"{value / 1e9:.{_decimals(value, against, 1e-9, 2)}f} GB/s"
    if unit == "B":
        return f"{value / 1e9:.{_decimals(value, against, 1e-9, 2)}f} GB"
    if unit == "ratio":
        percent = _decimals(value, against, 100, 1)
        return f"{value:.{percent + 2}f} ({value * 100:.{percent}f} %)"
    if unit == "s":
        usual = 3 if value < 10 else 2
        return f"{value:.{_decimals(value, against, 1, usual)}f} s"
    if unit == "1":
        if float(value).is_integer():
            return f"{value:.0f}"
        return f"{value:g}" if not against else f"{value:.{_decimals(value, against, 1, 3)}g}"
    if unit == "tok/s":
        return f"{value:.{_decimals(value, against, 1, 1)}f} tok/s"
    if unit == "K":
        return f"{value:.0f} K ({value - 273.15:.0f} °C)"
    return f"{value:g} {unit}"


def measured_text(value: float | None, unit: str, against: Sequence[float] = ()) -> str:
    """:func:`measurement_text`, or ``—`` where nothing was measured."""
    return "—" if value is None else measurement_text(value, unit, against)
