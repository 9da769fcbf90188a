"""Charts of a gate run's figures, drawn on the server as inline SVG (no script, no CDN).

A chart is plain geometry — bars, a reference line, axis ticks — computed here; the template
(``runners/_chart.html``) only loops over it. Bars are horizontal so that a chart of many nodes
stays readable on a phone. Which figures make which chart is :func:`run_charts`: TTFT p50 of the
local-NVMe baseline against the array tier (G3: by round; G2: per node against R2), bandwidth per
node (fio ``read_bandwidth``, RDMA ``rx_bandwidth`` and the aggregate) against the line rate, and
line efficiency per node against the 83 % line; :func:`gate_run_charts` reads a gate run's
evidence and criteria and draws them (no URLs: the run page and the report both use it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.utils import formats
from django.utils.html import conditional_escape as escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from acceptance.units import measurement_text
from gates.defaults import LINE_EFFICIENCY_MIN
from runners.models import GateRun

WIDTH = 380
LABEL_W = 112  # room for a group label such as "lab-inference-12"
VALUE_W = 70  # room for the value printed after a bar: "11.00 GB/s"
TOP = 14
BAR_H = 17
BAR_GAP = 3
GROUP_GAP = 10
GROUP_LABEL_X = LABEL_W - 6
AXIS_H = 22
PLOT_W = WIDTH - LABEL_W - VALUE_W
INSIDE_MIN_W = 86  # a bar this long has room for its value inside

# Display scale and unit for the axis: storage is canonical (B/s, ratio, s), people read GB/s, %.
DISPLAY = {"B/s": (1e-9, "GB/s"), "ratio": (100.0, "%"), "s": (1.0, "s"), "tok/s": (1.0, "tok/s")}


@dataclass(frozen=True)
class Bar:
    series: str  # CSS class: which colour
    x: float
    y: float
    width: float
    height: float
    value_text: str
    text_x: float
    text_y: float
    title: str  # tooltip: group, series and value
    text_inside: bool = False  # long bars carry their value inside, at their start (clear of
    # a reference line near their end)


@dataclass(frozen=True)
class GroupLabel:
    text: str
    y: float


@dataclass(frozen=True)
class Tick:
    x: float
    text: str


@dataclass(frozen=True)
class Reference:
    x: float
    text: str
    text_x: float
    anchor: str  # "start" | "end": which side of the line the text sits
    y_top: float = 2.0
    text_y: float = 10.0


@dataclass(frozen=True)
class LegendItem:
    series: str
    text: str


@dataclass
class Chart:
    key: str
    title: str
    unit_text: str
    width: int
    height: int
    plot_left: float
    plot_right: float
    axis_y: float
    tick_text_y: float = 0.0
    grid_top: float = TOP - 2
    group_label_x: float = GROUP_LABEL_X
    bars: list[Bar] = field(default_factory=list)
    labels: list[GroupLabel] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    reference: Reference | None = None
    legend: list[LegendItem] = field(default_factory=list)
    simulated: bool = False
    note: str = ""
    # what it was drawn from, so that it can be redrawn summarised (summarised())
    points: list[Point] = field(default_factory=list)
    unit: str = ""
    series_names: dict[str, str] = field(default_factory=dict)
    reference_line: tuple[float, str] | None = None

    def svg(self) -> SafeString:
        """The ``<svg>`` of ``runners/_chart.html``: the text its loops rendered with
        ``{% localize off %}`` (``tests/web/test_chart_svg.py`` holds the two equal), built
        by plain string formatting, every data text escaped once. Through the template engine
        the run page's two charts of 128 nodes cost 11 ms of CPU."""
        e, n = escape, _plain
        ticks = "".join(
            f'<line class="chart-grid" x1="{n(t.x)}" x2="{n(t.x)}" y1="{n(self.grid_top)}" '
            f'y2="{n(self.axis_y)}"/><text class="chart-tick" x="{n(t.x)}" '
            f'y="{n(self.tick_text_y)}" text-anchor="middle">{e(t.text)}</text>\n    '
            for t in self.ticks)
        labels = "".join(
            f'<text class="chart-label" x="{n(self.group_label_x)}" y="{n(g.y)}" '
            f'text-anchor="end">{e(g.text)}</text>\n    ' for g in self.labels)
        bars = "".join(
            f'<rect class="series-{e(b.series)}" x="{n(b.x)}" y="{n(b.y)}" width="{n(b.width)}" '
            f'height="{n(b.height)}" rx="2"><title>{e(b.title)}</title></rect>'
            f'<text class="chart-value{" inside" if b.text_inside else ""}" x="{n(b.text_x)}" '
            f'y="{n(b.text_y)}">{e(b.value_text)}</text>\n    ' for b in self.bars)
        r = self.reference
        reference = (
            f'<line class="chart-ref" x1="{n(r.x)}" x2="{n(r.x)}" y1="{n(r.y_top)}" '
            f'y2="{n(self.axis_y)}"/><text class="chart-ref-text" x="{n(r.text_x)}" '
            f'y="{n(r.text_y)}" text-anchor="{e(r.anchor)}">{e(r.text)}</text>') if r else ""
        simulated = (f'<text class="chart-sim" x="4" y="{n(self.tick_text_y)}">'
                     f'{e(_("SIMULATED"))}</text>') if self.simulated else ""
        return mark_safe(  # noqa: S308  # nosec B308, B703 # every data text above is escaped
            f'<svg viewBox="0 0 {n(self.width)} {n(self.height)}" role="img" '
            f'aria-label="{e(self.title)}" xmlns="http://www.w3.org/2000/svg">\n'
            f"    {ticks}<line class=\"chart-axis\" x1=\"{n(self.plot_left)}\" "
            f'x2="{n(self.plot_left)}" y1="{n(self.grid_top)}" y2="{n(self.axis_y)}"/>\n'
            f'    <line class="chart-axis" x1="{n(self.plot_left)}" x2="{n(self.plot_right)}" '
            f'y1="{n(self.axis_y)}" y2="{n(self.axis_y)}"/>\n'
            f"    {labels}{bars}{reference}\n"
            f"    {simulated}\n"
            f"  </svg>")


