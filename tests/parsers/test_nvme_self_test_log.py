"""nvme_self_test_log parser: newest used entry decides; unused slots (0xf) are skipped."""

import json

import pytest

from runners.parsers import nvme_self_test_log
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, needs_corpus

FRAGMENT = CORPUS / "nvme" / "nvme-cli-2.x-self-test-log-entry-FRAGMENT-from-issue-1758.txt"

UNUSED = {"Self test result": 15}


def entry(result, code=1, poh=100):
    return {"Self test result": result, "Self test code": code, "Segment number": 0,
            "Valid Diagnostic Information": 0, "Power on hours": poh, "Vendor Specific": 0}


def log(reports, operation=0, completion=0):
    return {"Current Device Self-Test Operation": operation,
            "Current Device Self-Test Completion": completion,
            "List of Valid Reports": reports}


def values(doc_or_text):
    raw = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text, indent=2)
    measurements = nvme_self_test_log.parse(raw.encode())
    assert all(m.unit == "1" and m.labels == {} for m in measurements)
    return {m.metric: m.value for m in measurements}


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_rejects_the_bare_issue_fragment():
    with pytest.raises(ParseError) as error:
        nvme_self_test_log.parse(FRAGMENT.read_bytes())
    assert "Current Device Self-Test Operation" in str(error.value)


@needs_corpus
@pytest.mark.corpus
def test_it_reads_the_issue_entry_inside_a_whole_log():
    # The fragment is one entry of "List of Valid Reports" plus a trailing comma: an extended
    # test ("Self test code":2) that passed ("Self test result":0) at 285 power-on hours.
    element = FRAGMENT.read_text().rstrip().rstrip(",")
    text = ('{"Current Device Self-Test Operation":0,"Current Device Self-Test Completion":0,'
            f'"List of Valid Reports":[{element}, {{"Self test result":15}}]}}')
    assert values(text) == {"self_test_in_progress": 0, "self_test_result": 0,
                            "self_test_failures": 0}


# --- outcomes -----------------------------------------------------------------------------------


def test_it_reports_a_pass():
    assert values(log([entry(0), UNUSED])) == {
        "self_test_in_progress": 0, "self_test_result": 0, "self_test_failures": 0}


@pytest.mark.parametrize("result", [5, 6, 7])
def test_it_reports_a_failure(result):
    v = values(log([entry(result), entry(0)]))
    assert v["self_test_failures"] == 1
    assert v["self_test_result"] == result


def test_it_skips_unused_slots_to_find_the_newest_used_entry():
    v = values(log([UNUSED, UNUSED, entry(7), entry(0)]))
    assert v["self_test_failures"] == 1 and v["self_test_result"] == 7


def test_it_judges_only_the_newest_entry():
    v = values(log([entry(0, poh=200), entry(7, poh=100)]))
    assert v["self_test_failures"] == 0


@pytest.mark.parametrize("result", [1, 2, 3, 4, 8, 9])
def test_it_reports_an_abort_as_no_failure_but_keeps_its_code(result):
    v = values(log([entry(result)]))
    assert v["self_test_failures"] == 0
    assert v["self_test_result"] == result  # criteria can require 0 ("re-run" otherwise)


def test_it_cannot_decide_without_any_used_entry():
    assert values(log([UNUSED] * 20)) == {"self_test_in_progress": 0}
    assert values(log([])) == {"self_test_in_progress": 0}


def test_it_cannot_decide_while_the_first_test_is_running():
    assert values(log([], operation=1, completion=40)) == {"self_test_in_progress": 1}


def test_it_marks_a_poll_taken_while_a_newer_test_runs():
    v = values(log([entry(0)], operation=2, completion=10))
    assert v == {"self_test_in_progress": 1, "self_test_result": 0, "self_test_failures": 0}


def test_it_takes_the_low_nibble_and_hex_strings():
    assert values(log([entry(0x27)]))["self_test_failures"] == 1  # code 2, result 7
    assert values(log([entry("0x5")]))["self_test_result"] == 5


# --- quirks -------------------------------------------------------------------------------------


def test_it_tolerates_the_3_0_deprecation_warning_merged_before_the_json():
    text = ("warning: 'self-test-log' is deprecated, use 'nvme log self-test' instead\n"
            + json.dumps(log([entry(6)])))
    assert values(text)["self_test_failures"] == 1


def test_it_names_a_result_that_is_not_an_integer():
    with pytest.raises(ParseError) as error:
        values(log([entry("passed")]))
    assert "Self test result" in str(error.value)
    with pytest.raises(ParseError):
        values(log([entry(2.5)]))


def test_it_rejects_empty_and_truncated_output():
    with pytest.raises(ParseError) as error:
        nvme_self_test_log.parse(b"")
    assert error.value.line == 0
    text = json.dumps(log([entry(0)]), indent=2)
    with pytest.raises(ParseError) as error:
        nvme_self_test_log.parse(text[:-10].encode())
    assert error.value.line > 1
