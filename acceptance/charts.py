"""Server-rendered inline SVG charts (no JavaScript, no external resources).

``timeline_svg`` draws an engagement's ten weeks: a week axis, each gate on its due week (colour
and shape by state, so the state does not rest on colour alone) and a "today" line. The page
repeats every gate's state in words next to the chart. Every text that comes from data is
escaped (``format_html``).

It returns two drawings of the same timeline: a wide one and a compact one whose text stays
readable when a 390 px phone scales it down; ``engagements.css`` shows one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
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
    due_week: int
    state: str  # pending, passed, stopped, review
    title: str  # the state in words, for the tooltip: "G1 arrival acceptance: passed"
    overdue: bool = False


def _x(layout: Layout, week: float, weeks: int) -> float:
    return round(layout.left + (layout.right - layout.left) * week / weeks, 1)


def _marker(layout: Layout, mark: TimelineMark, weeks: int) -> SafeString:
    x, y = _x(layout, mark.due_week, weeks), layout.axis_y
    colour = STATE_COLOURS.get(mark.state, STATE_COLOURS["pending"])
    title = format_html("<title>{}</title>", mark.title)
    if mark.state == "passed":  # a disc with a tick
        shape = format_html('<circle cx="{}" cy="{}" r="8" fill="{}"/>'
                            '<path d="M{} {} l3 3 l6 -6" stroke="#fff" stroke-width="2" '
                            'fill="none"/>', x, y, colour, x - 4.5, y)
    elif mark.state == "stopped":  # a square with a cross
        shape = format_html('<rect x="{}" y="{}" width="16" height="16" fill="{}"/>'
                            '<path d="M{} {} l8 8 M{} {} l-8 8" stroke="#fff" '
                            'stroke-width="2"/>', x - 8, y - 8, colour, x - 4, y - 4, x + 4, y - 4)
    elif mark.state == "review":  # a diamond
        shape = format_html('<path d="M{} {} l9 9 l-9 9 l-9 -9 z" fill="{}"/>', x, y - 9, colour)
    else:  # a ring, red and thicker when overdue
        ring = STATE_COLOURS["stopped"] if mark.overdue else colour
        shape = format_html('<circle cx="{}" cy="{}" r="7" fill="#fff" stroke="{}" '
                            'stroke-width="{}"/>', x, y, ring, 3 if mark.overdue else 2)
    label = format_html('<text x="{}" y="{}" text-anchor="{}" font-size="{}" '
                        'font-weight="700" fill="{}">{}</text>', x, y - 16,
                        "end" if mark.due_week == weeks else "middle", layout.code_size,
                        colour, mark.code)
    return format_html("<g>{}{}{}</g>", title, shape, label)


def _drawing(layout: Layout, *, start: date, today: date, marks: Sequence[TimelineMark],
             weeks: int, label: str) -> SafeString:
    y = layout.axis_y
    axis = format_html('<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#c3c9d1" '
                       'stroke-width="2"/>', layout.left, y, layout.right, y)
    ticks = format_html_join(
        "", '<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#c3c9d1"/>'
        '<text x="{0}" y="{3}" text-anchor="middle" font-size="{4}" fill="#5b6573">{5}</text>',
        ((_x(layout, w, weeks), y - 4, y + 4, y + 20, layout.week_size, w)
         for w in range(weeks + 1)),
    )
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
    now = format_html(
        '<line x1="{0}" y1="6" x2="{0}" y2="{1}" stroke="{2}" stroke-width="2" '
        'stroke-dasharray="4 3"/><text x="{0}" y="{3}" text-anchor="{4}" font-size="{5}" '
        'font-weight="700" fill="{2}">{6}</text>', now_x, y + 8, TODAY_COLOUR,
        layout.height - 3, anchor, layout.today_size, now_text)
    markers = format_html_join("", "{}", ((_marker(layout, m, weeks),) for m in marks))
    return format_html(
        '<svg class="timeline {}" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<title>{}</title>{}{}{}{}</svg>',
        layout.name, layout.width, layout.height, label, label, axis, ticks, now, markers,
    )


def timeline_svg(*, start: date, today: date, marks: Sequence[TimelineMark],
                 weeks: int = 10, label: str = "") -> SafeString:
    """The timeline as two ``<svg>`` elements (wide, compact) that scale to their container."""
    return format_html_join("", "{}", (
        (_drawing(layout, start=start, today=today, marks=marks, weeks=weeks, label=label),)
        for layout in (WIDE, COMPACT)))
