"""A chart's ``<svg>``, built by plain string formatting (``Chart.svg``), is the very text the
loops of ``runners/_chart.html`` rendered under ``{% localize off %}`` (kept below as
``REFERENCE``): bars inside and outside, a reference line or none, simulated or not, texts
that need escaping, numbers with an exponent, in both languages."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.utils import translation

from runners.charts import Bar, Chart, GroupLabel, LegendItem, Reference, Tick

REFERENCE = Template(
    "{% load i18n l10n %}{% localize off %}"
    '<svg viewBox="0 0 {{ chart.width }} {{ chart.height }}" role="img" aria-label="{{ '
    'chart.title }}" xmlns="http://www.w3.org/2000/svg">\n    {% for t in chart.ticks %}'
    '<line class="chart-grid" x1="{{ t.x }}" x2="{{ t.x }}" y1="{{ chart.grid_top }}" y2="{{ '
    'chart.axis_y }}"/><text class="chart-tick" x="{{ t.x }}" y="{{ chart.tick_text_y }}" '
    'text-anchor="middle">{{ t.text }}</text>\n    {% endfor %}<line class="chart-axis" x1="'
    '{{ chart.plot_left }}" x2="{{ chart.plot_left }}" y1="{{ chart.grid_top }}" y2="{{ '
    'chart.axis_y }}"/>\n    <line class="chart-axis" x1="{{ chart.plot_left }}" x2="{{ '
    'chart.plot_right }}" y1="{{ chart.axis_y }}" y2="{{ chart.axis_y }}"/>\n    {% for g in '
    'chart.labels %}<text class="chart-label" x="{{ chart.group_label_x }}" y="{{ g.y }}" '
    'text-anchor="end">{{ g.text }}</text>\n    {% endfor %}{% for b in chart.bars %}<rect '
    'class="series-{{ b.series }}" x="{{ b.x }}" y="{{ b.y }}" width="{{ b.width }}" height="'
    '{{ b.height }}" rx="2"><title>{{ b.title }}</title></rect><text class="chart-value{% if '
    'b.text_inside %} inside{% endif %}" x="{{ b.text_x }}" y="{{ b.text_y }}">{{ '
    'b.value_text }}</text>\n    {% endfor %}{% if chart.reference %}<line class="chart-ref" '
    'x1="{{ chart.reference.x }}" x2="{{ chart.reference.x }}" y1="{{ chart.reference.y_top }'
    '}" y2="{{ chart.axis_y }}"/><text class="chart-ref-text" x="{{ chart.reference.text_x }}'
    '" y="{{ chart.reference.text_y }}" text-anchor="{{ chart.reference.anchor }}">{{ '
    'chart.reference.text }}</text>{% endif %}\n    {% if chart.simulated %}<text class="'
    'chart-sim" x="4" y="{{ chart.tick_text_y }}">{% translate "SIMULATED" %}</text>{% endif '
    '%}\n  </svg>'
    + "{% endlocalize %}")


def chart_of(*, simulated=False, reference=True, title="Read bandwidth per node"):
    return Chart(
        key="read", title=title, unit_text="GB/s", width=640, height=212, plot_left=120.0,
        plot_right=600.5, axis_y=190.25, tick_text_y=206.0,
        bars=[Bar("read", 120.0, 20.5, 312.25, 14.0, "10.4 GB/s", 436.25, 31.0,
                  "gpu-001 · read: 10.4 GB/s"),
              Bar("line <&>", 120.0, 40.5, 480.5, 14.0, "12.5 GB/s", 124.0, 51.0,
                  'gpu-002 "line" & more', text_inside=True),
              Bar("read", 120.0, 60.5, 1e-07, 14.0, "0 B/s", 1.5e-05, 71.0, "tiny")],
        labels=[GroupLabel("gpu-001", 31.0), GroupLabel("gpu-<002>", 51.0)],
        ticks=[Tick(120.0, "0"), Tick(240.125, "5"), Tick(360, "10 <GB/s>")],
        reference=Reference(520.0, "line rate 12.5 GB/s & up", 516.0, "end")
        if reference else None,
        legend=[LegendItem("read", "read")], simulated=simulated)


CASES = {"plain": {}, "simulated, no reference": {"simulated": True, "reference": False},
         "escaped title": {"title": 'TTFT <p50> & "R2"'}}


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_svg_is_what_the_template_rendered(case, language):
    with translation.override(language):
        chart = chart_of(**CASES[case])
        assert chart.svg() == REFERENCE.render(Context({"chart": chart}))


def test_the_numbers_and_texts_are_written_as_the_page_needs_them():
    with translation.override("en"):
        svg = chart_of().svg()
        bare = chart_of(simulated=True, reference=False).svg()
    assert 'width="1e-07"' in svg and 'x="1.5e-05"' in svg  # as {% localize off %} wrote them
    assert '<rect class="series-line &lt;&amp;&gt;"' in svg
    assert "<title>gpu-002 &quot;line&quot; &amp; more</title>" in svg
    assert 'class="chart-value inside"' in svg
    assert 'text-anchor="end">line rate 12.5 GB/s &amp; up</text>' in svg
    assert "chart-ref" not in bare and ">SIMULATED</text>" in bare
    assert "SIMULATED" not in svg
