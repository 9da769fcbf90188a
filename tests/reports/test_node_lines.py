"""The per-node parts of a report at site scale, without a database: a chart of more nodes
than the limit draws each series' lowest, median and highest node (aggregates kept); each
node's figures fit one line; the node and inventory lists are one aligned line per node,
East Asian wide characters counted as two columns and overlong cells cut with "…"."""

from reports.render import _width, node_lines, text_lines
from runners.charts import Figure, node_figure_texts, run_charts


def fig(metric, value, unit, node="", derived=False, **labels):
    return Figure(metric, value, unit, node, labels, derived, simulated=True)


def readback(nodes: int) -> list[Figure]:
    figures = [fig("rx_bandwidth", (5.0 + i / 10) * 1e9, "B/s", f"lab-inference-{i}",
                   phase="readback") for i in range(1, nodes + 1)]
    figures.append(fig("rx_bandwidth", 11.0e9, "B/s", derived=True, scope="aggregate",
                       nodes=str(nodes), array_line_rate="12500000000"))
    return figures


def test_a_chart_of_more_nodes_than_the_limit_draws_lowest_median_highest_and_the_aggregate():
    (chart,) = run_charts(readback(20), line_threshold=0.83, node_limit=16)
    assert [g.text for g in chart.labels] == ["lowest", "median", "highest", "all 20 nodes"]
    # 5.1 … 7.0 GB/s: the median of 20 is the mean of the 10th and 11th (6.0 and 6.1)
    assert [b.value_text for b in chart.bars] == ["5.10 GB/s", "6.05 GB/s", "7.00 GB/s",
                                                  "11.00 GB/s"]
    assert chart.bars[-1].series == "aggregate"
    assert chart.reference.text == "line rate 12.50 GB/s"
    assert "20 nodes: each series' lowest, median and highest node value is drawn" in chart.note
    # at the limit, one bar per node as before, and the same chart without a limit
    (at_limit,) = run_charts(readback(16), line_threshold=0.83, node_limit=16)
    assert len(at_limit.bars) == 17 and at_limit.labels[0].text == "lab-inference-1"
    (unlimited,) = run_charts(readback(20), line_threshold=0.83)
    assert len(unlimited.bars) == 21
    # its height does not grow with the nodes
    (many,) = run_charts(readback(128), line_threshold=0.83, node_limit=16)
    assert many.height == chart.height


def test_each_node_gets_its_figures_in_one_line_and_a_range_when_measured_twice():
    texts = node_figure_texts([
        fig("ttft_p50", 17.5, "s", "n1", **{"pass": "measured"}),
        fig("read_bandwidth", 11e9, "B/s", "n1"),
        fig("line_efficiency", 0.88, "ratio", "n1", derived=True),
        fig("rx_bandwidth", 5.0e9, "B/s", "n2", round="1"),
        fig("rx_bandwidth", 5.5e9, "B/s", "n2", round="2"),
        fig("ttft_p50", 12.0, "s", "n2", arm="array"),  # a G3 arm: left out
        fig("ttft_p50", 99.0, "s", "n3", **{"pass": "warmup"}),  # a warm-up: left out
    ])
    assert texts == {"n1": "TTFT p50 17.50 s · read 11.00 GB/s · line 88.0 %",
                     "n2": "read-back 5.00 GB/s – 5.50 GB/s"}


def test_lines_align_their_columns_count_wide_characters_twice_and_cut_long_cells():
    lines = text_lines([["lab-inference-1", "推理节点", "x"], ["n2", "array", "y"],
                        ["a" * 40, "b", "z"]], [28, 10])
    assert _width("推理节点") == 8
    assert lines[0] == "lab-inference-1" + " " * 13 + "  推理节点  x"
    assert lines[1].index("array") == lines[2].index("b") == 30
    assert lines[2].startswith("a" * 27 + "…  ")
    assert all(_width(line.rsplit("  ", 1)[0]) == 38 for line in lines)


def test_a_node_line_says_its_runs_states_and_a_bad_exit():
    rows = [{"gate": "G2", "node": "n1", "runs": 3, "states": "2 parsed, 1 failed",
             "exits": "exit 1 ×1", "exit_ok": False, "figures": "TTFT p50 17.50 s",
             "simulated": True},
            {"gate": "G2", "node": "n2", "runs": 1, "states": "1 parsed", "exits": "exit 0",
             "exit_ok": True, "figures": "—", "simulated": False}]
    first, second = node_lines(rows, final=False)
    assert first["text"].split() == ["n1", "SIM", "3", "runs", "2", "parsed,", "1",
                                     "failed", "·", "exit", "1", "×1", "TTFT", "p50", "17.50",
                                     "s"]
    assert first["bad"] and not second["bad"]
    assert second["text"].split()[:3] == ["n2", "1", "run"]
    assert node_lines([], final=False) == []
