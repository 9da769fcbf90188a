"""``{{ verdict|verdict_word }}``: a check's verdict in words people read (translated), the
same words as the engagement page's (``acceptance.pages.words.VERDICT_WORDS``)."""

from django import template
from django.utils.translation import gettext_lazy

from acceptance.pages.words import VERDICT_WORDS

register = template.Library()
WORDS = {**VERDICT_WORDS, "waiting": gettext_lazy("waiting for data")}


@register.filter
def verdict_word(verdict: str) -> str:
    return str(WORDS.get(verdict, verdict))