def _plain(value: object) -> str:
    """A number as ``{% localize off %}`` prints it: ``str`` for plain ints and floats, the
    rest (exponents, nan, Decimal …) through Django's own ``localize``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = str(value)
        if "e" not in text and "n" not in text:  # not 1e-07, nan, inf
            return text
    return str(formats.localize(value, use_l10n=False))


@dataclass(frozen=True)
class Point:
    """One value to draw: ``group`` (a node, a round) and ``series`` (an arm, a kind);
    ``per_node``: the group is a node (a chart of many may be summarised)."""

    group: str
    series: str
    value: float
    per_node: bool = False


def nice_step(span: float, ticks: int = 4) -> float:
    """A round step (1, 2, 2.5 or 5 × 10^k) dividing ``span`` into about ``ticks`` parts."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _number(value: float) -> str:
    """An axis tick as people write it, short enough for a tick: 2.5, 7,500, 500 k, 15 M —
    never 5e+06."""
    if value == 0:
        return "0"
    if abs(value) < 1:
        return f"{value:.2g}"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= size:
            return f"{value / size:,.6f}".rstrip("0").rstrip(".") + "\u2009" + suffix
    if value == round(value):
        return f"{round(value):,}"
    return f"{value:,.6f}".rstrip("0").rstrip(".")


