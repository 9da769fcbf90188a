"""The engagement's ten weeks drawn with its gates on their due weeks (``acceptance.charts``),
as the dashboard and the customer portal show it; each distinct drawing is made once."""

from __future__ import annotations

from datetime import date
from functools import lru_cache

from django.utils.safestring import SafeString
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from acceptance.charts import TimelineMark, timeline_svg
from acceptance.models import ENGAGEMENT_WEEKS, Engagement
from acceptance.pages.words import PageWords, day, is_overdue
from gates.models import Gate


def timeline(engagement: Engagement, gates: list[Gate], today: date) -> SafeString:
    """The engagement's ten weeks with its gates (``acceptance.charts``)."""
    # Drawn once per distinct input: everything the drawing shows is in the key.
    key = tuple((g.code, g.name, g.due_week, g.rescheduled_due_date, g.state) for g in gates)
    return _timeline(get_language(), engagement.name, engagement.start_date, today, key)


@lru_cache(maxsize=1024)
def _timeline(language: str, name: str, start: date, today: date,
              gates: tuple[tuple[str, str, int, date | None, str], ...]) -> SafeString:
    words = PageWords()
    return _timeline_drawn(name, start, today, [
        Gate(code=code, name=gate_name, due_week=due_week, rescheduled_due_date=rescheduled,
             state=state, engagement=Engagement(start_date=start))
        for code, gate_name, due_week, rescheduled, state in gates], words)


def _timeline_drawn(name: str, start: date, today: date, gates: list[Gate],
                    words: PageWords) -> SafeString:
    marks = [
        TimelineMark(
            # Where it is due (a moved due date moves the mark), inside the ten weeks.
            code=gate.code, state=gate.state,
            due_week=min(max((gate.due_date - start).days / 7, 0), ENGAGEMENT_WEEKS),
            overdue=is_overdue(gate, today),
            title=_("%(gate)s: %(state)s, due %(date)s") % {
                "gate": words.title(gate), "state": words.state(gate.state),
                "date": day(gate.due_date)})
        for gate in gates
    ]
    return timeline_svg(
        start=start, today=today, marks=marks, weeks=ENGAGEMENT_WEEKS,
        label=_("Timeline of %(name)s: ten weeks, gates on their due weeks") % {
            "name": name})
