"""``{{ text|datatext }}``: a text that came as data (a default gate's name or description, a
criterion's description) in the active language where the catalogue has it
(``acceptance.data_texts``)."""

from django import template

from acceptance.data_texts import data_text

register = template.Library()


@register.filter
def datatext(value) -> str:
    return data_text(str(value)) if value not in (None, "") else ""