def bar_chart(*, key: str, title: str, unit: str, points: list[Point],
              series_names: dict[str, str], reference: tuple[float, str] | None = None,
              simulated: bool = False, note: str = "", value_text=None) -> Chart:
    """A horizontal grouped bar chart of ``points`` (in the canonical ``unit``), with an
    optional reference line (value, label) such as the 83 % line or the line rate."""
    scale, unit_text = DISPLAY.get(unit, (1.0, unit))
    show = value_text or (lambda v: chart_value_text(v, unit))
    groups: dict[str, list[Point]] = {}
    for point in points:
        groups.setdefault(point.group, []).append(point)
    top_value = max([p.value for p in points] + [reference[0] if reference else 0.0]) * scale
    step = nice_step(top_value * 1.05 if top_value > 0 else 1.0)
    axis_max = step * max(1, math.ceil(top_value * 1.05 / step))

    def x_of(value: float) -> float:
        return round(LABEL_W + PLOT_W * (value * scale) / axis_max, 1)

    chart = Chart(key=key, title=title, unit_text=unit_text, width=WIDTH, height=0,
                  plot_left=LABEL_W, plot_right=LABEL_W + PLOT_W, axis_y=0,
                  simulated=simulated, note=note, points=list(points), unit=unit,
                  series_names=dict(series_names), reference_line=reference)
    y = float(TOP)
    for group, members in groups.items():
        group_h = len(members) * BAR_H + (len(members) - 1) * BAR_GAP
        chart.labels.append(GroupLabel(group, round(y + group_h / 2 + 4, 1)))
        for point in members:
            end = x_of(max(point.value, 0.0))
            text = show(point.value)
            # inside the bar when its value fits there (12 px text: about 7 px a character)
            # or would run past the chart's right edge outside it
            text_w = max(INSIDE_MIN_W, 7 * len(text) + 10)
            inside = end - LABEL_W > text_w or end + 4 + text_w > WIDTH
            chart.bars.append(Bar(
                series=point.series, x=LABEL_W, y=round(y, 1),
                width=round(max(end - LABEL_W, 0.5), 1), height=BAR_H, value_text=text,
                text_x=round(LABEL_W + 5 if inside else end + 4, 1),
                text_y=round(y + BAR_H - 5, 1),
                title=f"{group} · {series_names.get(point.series, point.series)}: {text}",
                text_inside=inside,
            ))
            y += BAR_H + BAR_GAP
        y += GROUP_GAP - BAR_GAP
    chart.axis_y = round(y, 1)
    chart.tick_text_y = round(y + 14, 1)
    chart.height = int(y + AXIS_H)
    tick = 0.0
    while tick <= axis_max + step / 1000:
        chart.ticks.append(Tick(round(LABEL_W + PLOT_W * tick / axis_max, 1), _number(tick)))
        tick += step
    if reference is not None:
        x = x_of(reference[0])
        right_side = x < LABEL_W + PLOT_W * 0.6
        chart.reference = Reference(x=x, text=reference[1],
                                    text_x=round(x + 3 if right_side else x - 3, 1),
                                    anchor="start" if right_side else "end")
    present = list(dict.fromkeys(p.series for p in points))
    chart.legend = [LegendItem(s, series_names.get(s, s)) for s in present]
    return chart


def chart_value_text(value: float, unit: str) -> str:
    """The short text printed after a bar (a ratio as a percentage)."""
    if unit == "ratio":
        return f"{value * 100:.1f} %"
    return measurement_text(value, unit)


# --- which figures make which chart -------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A measurement as the charts need it (``gate_run_charts`` reads them from the ledger)."""

    metric: str
    value: float
    unit: str
    node: str  # "" for service-level or aggregate figures
    labels: dict
    derived: bool
    simulated: bool


def _measured_pass(figure: Figure) -> bool:
    return figure.labels.get("pass", "measured") == "measured"


def ttft_chart(figures: list[Figure], reference_s: float | None = None) -> Chart | None:
    """G3: TTFT p50 of the local-NVMe baseline and the array tier, per round of the interleaved
    comparison; G2: TTFT p50 per node against the R2 reference."""
    compare = [f for f in figures if f.metric == "ttft_p50" and _measured_pass(f)
               and f.labels.get("phase") == "compare" and f.labels.get("arm")]
    names = {"local": _("baseline: local NVMe"), "array": _("array tier"),
             "recompute": _("recompute"), "node": _("TTFT p50")}
    if compare:
        order = {"local": 0, "recompute": 2}
        compare.sort(key=lambda f: (_round_key(f.labels.get("round", "")),
                                    order.get(f.labels["arm"], 1)))
        points = [Point(_("round %(round)s") % {"round": f.labels.get("round", "?")},
                        f.labels["arm"], f.value) for f in compare]
        return bar_chart(key="ttft", title=_("TTFT p50: baseline vs array tier"), unit="s",
                         points=points, series_names=names,
                         simulated=any(f.simulated for f in compare),
                         note=_("Lower is better. Concurrency %(c)s, measured passes only.")
                         % {"c": compare[0].labels.get("concurrency", "?")})
    per_node = [f for f in figures if f.metric == "ttft_p50" and _measured_pass(f)
                and not f.labels.get("arm") and f.node]
    if not per_node:
        return None
    per_node.sort(key=lambda f: _node_key(f.node))
    reference = None
    if reference_s is not None:
        reference = (reference_s, _("R2 %(value)s") % {"value": measurement_text(reference_s,
                                                                                 "s")})
    return bar_chart(key="ttft", title=_("TTFT p50 per node"), unit="s",
                     points=[Point(f.node, "node", f.value, True) for f in per_node],
                     series_names=names, reference=reference,
                     simulated=any(f.simulated for f in per_node),
                     # xgettext:no-python-format
                     note=_("Lower is better; the baseline must be within ±10 % of R2."))


