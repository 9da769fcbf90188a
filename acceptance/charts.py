"""Server-rendered inline SVG charts (no JavaScript, no external resources).

``timeline_svg`` draws an engagement's ten weeks: a week axis, each gate on its due week (colour
and shape by state, so the state does not rest on colour alone) and a "today" line. The page
repeats every gate's state in words next to the chart. Every text that comes from data is
escaped (``conditional_escape``).

It returns two drawings of the same timeline: a wide one and a compact one whose text stays
readable when a 390 px phone scales it down; ``engagements.css`` shows one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from django.utils.html import conditional_escape as escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

# Fill colours of app.css (--pass, --fail, --warn, --muted); the today line is --info.
STATE_COLOURS = {"passed": "#1b6b2f", "stopped": "#a4000f", "review": "#8a5a00",
                 "pending": "#5b6573"}
TODAY_COLOUR = "#1f4e8c"


@dataclass(frozen=True)
class Layout:
    name: str
    width: int
    height: int
    left: int
    right: int
    axis_y: int
    code_size: int
    week_size: int
    today_size: int


WIDE = Layout("wide", 640, 84, 16, 624, 44, 15, 12, 12)
COMPACT = Layout("compact", 330, 84, 12, 318, 44, 16, 12, 13)


@dataclass(frozen=True)
class TimelineMark:
    code: str
    due_week: float  # where the mark sits: weeks from the start (a moved due date: a fraction)
    state: str  # pending, passed, stopped, review
    title: str  # the state in words, for the tooltip: "G1 arrival acceptance: passed"
    overdue: bool = False


def _x(layout: Layout, week: float, weeks: int) -> float:
    return round(layout.left + (layout.right - layout.left) * week / weeks, 1)


# The drawing is built with plain string formatting: every number is formatted by us, and each
# text that comes from data (codes, titles, labels) goes through ``escape`` once. (One
# ``format_html`` per element cost most of the dashboard's time with 200 engagements.)


def _marker(layout: Layout, mark: TimelineMark, weeks: int) -> str:
    x, y = _x(layout, mark.due_week, weeks), layout.axis_y
    colour = STATE_COLOURS.get(mark.state, STATE_COLOURS["pending"])
    title = f"<title>{escape(mark.title)}</title>"
    if mark.state == "passed":  # a disc with a tick
        shape = (f'<circle cx="{x}" cy="{y}" r="8" fill="{colour}"/>'
                 f'<path d="M{x - 4.5} {y} l3 3 l6 -6" stroke="#fff" stroke-width="2" '
                 f'fill="none"/>')
    elif mark.state == "stopped":  # a square with a cross
        shape = (f'<rect x="{x - 8}" y="{y - 8}" width="16" height="16" fill="{colour}"/>'
                 f'<path d="M{x - 4} {y - 4} l8 8 M{x + 4} {y - 4} l-8 8" stroke="#fff" '
                 f'stroke-width="2"/>')
    elif mark.state == "review":  # a diamond
        shape = f'<path d="M{x} {y - 9} l9 9 l-9 9 l-9 -9 z" fill="{colour}"/>'
    else:  # a ring, red and thicker when overdue
        ring = STATE_COLOURS["stopped"] if mark.overdue else colour
        shape = (f'<circle cx="{x}" cy="{y}" r="7" fill="#fff" stroke="{ring}" '
                 f'stroke-width="{3 if mark.overdue else 2}"/>')
    anchor = "end" if mark.due_week == weeks else "middle"
    label = (f'<text x="{x}" y="{y - 16}" text-anchor="{anchor}" font-size="{layout.code_size}" '
             f'font-weight="700" fill="{colour}">{escape(mark.code)}</text>')
    return f"<g>{title}{shape}{label}</g>"


@lru_cache(maxsize=16)
def _axis(layout: Layout, weeks: int) -> str:
    """The axis line and week ticks: the same for every engagement."""
    y = layout.axis_y
    axis = (f'<line x1="{layout.left}" y1="{y}" x2="{layout.right}" y2="{y}" stroke="#c3c9d1" '
            f'stroke-width="2"/>')
    ticks = "".join(
        f'<line x1="{x}" y1="{y - 4}" x2="{x}" y2="{y + 4}" stroke="#c3c9d1"/>'
        f'<text x="{x}" y="{y + 20}" text-anchor="middle" font-size="{layout.week_size}" '
        f'fill="#5b6573">{w}</text>'
        for w, x in ((w, _x(layout, w, weeks)) for w in range(weeks + 1)))
    return axis + ticks


def _drawing(layout: Layout, *, start: date, today: date, marks: Sequence[TimelineMark],
             weeks: int, label: str) -> str:
    y = layout.axis_y
    elapsed = (today - start).days / 7
    now_x = _x(layout, min(max(elapsed, 0), weeks), weeks)
    if elapsed < 0:
        now_text = _("today: before the start")
    elif elapsed > weeks:
        now_text = _("today: after week %(weeks)s") % {"weeks": weeks}
    else:
        now_text = _("today")
    edge = (layout.right - layout.left) / 6
    anchor = ("start" if now_x < layout.left + edge
              else "end" if now_x > layout.right - edge else "middle")
    # The line stops above the week numbers; its label sits below them.
    now = (f'<line x1="{now_x}" y1="6" x2="{now_x}" y2="{y + 8}" stroke="{TODAY_COLOUR}" '
           f'stroke-width="2" stroke-dasharray="4 3"/><text x="{now_x}" y="{layout.height - 3}" '
           f'text-anchor="{anchor}" font-size="{layout.today_size}" font-weight="700" '
           f'fill="{TODAY_COLOUR}">{escape(now_text)}</text>')
    markers = "".join(_marker(layout, m, weeks) for m in marks)
    label = escape(label)
    return (f'<svg class="timeline {layout.name}" viewBox="0 0 {layout.width} {layout.height}" '
            f'role="img" aria-label="{label}"><title>{label}</title>{_axis(layout, weeks)}{now}'
            f"{markers}</svg>")


def timeline_svg(*, start: date, today: date, marks: Sequence[TimelineMark],
                 weeks: int = 10, label: str = "") -> SafeString:
    """The timeline as two ``<svg>`` elements (wide, compact) that scale to their container."""
    return mark_safe(  # noqa: S308  # nosec B308, B703 # every data text above is escaped
        "".join(_drawing(layout, start=start, today=today, marks=marks, weeks=weeks, label=label)
                for layout in (WIDE, COMPACT)))
