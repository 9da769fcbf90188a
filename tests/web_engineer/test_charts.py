"""The run page's plots are server-drawn SVG geometry: G3 TTFT baseline vs array tier by round,
bandwidth per node with the aggregate against the line rate, line efficiency against 83 %."""

from runners.charts import Figure, Point, bar_chart, nice_step, run_charts


def fig(metric, value, unit, node="", derived=False, **labels):
    return Figure(metric, value, unit, node, labels, derived, simulated=True)


G3 = [
    fig("ttft_p50", 17.31, "s", "lab-inference-1", arm="local", phase="compare", round="1",
        concurrency="16", **{"pass": "measured"}),
    fig("ttft_p50", 11.85, "s", "lab-inference-1", arm="array", phase="compare", round="1",
        concurrency="16", **{"pass": "measured"}),
    fig("ttft_p50", 17.48, "s", "lab-inference-1", arm="local", phase="compare", round="2",
        concurrency="16", **{"pass": "measured"}),
    fig("ttft_p50", 12.03, "s", "lab-inference-1", arm="array", phase="compare", round="2",
        concurrency="16", **{"pass": "measured"}),
    fig("ttft_p50", 150.0, "s", "lab-inference-1", arm="array", phase="compare", round="1",
        **{"pass": "warmup"}),  # warm-up passes are not plotted
    fig("ttft_p50", 11.85, "s", "lab-inference-2", arm="array", phase="readback", round="1",
        **{"pass": "measured"}),  # nor the read-back's bench
    fig("rx_bandwidth", 5.5e9, "B/s", "lab-inference-10", phase="readback"),
    fig("rx_bandwidth", 5.5e9, "B/s", "lab-inference-2", phase="readback"),
    fig("rx_bandwidth", 11.0e9, "B/s", derived=True, scope="aggregate", nodes="2",
        array_line_rate="12500000000"),
    fig("line_efficiency", 0.88, "ratio", derived=True, scope="aggregate", nodes="2"),
]


def test_g3_gives_ttft_by_round_bandwidth_with_the_aggregate_and_efficiency_against_83():
    ttft, bandwidth, efficiency = run_charts(G3, line_threshold=0.83)

    assert ttft.key == "ttft" and ttft.simulated
    assert [g.text for g in ttft.labels] == ["round 1", "round 2"]
    assert [(b.series, b.value_text) for b in ttft.bars] == [
        ("local", "17.31 s"), ("array", "11.85 s"), ("local", "17.48 s"), ("array", "12.03 s")]
    assert [i.text for i in ttft.legend] == ["baseline: local NVMe", "array tier"]
    # Bars are proportional: the array bar of round 1 is 11.85 / 17.31 of the local one.
    local, array = ttft.bars[0], ttft.bars[1]
    assert abs(array.width / local.width - 11.85 / 17.31) < 0.01

    assert [g.text for g in bandwidth.labels] == [
        "lab-inference-2", "lab-inference-10", "all 2 nodes"]  # natural order
    assert bandwidth.reference.text == "line rate 12.50 GB/s"
    assert bandwidth.bars[-1].series == "aggregate"

    assert efficiency.reference.text == "83 % line"
    assert efficiency.bars[0].value_text == "88.0 %"
    left, right = efficiency.plot_left, efficiency.plot_right
    axis_max = 100 * (efficiency.reference.x - left) / (right - left) / 83  # fraction per %
    assert abs(efficiency.bars[0].width / (right - left) - 88 * axis_max / 100) < 0.01


def test_no_figures_no_charts_and_ticks_are_round():
    assert run_charts([], line_threshold=0.83) == []
    assert nice_step(12.5) == 5 and nice_step(0.92 * 100) == 25 and nice_step(3.1) == 1
    chart = bar_chart(key="k", title="t", unit="B/s", series_names={},
                      points=[Point("n1", "node", 11e9)], reference=(12.5e9, "line"))
    assert [t.text for t in chart.ticks] == ["0", "5", "10", "15"]
    assert chart.height > chart.axis_y > chart.bars[0].y


def test_large_ticks_read_as_people_write_them_never_in_exponent_form():
    chart = bar_chart(key="k", title="t", unit="CNY", series_names={},
                      points=[Point("y1", "saving", 18_400_000)])
    texts = [t.text for t in chart.ticks]
    assert texts == ["0", "5\u2009M", "10\u2009M", "15\u2009M", "20\u2009M"]
    assert not any("e+" in t for t in texts)
    small = bar_chart(key="k", title="t", unit="tok/s", series_names={},
                      points=[Point("n1", "node", 7_400)])
    assert [t.text for t in small.ticks] == ["0", "2,000", "4,000", "6,000", "8,000"]


def test_a_long_value_stays_inside_the_chart():
    # the business case's cumulative saving: "131,772,800 CNY" at a bar of two thirds of the
    # plot was printed inside a bar narrower than itself and ran out of it
    chart = bar_chart(key="saving", title="t", unit="CNY",
                      points=[Point("year 1", "array", 70_000_000.0),
                              Point("year 2", "array", 131_772_800.0),
                              Point("year 3", "array", 1_000.0)],
                      series_names={"array": "saving"}, value_text=lambda v: f"{v:,.0f} CNY")
    for bar in chart.bars:
        text_w = 7 * len(bar.value_text)
        if bar.text_inside:
            assert bar.width >= text_w, (bar.value_text, bar.width)
        assert bar.text_x + text_w <= chart.width, (bar.value_text, bar.text_x)
