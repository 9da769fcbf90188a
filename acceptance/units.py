"""Measurements in the units people read; storage stays in the canonical units (B/s, B, ratio,
s, 1, tok/s, K).

Pure Python (no Django), so every app that prints a figure (gates, runners, reports, the pages)
can import it from below, and ``mypy --strict`` can check it on its own. The template filter
``{{ value|measurement:unit }}`` (``acceptance/templatetags/units.py``) is a thin wrapper.

``measurement_text(value, unit)``: B/s → GB/s (SI, as the gates are stated: 100 GbE = 12.5 GB/s),
ratio → "0.880 (88.0 %)", s → "17.5 s", counts as integers.
"""

from __future__ import annotations


def measurement_text(value: float, unit: str) -> str:
    """``value`` (in the canonical ``unit``) as people read it, with its display unit."""
    if unit == "B/s":
        return f"{value / 1e9:.2f} GB/s"
    if unit == "B":
        return f"{value / 1e9:.2f} GB"
    if unit == "ratio":
        return f"{value:.3f} ({value * 100:.1f} %)"
    if unit == "s":
        return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"
    if unit == "1":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"
    if unit == "tok/s":
        return f"{value:.1f} tok/s"
    if unit == "K":
        return f"{value:.0f} K ({value - 273.15:.0f} °C)"
    return f"{value:g} {unit}"


def measured_text(value: float | None, unit: str) -> str:
    """:func:`measurement_text`, or ``—`` where nothing was measured."""
    return "—" if value is None else measurement_text(value, unit)
