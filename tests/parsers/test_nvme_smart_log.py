"""nvme_smart_log parser: int, float, string and object-valued fields of ``nvme smart-log``."""

import json

import pytest

from runners.parsers import nvme_smart_log
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, needs_corpus

NVME = CORPUS / "nvme"

BASE = {"critical_warning": 0, "temperature": 310, "avail_spare": 100, "spare_thresh": 5,
        "percent_used": 2, "media_errors": 0, "num_err_log_entries": 0}


def values(measurements):
    return {m.metric: (m.value, m.unit) for m in measurements}


def parse(doc):
    return nvme_smart_log.parse(json.dumps(doc).encode())


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", [
    "nvme-cli-2.3-smart-log-int.json",
    "nvme-cli-2.3-smart-log-float-values.json",  # 310.0, 2.0
    "nvme-cli-2.3-smart-log-string-values.json",  # "310", "2"
])
def test_it_reads_the_same_log_printed_three_ways(name):
    m = nvme_smart_log.parse((NVME / name).read_bytes())
    assert values(m) == {"critical_warning": (0, "1"), "media_errors": (0, "1"),
                         "percentage_used": (2, "%"), "temperature": (310, "K")}
    assert all(x.labels == {} for x in m)


@needs_corpus
@pytest.mark.corpus
def test_it_reads_critical_warning_as_an_object():
    m = nvme_smart_log.parse((NVME / "nvme-cli-2.11-smart-log-critical_warning-object.json")
                             .read_bytes())
    assert values(m) == {"critical_warning": (0, "1"), "media_errors": (0, "1"),
                         "percentage_used": (30, "%"), "temperature": (324, "K")}


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", [
    "nvme-cli-1.x-id-ctrl-WDC-SN730-kelvin-padded-strings.json",
    "nvme-cli-2.2.1-ana-log-json-trailing-space-key-from-issue-1994.json",
    "nvme-cli-2.5-ana-log-o-json-prints-TEXT-from-issue-1994.txt",
])
def test_it_rejects_other_commands_output(name):
    with pytest.raises(ParseError):
        nvme_smart_log.parse((NVME / name).read_bytes())


# --- quirks -------------------------------------------------------------------------------------


def test_it_takes_the_value_of_a_warning_object():
    m = parse({**BASE, "critical_warning": {"value": 4, "available_spare": 0,
                                            "temp_threshold": 0, "reliability_degraded": 1}})
    assert values(m)["critical_warning"] == (4, "1")


def test_it_keeps_kelvin_and_percent_used_above_100():
    m = parse({**BASE, "temperature": 358, "percent_used": 112})
    assert values(m)["temperature"] == (358, "K")
    assert values(m)["percentage_used"] == (112, "%")


def test_it_reads_large_counters():
    m = parse({**BASE, "media_errors": 2**70})
    assert values(m)["media_errors"][0] == pytest.approx(2**70)


@pytest.mark.parametrize(("key", "bad"), [
    ("temperature", "37 C"),
    ("media_errors", "many"),
    ("percent_used", None),
])
def test_it_names_the_key_whose_value_is_not_a_number(key, bad):
    with pytest.raises(ParseError) as error:
        parse({**BASE, key: bad})
    assert key in str(error.value)


def test_it_names_the_line_of_a_nan_value():
    text = ('{\n"critical_warning": 0,\n"temperature": NaN,\n'
            '"percent_used": 1,\n"media_errors": 0\n}')
    with pytest.raises(ParseError) as error:
        nvme_smart_log.parse(text.encode())
    assert error.value.line == 3
    assert "temperature" in str(error.value)


def test_it_names_a_missing_key():
    doc = dict(BASE)
    del doc["media_errors"]
    with pytest.raises(ParseError) as error:
        parse(doc)
    assert "media_errors" in str(error.value)


def test_it_rejects_an_object_without_value():
    with pytest.raises(ParseError) as error:
        parse({**BASE, "critical_warning": {"available_spare": 0}})
    assert "value" in str(error.value)


def test_it_rejects_empty_and_truncated_output():
    with pytest.raises(ParseError):
        nvme_smart_log.parse(b"")
    with pytest.raises(ParseError) as error:
        nvme_smart_log.parse(b'{\n  "critical_warning": 0,\n  "temperature": 3')
    assert error.value.line == 3
