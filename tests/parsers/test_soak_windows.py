"""Soak window records (``windows.jsonl`` of the node agent): a client result plus the agent's
``soak_*`` keys per line; a failed window carries ``soak_error`` and no figures."""

import pytest

from runners.parsers import soak_windows
from runners.parsers.base import MeasurementData, ParseError

GOOD = (
    b'{"completed":48,"failed":0,"max_concurrency":4,"p99_ttft_ms":812.5,'
    b'"output_throughput":61.25,"soak_window":1,"soak_started":1764590400.0,'
    b'"soak_ended":1764590403.5,"soak_first_completion":1764590400.75,'
    b'"soak_last_completion":1764590403.25,"soak_completion_gap_max_s":0.5,"soak_exit":0,'
    b'"soak_error":null}\n'
    b"\n"
    b'{"soak_window":2,"soak_started":1764590403.5,"soak_ended":1764590407.0,'
    b'"soak_first_completion":null,"soak_last_completion":null,'
    b'"soak_completion_gap_max_s":3.5,"soak_exit":1,"soak_error":"connection refused"}\n'
)


def test_it_reads_a_window_with_its_client_figures():
    first, _second = soak_windows.parse(GOOD)
    assert (first.line, first.index, first.started, first.ended) == (
        1, 1, 1764590400.0, 1764590403.5)
    assert (first.first_completion, first.last_completion) == (1764590400.75, 1764590403.25)
    assert first.completion_gap_max_s == 0.5 and first.error == ""
    figures = {m.metric: m for m in first.bench}
    assert figures["ttft_p99"] == MeasurementData("ttft_p99", 0.8125, "s", {"concurrency": "4"})
    assert figures["output_throughput"].value == 61.25
    assert figures["completed_requests"].value == 48
    assert figures["failed_requests"].value == 0


def test_it_reads_a_window_the_client_failed_without_figures():
    second = soak_windows.parse(GOOD)[1]
    assert (second.line, second.index, second.error, second.bench) == (
        3, 2, "connection refused", ())
    assert second.first_completion is None and second.last_completion is None
    assert second.completion_gap_max_s == 3.5


def test_it_gives_no_record_for_an_empty_range():
    assert soak_windows.parse(b"") == [] and soak_windows.parse(b"\n\n") == []
    assert soak_windows.TOOL == "soak_windows" and soak_windows.PARSER_VERSION == "1"


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"soak_window":3,"soak_started":1.0,', "a JSON object"),
    (b'[1, 2]', "a JSON object"),
    (b'{"soak_window":3,"soak_started":1.0,"soak_completion_gap_max_s":1.0,"soak_error":"x"}',
     "the key 'soak_ended'"),
    (b'{"soak_window":3,"soak_started":"soon","soak_ended":2.0,'
     b'"soak_completion_gap_max_s":1.0,"soak_error":"x"}', "a number for 'soak_started'"),
    (b'{"soak_window":true,"soak_started":1.0,"soak_ended":2.0,'
     b'"soak_completion_gap_max_s":1.0,"soak_error":"x"}', "a number for 'soak_window'"),
    (b'{"soak_window":1.5,"soak_started":1.0,"soak_ended":2.0,'
     b'"soak_completion_gap_max_s":1.0,"soak_error":"x"}', "a window index"),
    (b'{"soak_window":3,"soak_started":1.0,"soak_ended":2.0,'
     b'"soak_completion_gap_max_s":1.0}', "the window's vllm bench result"),
])
def test_it_names_the_line_it_cannot_read(line, expected):
    raw = GOOD + line + b"\n"
    with pytest.raises(ParseError) as error:
        soak_windows.parse(raw)
    assert (error.value.tool, error.value.line) == ("soak_windows", 4)
    assert expected in error.value.expected
    assert "line 4" in str(error.value)
