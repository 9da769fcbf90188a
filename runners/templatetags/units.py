"""Display of measurements in the units people read (storage stays in canonical units).

``measurement_text(value, unit)``: B/s → GB/s (SI, as the gates are stated: 100 GbE = 12.5 GB/s),
ratio → "0.88 (88.0 %)", s → "17.5 s", counts as integers. Also a template filter ``measurement``.
"""

from django import template

register = template.Library()


def measurement_text(value: float, unit: str) -> str:
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


@register.filter(name="measurement")
def measurement_filter(value: float, unit: str) -> str:
    return measurement_text(value, unit)
