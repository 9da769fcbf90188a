"""Time-series charts of a G4 soak, drawn on the server as self-contained SVG strings (no
script, no CDN, no stylesheet needed: every colour is an attribute), so the same string serves
the live page and the WeasyPrint report.

:func:`series_svg` takes one metric's series (``queries.soak_series`` shape: points with
``epoch``, ``value``, ``node``), the fault windows (``queries.soak_fault_windows``), the
collection gaps (``queries.soak_gaps``) and the time axis, and returns ``<svg …>…</svg>``:

* x: time since the load started, labelled in **plan** hours (the 72 h of the plan) — with a
  compressed lab soak the real seconds are ``plan ÷ time_compression`` (said in the caption);
* y: the metric in display units (ratio → %, s, tok/s, counts), from 0;
* fault windows shaded orange from injection to heal (a fault still on: to the last point);
  a planned window not injected yet is a dashed outline at its planned time;
* collection gaps hatched grey with a red edge: the service was not collecting there;
* an optional bound (``bound=(value, text)``), dashed red: the criterion's limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH = 640
HEIGHT = 210
LEFT = 58
RIGHT = 14
TOP = 18
BOTTOM = 30
NODE_COLOURS = ("#1f4e8c", "#2a9d8f", "#7b2cbf", "#c9a227", "#264653", "#e76f51")
FAULT_FILL = "#f4a261"
GAP_FILL = "#9aa3ad"
BOUND = "#a4000f"
#: Up to this many points in a chart each is also marked with a dot; beyond, lines only (at
#: 128 nodes the 2400 dots of a chart were half the page's bytes and hid the lines).
MARKED_POINTS = 600
# Display scale and unit for the axis: storage is canonical (ratio, s, tok/s, 1).
DISPLAY = {"ratio": (100.0, "%"), "s": (1.0, "s"), "tok/s": (1.0, "tok/s"), "1": (1.0, "")}


@dataclass(frozen=True)
class Axis:
    """The time axis: ``start`` / ``end`` epoch seconds (real) and the plan compression
    (plan seconds per real second) used to label it in plan hours."""

    start: float
    end: float
    compression: float = 1.0


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(target, 1)
    if raw <= 0:
        return 1.0
    magnitude = 10 ** int(f"{raw:e}".split("e")[1])
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= raw:
            return factor * magnitude
    return 10 * magnitude


def _hours_ticks(plan_span_s: float) -> list[float]:
    """Plan-second positions of the x ticks: every 6/12/24 h for long soaks, minutes for short."""
    hours = plan_span_s / 3600
    for step_h in (0.25, 0.5, 1, 2, 3, 6, 12, 24, 48):
        if hours / step_h <= 7:
            break
    step = step_h * 3600
    return [i * step for i in range(int(plan_span_s // step) + 1)]


def _tick_text(plan_s: float) -> str:
    hours = plan_s / 3600
    if hours >= 1 or plan_s == 0:
        return f"{hours:g} h"
    return f"{plan_s / 60:g} min"


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def series_svg(series: dict, *, title: str, axis: Axis, gaps: list[dict] = (),
               bound: tuple[float, str] | None = None, simulated: bool = False,
               width: int = WIDTH, height: int = HEIGHT) -> str:
    """The chart of one series as an SVG string (see the module doc). ``series``:
    ``{"metric", "unit", "points": [{"epoch", "value", "node"}], "fault_windows": [...]}``;
    ``bound`` in the series' canonical unit. Raises ValueError for an axis that ends before
    it starts."""
    if axis.end <= axis.start:
        raise ValueError(f"time axis ends ({axis.end}) before it starts ({axis.start})")
    scale, unit_text = DISPLAY.get(series["unit"], (1.0, series["unit"]))
    points = series["points"]
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    last_epoch = max((p["epoch"] for p in points), default=axis.start)

    def x_of(epoch: float) -> float:
        epoch = min(max(epoch, axis.start), axis.end)
        return LEFT + (epoch - axis.start) / (axis.end - axis.start) * plot_w

    top_value = max([p["value"] * scale for p in points] + [0.0])
    if bound is not None:
        top_value = max(top_value, bound[0] * scale)
    if top_value <= 0:
        top_value = 1.0
    step = _nice_step(top_value * 1.1, 4)
    y_max = step * (int(top_value * 1.1 / step) + 1)
    if series["unit"] == "ratio" and top_value <= 100.0 < y_max:
        step, y_max = 25.0, 100.0  # a ratio tops out at 100 %

    def y_of(value: float) -> float:
        return TOP + plot_h - min(max(value * scale, 0.0), y_max) / y_max * plot_h

    hatch = f"gap-hatch-{series['metric']}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="100%" role="img" aria-label="{escape(title)}" '
           f'font-family="DejaVu Sans, Noto Sans CJK SC, sans-serif" font-size="11">',
           f"<title>{escape(title)}</title>",
           f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fbfcfd" '
           f'stroke="#dde1e6"/>',
           f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#9aa3ad" '
           'stroke-width="2"/></pattern></defs>']
    # y grid and labels
    value = 0.0
    while value <= y_max + 1e-9:
        y = TOP + plot_h - value / y_max * plot_h
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#eceff2"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#5b6573">'
                   f"{_fmt(value)}{(' ' + unit_text) if unit_text and unit_text != '%' else ''}"
                   f"{'%' if unit_text == '%' else ''}</text>")
        value += step
    # x ticks in plan hours
    plan_span = (axis.end - axis.start) * axis.compression
    for plan_s in _hours_ticks(plan_span):
        x = x_of(axis.start + plan_s / axis.compression)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
                   f'stroke="#eceff2"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 15}" text-anchor="middle" '
                   f'fill="#5b6573">{_tick_text(plan_s)}</text>')
    # fault windows: injected (shaded) or planned (dashed outline)
    for fault in series.get("fault_windows", []):
        if fault.get("start_epoch") is not None:
            start = fault["start_epoch"]
            end = fault["end_epoch"] if fault.get("end_epoch") is not None else max(
                last_epoch, start)
            x1, x2 = x_of(start), x_of(end)
            out.append(f'<rect class="fault-window" data-fault="{escape(fault["name"])}" '
                       f'x="{x1:.1f}" y="{TOP}" width="{max(x2 - x1, 2):.1f}" height="{plot_h}" '
                       f'fill="{FAULT_FILL}" fill-opacity="0.28" stroke="{FAULT_FILL}"/>')
        elif fault.get("planned_start") is not None and fault.get("state") in (
                "planned", "armed"):
            x1 = x_of(_epoch(fault["planned_start"]))
            x2 = x_of(_epoch(fault["planned_end"]))
            out.append(f'<rect class="fault-planned" data-fault="{escape(fault["name"])}" '
                       f'x="{x1:.1f}" y="{TOP}" width="{max(x2 - x1, 2):.1f}" '
                       f'height="{plot_h}" fill="none" stroke="{FAULT_FILL}" '
                       f'stroke-dasharray="4 3"/>')
        else:
            continue
        out.append(f'<text x="{x1 + 3:.1f}" y="{TOP - 5}" fill="#8a4b12" font-size="10">'
                   f"{escape(fault['name'])}</text>")
    # collection gaps
    for gap in gaps:
        start = _epoch(gap["started_at"])
        end = _epoch(gap["ended_at"]) if gap.get("ended_at") else max(last_epoch, start)
        x1, x2 = x_of(start), x_of(end)
        out.append(f'<rect class="collection-gap" x="{x1:.1f}" y="{TOP}" '
                   f'width="{max(x2 - x1, 2):.1f}" height="{plot_h}" fill="url(#{hatch})" '
                   f'fill-opacity="0.55" stroke="{BOUND}" stroke-dasharray="2 2"/>')
        out.append(f'<text x="{x1 + 2:.1f}" y="{TOP + plot_h - 4}" fill="{BOUND}" '
                   f'font-size="10">gap</text>')
    # bound
    if bound is not None:
        y = y_of(bound[0])
        out.append(f'<line class="bound" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" '
                   f'y2="{y:.1f}" stroke="{BOUND}" stroke-width="1.3" stroke-dasharray="6 3"/>')
        out.append(f'<text x="{LEFT + plot_w - 4}" y="{y - 4:.1f}" text-anchor="end" '
                   f'fill="{BOUND}" font-size="10">{escape(bound[1])}</text>')
    # one line per node
    per_node: dict[str, list[dict]] = {}
    for p in points:  # grouped once (not every point scanned for every node)
        per_node.setdefault(p["node"], []).append(p)
    for index, node in enumerate(sorted(per_node)):
        colour = NODE_COLOURS[index % len(NODE_COLOURS)]
        mine = per_node[node]
        coords = " ".join(f"{x_of(p['epoch']):.1f},{y_of(p['value']):.1f}" for p in mine)
        out.append(f'<polyline class="series" data-node="{escape(node)}" points="{coords}" '
                   f'fill="none" stroke="{colour}" stroke-width="1.6" '
                   f'stroke-linejoin="round"/>')
        if len(mine) <= 120 and len(points) <= MARKED_POINTS:
            for p in mine:
                out.append(f'<circle cx="{x_of(p["epoch"]):.1f}" cy="{y_of(p["value"]):.1f}" '
                           f'r="1.8" fill="{colour}"/>')
    if not points:
        out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2:.1f}" '
                   f'text-anchor="middle" fill="#5b6573">no samples yet</text>')
    if simulated:
        out.append(f'<text x="{LEFT + 4}" y="{TOP + 12}" fill="{BOUND}" font-size="10" '
                   f'font-weight="700" letter-spacing="1">SIMULATED</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" '
               f'stroke="#9aa3ad"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" '
               f'y2="{TOP + plot_h}" stroke="#9aa3ad"/>')
    out.append("</svg>")
    return "".join(out)


def _epoch(at: datetime | float | str) -> float:
    if isinstance(at, datetime):
        return at.timestamp()
    if isinstance(at, str):
        return datetime.fromisoformat(at).timestamp()
    return float(at)


def legend(series: dict) -> list[dict]:
    """``[{"node", "colour"}]`` in the order the chart colours the nodes."""
    nodes = sorted({p["node"] for p in series["points"]})
    return [{"node": n, "colour": NODE_COLOURS[i % len(NODE_COLOURS)]}
            for i, n in enumerate(nodes)]