def bandwidth_chart(figures: list[Figure]) -> Chart | None:
    """Read bandwidth per node (fio) and RDMA read-back per node with the aggregate, against
    the line rate of the link or the array port."""
    rows = [f for f in figures if f.metric in ("read_bandwidth", "rx_bandwidth")
            and _measured_pass(f) and (f.node or f.labels.get("scope") == "aggregate")]
    if not rows:
        return None
    names = {"read_bandwidth": _("fio sequential read"),
             "rx_bandwidth": _("RDMA read-back (port counter)"),
             "aggregate": _("all nodes together")}
    points = []
    for f in sorted(rows, key=lambda f: (f.node == "", _node_key(f.node), f.metric)):
        if f.node:
            points.append(Point(f.node, f.metric, f.value, True))
        else:
            points.append(Point(_("all %(n)s nodes") % {"n": f.labels.get("nodes", "?")},
                                "aggregate", f.value))
    rates = [f.value for f in figures if f.metric == "link_speed"]
    rates += [float(f.labels["array_line_rate"]) for f in rows
              if f.labels.get("array_line_rate", "").replace(".", "", 1).isdigit()]
    reference = None
    if rates:
        rate = max(rates)
        reference = (rate, _("line rate %(value)s") % {"value": measurement_text(rate, "B/s")})
    return bar_chart(key="bandwidth", title=_("Bandwidth per node"), unit="B/s", points=points,
                     series_names=names, reference=reference,
                     simulated=any(f.simulated for f in rows))


def line_efficiency_chart(figures: list[Figure], threshold: float) -> Chart | None:
    """Line efficiency per node (and the aggregate read-back) against the required line."""
    rows = [f for f in figures if f.metric == "line_efficiency"]
    if not rows:
        return None
    names = {"node": _("per node"), "aggregate": _("all nodes together")}
    points = []
    for f in sorted(rows, key=lambda f: (f.node == "", _node_key(f.node))):
        if f.node:
            points.append(Point(f.node, "node", f.value, True))
        else:
            points.append(Point(_("all %(n)s nodes") % {"n": f.labels.get("nodes", "?")},
                                "aggregate", f.value))
    return bar_chart(key="line-efficiency", title=_("Line efficiency"), unit="ratio",
                     points=points, series_names=names,
                     reference=(threshold, _("%(value)s line") % {
                         "value": f"{threshold * 100:g} %"}),
                     simulated=any(f.simulated for f in rows),
                     note=_("Higher is better; each bar must reach the line."))


def run_charts(figures: Iterable[Figure], *, line_threshold: float,
               ttft_reference_s: float | None = None,
               node_limit: int | None = None) -> list[Chart]:
    """The run's charts; with ``node_limit``, a chart of more nodes than that draws each
    series' lowest, median and highest node instead of one bar per node (:func:`summarised`),
    so its height does not grow with the nodes (the report's node table lists each node)."""
    figures = list(figures)
    charts = [ttft_chart(figures, ttft_reference_s), bandwidth_chart(figures),
              line_efficiency_chart(figures, line_threshold)]
    return [summarised(c, node_limit) for c in charts if c is not None]


