"""The soak's SVG time-series chart, by geometry: where the fault window, the gap, the bound and
the points land, and the x axis in plan hours."""

import re
from datetime import UTC, datetime

import pytest

from runners.soak import charts

PLOT_W = charts.WIDTH - charts.LEFT - charts.RIGHT
PLOT_H = charts.HEIGHT - charts.TOP - charts.BOTTOM


def series(points, faults=()):
    return {"metric": "ttft_p99", "unit": "s", "fault_windows": list(faults),
            "points": [{"epoch": t, "value": v, "node": n} for t, v, n in points]}


def test_it_places_fault_windows_gaps_bounds_and_points_on_the_time_axis():
    faults = [{"name": "drive-out", "start_epoch": 1025.0, "end_epoch": 1040.0,
               "state": "healed"}]
    gap = {"started_at": datetime.fromtimestamp(1050, tz=UTC),
           "ended_at": datetime.fromtimestamp(1060, tz=UTC)}
    svg = charts.series_svg(series([(1000, 0.3, "n1"), (1100, 0.6, "n1")], faults),
                            title="TTFT p99", axis=charts.Axis(1000, 1100, compression=2592),
                            gaps=[gap], bound=(0.375, "opening baseline +25 %"))
    fault = re.search(r'class="fault-window" data-fault="drive-out" x="([\d.]+)" y="[\d.]+" '
                      r'width="([\d.]+)"', svg)
    assert float(fault[1]) == pytest.approx(charts.LEFT + 0.25 * PLOT_W, abs=0.1)
    assert float(fault[2]) == pytest.approx(0.15 * PLOT_W, abs=0.1)
    gap_x = re.search(r'class="collection-gap" x="([\d.]+)"', svg)
    assert float(gap_x[1]) == pytest.approx(charts.LEFT + 0.5 * PLOT_W, abs=0.1)
    # y from 0 to a round top above the largest value (0.6 s): 0.8 s
    points = re.search(r'<polyline class="series" data-node="n1" points="([^"]+)"', svg)[1]
    (x1, y1), (x2, y2) = [tuple(map(float, p.split(","))) for p in points.split()]
    assert (x1, x2) == (pytest.approx(charts.LEFT), pytest.approx(charts.LEFT + PLOT_W))
    assert y1 == pytest.approx(charts.TOP + PLOT_H * (1 - 0.3 / 0.8), abs=0.1)
    bound_y = float(re.search(r'class="bound" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)"', svg)[1])
    assert bound_y == pytest.approx(charts.TOP + PLOT_H * (1 - 0.375 / 0.8), abs=0.1)
    # 100 real seconds × 2592 = 72 plan hours: ticks every 12 h
    assert ">0 h<" in svg and ">72 h<" in svg and ">36 h<" in svg


def test_a_fault_still_on_reaches_the_last_sample_and_a_planned_one_is_dashed():
    faults = [{"name": "link-down", "start_epoch": 1050.0, "end_epoch": None,
               "state": "injected"},
              {"name": "later", "start_epoch": None, "state": "planned",
               "planned_start": 1080.0, "planned_end": 1090.0}]
    svg = charts.series_svg(series([(1000, 1, "a"), (1070, 1, "a")], faults), title="t",
                            axis=charts.Axis(1000, 1100))
    on = re.search(r'data-fault="link-down" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    assert float(on[2]) == pytest.approx(0.2 * PLOT_W, abs=0.1)  # 1050 → 1070, the last point
    assert 'class="fault-planned" data-fault="later"' in svg


def test_ratios_are_drawn_in_percent_up_to_100_and_an_empty_series_says_so():
    errors = {"metric": "request_error_rate", "unit": "ratio", "fault_windows": [],
              "points": [{"epoch": 1000, "value": 0.96, "node": "a"}]}
    svg = charts.series_svg(errors, title="e", axis=charts.Axis(1000, 1100))
    assert ">100%<" in svg and ">150%<" not in svg
    empty = charts.series_svg({**errors, "points": []}, title="e", axis=charts.Axis(0, 10))
    assert "no samples yet" in empty
    with pytest.raises(ValueError, match="ends"):
        charts.series_svg(errors, title="e", axis=charts.Axis(10, 10))
