"""The parser registry and the shared number helper of base.py."""

import pytest

from runners.parsers import PARSERS, parse_output
from runners.parsers.base import ParseError, as_number, line_of

MINE = ("fio", "nvme_list", "nvme_smart_log", "nvme_self_test_log", "ethtool", "vllm_bench")


def test_it_registers_every_parser_under_its_own_name():
    assert set(MINE) <= set(PARSERS)
    for name, module in PARSERS.items():
        assert module.TOOL == name
        assert callable(module.parse)
    # a version is a whole number that goes up with every change that can change a figure
    assert all(PARSERS[name].PARSER_VERSION.isdigit() for name in PARSERS)
    assert {name: PARSERS[name].PARSER_VERSION for name in ("fio", "nvme_list", "smartctl",
                                                           "iperf3", "vllm_bench")} == {
        "fio": "2", "nvme_list": "2", "smartctl": "2", "iperf3": "2", "vllm_bench": "2"}


def test_it_dispatches_by_tool_name():
    measurements = parse_output("ethtool", b"100000\n")
    assert [(m.metric, m.value, m.unit) for m in measurements] == [("link_speed", 12.5e9, "B/s")]


def test_it_rejects_an_unknown_tool():
    with pytest.raises(ParseError) as error:
        parse_output("iostat", b"anything")
    assert error.value.tool == "iostat"
    assert "fio" in str(error.value)


@pytest.mark.parametrize(("value", "expected"), [
    (7, 7.0), (310.0, 310.0), ("310", 310.0), (" 2.5 ", 2.5), ("0x1f", 31.0),
    (None, None), (float("nan"), None), ("inf", None), ("-nan", None),
])
def test_it_reads_numbers_the_tools_print(value, expected):
    assert as_number("t", "k", value) == expected


@pytest.mark.parametrize("value", ["37 C", True, {}, [], 10**400])
def test_it_names_the_key_of_a_value_that_is_not_a_number(value):
    with pytest.raises(ParseError) as error:
        as_number("t", "temperature", value, '{\n  "temperature": ...\n}')
    assert error.value.line == 2
    assert "temperature" in str(error.value)


def test_it_finds_the_line_of_a_needle():
    assert line_of("a\nb\nc", "c") == 3
    assert line_of("a", "z") == 0