def summarised(chart: Chart, node_limit: int | None) -> Chart:
    """``chart`` as it is when it has at most ``node_limit`` nodes (or no limit); else the
    same chart redrawn from each series' lowest, median and highest node value (the median of
    an even count is the mean of the middle two), the other bars (aggregates) kept."""
    nodes = {p.group for p in chart.points if p.per_node}
    if node_limit is None or len(nodes) <= node_limit:
        return chart
    values: dict[str, list[float]] = {}
    for p in chart.points:
        if p.per_node:
            values.setdefault(p.series, []).append(p.value)
    points = []
    for word, pick in ((_("lowest"), min), (_("median"), _median), (_("highest"), max)):
        points += [Point(word, series, pick(vals)) for series, vals in values.items()]
    note = _("%(n)d nodes: each series' lowest, median and highest node value is drawn; "
             "every node's figures are in the node table.") % {"n": len(nodes)}
    return bar_chart(key=chart.key, title=chart.title, unit=chart.unit,
                     points=points + [p for p in chart.points if not p.per_node],
                     series_names=chart.series_names, reference=chart.reference_line,
                     simulated=chart.simulated, note=f"{chart.note} {note}".strip())


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def node_figure_texts(figures: Iterable[Figure]) -> dict[str, str]:
    """Per node, its charted figures in one short line ("TTFT p50 17.50 s · read 11.00 GB/s ·
    line 88.0 %"): a figure measured more than once on the node shows its range. Rounds of
    G3's interleaved comparison (``arm`` labels) and aggregates are left out."""
    found: dict[str, dict[str, list[Figure]]] = {}
    for f in figures:
        if f.node and _measured_pass(f) and not f.labels.get("arm") and f.metric in _SHORT:
            found.setdefault(f.node, {}).setdefault(f.metric, []).append(f)
    texts = {}
    for node, metrics in found.items():
        parts = []
        for metric, short in _SHORT.items():
            rows = metrics.get(metric)
            if not rows:
                continue
            low, high = min(r.value for r in rows), max(r.value for r in rows)
            value = chart_value_text(low, rows[0].unit)
            if high != low:
                value += f" – {chart_value_text(high, rows[0].unit)}"
            parts.append(f"{short()} {value}")
        texts[node] = " · ".join(parts)
    return texts


_SHORT = {"ttft_p50": lambda: _("TTFT p50"), "read_bandwidth": lambda: _("read"),
          "rx_bandwidth": lambda: _("read-back"), "line_efficiency": lambda: _("line"),
          "link_speed": lambda: _("link")}


# The metrics the charts above draw: a run's other measurements (smart logs, per-job fio
# figures …, 100 000 at site scale) are never read for them.
CHARTED_METRICS = ("ttft_p50", "read_bandwidth", "rx_bandwidth", "link_speed",
                   "line_efficiency")


def gate_run_charts(gate_run: GateRun) -> list[Chart]:
    """The charts of ``gate_run``'s evidence (its own and what a per-node re-run carries),
    drawn against the gate's own criteria: the line-efficiency threshold and the TTFT
    reference of the engagement's reference profile (none drawn when no criterion holds one:
    never another profile's figure)."""
    return gate_run_chart_parts(gate_run, texts=False)[0]


def gate_run_chart_parts(gate_run: GateRun, *, node_limit: int | None = None,
                         texts: bool = True) -> tuple[list[Chart], dict[str, str]]:
    """``(charts, node texts)`` of ``gate_run`` from one read of its charted figures: the
    charts as :func:`gate_run_charts` draws them (summarised above ``node_limit`` nodes) and
    each node's figures in one line (:func:`node_figure_texts`; none without ``texts``)."""
    threshold = LINE_EFFICIENCY_MIN
    reference_s = None
    criteria = list(gate_run.gate.criteria.all())
    for criterion in criteria:
        if criterion.metric == "line_efficiency" and criterion.threshold is not None:
            threshold = criterion.threshold
        if criterion.metric == "ttft_p50" and criterion.reference_value is not None:
            reference_s = criterion.reference_value
    simulated_runs = set(gate_run.evidence_probe_runs().filter(simulated=True).values_list(
        "id", flat=True))
    lab = gate_run.gate.engagement.is_lab
    # Plain values, no model instances: 256 figures at 128 nodes.
    figures = [
        Figure(metric, value, unit, node or "", labels, derived,
               lab or probe_run_id in simulated_runs)
        for metric, value, unit, node, labels, derived, probe_run_id
        in gate_run.evidence_measurements().filter(metric__in=CHARTED_METRICS)
        .order_by("metric", "node__name", "id").values_list(
            "metric", "value", "unit", "node__name", "labels", "derived", "probe_run_id")
    ]
    charts = run_charts(figures, line_threshold=threshold, ttft_reference_s=reference_s,
                        node_limit=node_limit)
    return charts, node_figure_texts(figures) if texts else {}


def _round_key(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (10**6, text)


def _node_key(name: str) -> tuple:
    """Natural order: lab-inference-2 before lab-inference-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
