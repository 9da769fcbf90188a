"""``{% load units %}``: ``{{ value|measurement:unit }}`` writes a measurement in the units
people read. The formatting itself is ``acceptance.units`` (pure, shared with the Python side)."""

from django import template

from acceptance.units import measurement_text

register = template.Library()


@register.filter(name="measurement")
def measurement_filter(value: float, unit: str) -> str:
    return measurement_text(value, unit)
