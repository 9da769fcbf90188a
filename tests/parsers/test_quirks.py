"""Quirks every parser reading one JSON document shares (base.decode_json, base.decode_text):
text around the document, a second document, bare ``-nan``, empty captures."""

import json

import pytest

from runners.parsers import PARSERS, bom_checklist, nvme_list, nvme_self_test_log, nvme_smart_log
from runners.parsers.base import ParseError, decode_json, decode_text, null_bare_nonfinite

# one valid capture per single-document JSON parser (vllm_bench reads JSON Lines on purpose)
VALID = {
    "fio": {"jobs": [{"jobname": "r", "error": 0, "read": {"bw_bytes": 10, "iops": 1}}]},
    "nvme_list": {"Devices": [{"DevicePath": "/dev/nvme0n1", "NameSpace": 1,
                               "SerialNumber": "S1"}]},
    "nvme_smart_log": {"critical_warning": 0, "temperature": 310, "percent_used": 1,
                       "media_errors": 0},
    "nvme_self_test_log": {"Current Device Self-Test Operation": 0,
                           "List of Valid Reports": [{"Self test result": 0}]},
    "bom_checklist": {"items": [{"position": 1, "ticked_at": "2026-01-01"}]},
    "smartctl": {"smartctl": {"exit_status": 0}, "device": {"name": "/dev/nvme0"}},
    "iperf3": {"end": {"sum_sent": {"bits_per_second": 8}, "sum_received":
                       {"bits_per_second": 8}}},
}


def text(tool):
    return json.dumps(VALID[tool], indent=2)


@pytest.mark.parametrize("tool", sorted(VALID))
def test_it_reads_one_document_between_warnings(tool):
    capture = f"warning: before\n{text(tool)}\nnote: after {{not json}}\n"
    assert PARSERS[tool].parse(capture.encode())


# iperf3 prints an identical document twice (esnet/iperf#1716): one result (test_bugs_iperf3).
@pytest.mark.parametrize("tool", sorted(set(VALID) - {"iperf3"}))
@pytest.mark.parametrize("separator", ["\n", "", "\n\n  "])
def test_it_refuses_several_documents(tool, separator):
    with pytest.raises(ParseError) as error:
        PARSERS[tool].parse((text(tool) + separator + text(tool)).encode())
    assert "several JSON documents" in str(error.value)
    assert error.value.tool == tool
    assert error.value.line == text(tool).count("\n") + 1 + separator.count("\n")


# nvme_list reads a blank capture as zero drives (nvme-cli 1.2, nvme-cli#173; test_nvme_list).
@pytest.mark.parametrize("tool", sorted(set(PARSERS) - {"nvme_list"}))
@pytest.mark.parametrize("capture", [b"", b" \r\n\t", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n",
                                     b"\x1c\x1d\n", "\u2028\n".encode()])
def test_every_parser_calls_a_blank_capture_empty(tool, capture):
    with pytest.raises(ParseError) as error:
        PARSERS[tool].parse(capture)
    assert error.value.line == 0  # the whole input is at fault


def test_it_maps_bare_non_finite_tokens_outside_strings_only():
    raw = '{"a": -nan, "b": "x: nan, inf", "c": [inf, -inf, 1], "d": NaN, "e": "\\"nan"}'
    assert json.loads(null_bare_nonfinite(raw)) == {"a": None, "b": "x: nan, inf",
                                                    "c": [None, None, 1], "d": None,
                                                    "e": '"nan'}


def test_it_rewrites_only_when_the_decoder_stops_at_such_a_token():
    clean = '{"info": "nan inf", "x": 1}'
    document, returned, start, end = decode_json("t", clean)
    assert returned is clean and (start, end) == (0, len(clean))
    document, returned, _, _ = decode_json("t", 'x\n{"a":\n -nan}')
    assert document == {"a": None}
    assert returned.count("\n") == 2


def test_it_names_the_line_of_garbage_after_a_bare_nan():
    with pytest.raises(ParseError) as error:
        decode_json("t", '{"a": -nan,\n "b": nonsense}')
    assert error.value.line == 2


@pytest.mark.parametrize(("capture", "reason"), [
    (b'{"a": ' + b"[" * 100_000, "sane depth"),
    (b'{"a": ' + b"9" * 5000 + b"}", "4300"),
])
def test_it_refuses_json_python_cannot_hold(capture, reason):
    with pytest.raises(ParseError) as error:
        decode_json("t", decode_text("t", capture))
    assert reason in str(error.value)


def test_it_drops_a_bom_without_copying_the_rest():
    assert decode_text("t", b"\xef\xbb\xbf{}") == "{}"


def test_it_refuses_a_bom_checklist_item_that_is_not_an_object():
    with pytest.raises(ParseError):
        bom_checklist.parse(b'{"items": [{"ticked_at": null}, 3]}')


@pytest.mark.parametrize("shape", [
    {"Devices": [{"Subsystems": [{"Controllers": 5}]}]},
    {"Devices": [{"Subsystems": [{"Controllers": [{"Namespaces": "nvme0n1"}]}]}]},
    {"Devices": [{"Subsystems": [{"Namespaces": [{"Paths": {"a": 1}}]}]}]},
])
def test_it_refuses_nvme_list_members_that_are_not_lists(shape):
    with pytest.raises(ParseError):
        nvme_list.parse(json.dumps(shape).encode())


def test_nvme_parsers_read_a_bare_nan_as_no_figure():
    log = '{"Current Device Self-Test Operation": 0, "Current Device Self-Test Completion": nan,'
    log += ' "List of Valid Reports": [{"Self test result": 0}]}'
    assert nvme_self_test_log.parse(log.encode())
    smart = '{"critical_warning": 0, "temperature": -nan, "percent_used": 1, "media_errors": 0}'
    with pytest.raises(ParseError) as error:  # required figure: no figure is refused
        nvme_smart_log.parse(smart.encode())
    assert "temperature" in str(error.value)
