"""smartctl parser: every corpus sample (expected values read off each file by hand), NVMe/ATA/SCSI
self-test logs, the exit-status bit mask, and the refusals."""

import json
from pathlib import Path

import pytest

from runners.parsers import PARSERS, smartctl
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, by_metric, needs_corpus

SMARTCTL = CORPUS / "smartctl"


def parse_file(name):
    return by_metric(smartctl.parse((SMARTCTL / name).read_bytes()))


def values(m):
    return {metric: (x.value, x.unit) for metric, x in m.items()}


def report(**sections):
    """A smartctl -j -a document (NVMe unless ``device`` says otherwise) with ``sections``."""
    doc = {
        "json_format_version": [1, 0],
        "smartctl": {"version": [7, 4], "argv": ["smartctl", "-j", "-a", "/dev/nvme0"],
                     "exit_status": 0},
        "device": {"name": "/dev/nvme0", "info_name": "/dev/nvme0", "type": "nvme",
                   "protocol": "NVMe"},
        "serial_number": "SN1",
        "smart_status": {"passed": True, "nvme": {"value": 0}},
        "nvme_smart_health_information_log": {"critical_warning": 0, "temperature": 40,
                                              "percentage_used": 1, "media_errors": 0},
        "temperature": {"current": 40},
    }
    doc.update(sections)
    return doc


def ata(**sections):
    doc = report(**sections)
    doc["device"] = {"name": "/dev/sda", "info_name": "/dev/sda [SAT]", "type": "sat",
                     "protocol": "ATA"}
    doc["smart_status"] = {"passed": True}
    del doc["nvme_smart_health_information_log"]
    doc["temperature"] = {"current": 30}
    return doc


def parse(doc, prefix="", suffix=""):
    return by_metric(smartctl.parse((prefix + json.dumps(doc, indent=2) + suffix).encode()))


def nvme_entry(result, code=1, hours=100):
    return {"self_test_code": {"value": code, "string": "Short"},
            "self_test_result": {"value": result, "string": "..."}, "power_on_hours": hours}


def ata_entry(value, passed=None, hours=100):
    status = {"value": value, "string": "..."}
    if passed is not None:
        status["passed"] = passed
    return {"type": {"value": 1, "string": "Short offline"}, "status": status,
            "lifetime_hours": hours}


def scsi_entry(result):
    return {"code": {"value": 1, "string": "Background short"},
            "result": {"value": result, "string": "..."},
            "power_on_time": {"hours": 10, "aka": "accumulated_power_on_hours"}}


# --- corpus: NVMe -------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_reads_an_nvme_drive_with_media_errors_that_still_passes():
    m = parse_file("smartctl-7.0-nvme-media-errors-passed-true.json")
    assert values(m) == {
        "smart_passed": (1, "1"),  # "passed": true
        "critical_warning": (0, "1"),
        "media_errors": (7, "1"),  # the gate must read the counter, not only "passed"
        "temperature": (35 + 273, "K"),  # 35 °C printed as k - 273
        "exit_status": (0, "1"),
    }
    assert m["media_errors"].labels == {"device": "/dev/nvme0", "serial": "S466NX0M776250H"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_healthy_nvme_drive_of_smartctl_7_1():
    m = parse_file("smartctl-7.1-nvme-a-json.json")
    assert values(m) == {"smart_passed": (1, "1"), "critical_warning": (0, "1"),
                         "media_errors": (0, "1"), "temperature": (36 + 273, "K"),
                         "exit_status": (0, "1")}
    # the scrutiny test author renamed the device; the label keeps what the file says
    assert m["temperature"].labels == {"device": "/dev/testfoobarpass",
                                       "serial": "BTNH93710FS91P0B"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_smartctl_7_3_nvme():
    m = parse_file("smartctl-7.3-nvme-all-json.json")
    assert values(m) == {"smart_passed": (1, "1"), "critical_warning": (0, "1"),
                         "media_errors": (0, "1"), "temperature": (39 + 273, "K"),
                         "exit_status": (0, "1")}
    assert m["exit_status"].labels == {"device": "/dev/nvme0", "serial": "REDACTED"}


@needs_corpus
@pytest.mark.corpus
def test_it_reports_no_self_test_verdict_for_an_nvme_log_without_table():
    m = parse_file("smartctl-7.4-nvme-a-json-selftest-log-no-table.json")
    assert values(m) == {"smart_passed": (1, "1"), "critical_warning": (0, "1"),
                         "media_errors": (0, "1"), "temperature": (48 + 273, "K"),
                         "self_test_in_progress": (0, "1"),  # "No self-test in progress"
                         "exit_status": (0, "1")}
    assert "self_test_failures" not in m  # no test logged: insufficient, not a pass
    assert m["smart_passed"].labels == {"device": "/dev/nvme0", "serial": "6D1107091C9583054511"}


# --- corpus: ATA --------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_reads_the_extended_self_test_log_of_smartctl_x():
    m = parse_file("smartctl-7.0-sat-x-full-selftest-log.json")
    assert values(m) == {
        "smart_passed": (1, "1"),
        "temperature": (36 + 273.15, "K"),  # ATA: the drive's own °C
        "self_test_in_progress": (0, "1"),  # ata_smart_data.self_test.status.value 0
        "self_test_failures": (0, "1"),  # extended table[0]: short, "Completed without error"
        "exit_status": (0, "1"),
    }
    assert m["smart_passed"].labels == {"device": "/dev/sda", "serial": "S3YZNB0KB00864E"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_megaraid_disk_that_exits_4_but_passes():
    m = parse_file("smartctl-7.1-sat+megaraid0-exit4-attribute-check-warning.json")
    assert values(m) == {"smart_passed": (1, "1"), "temperature": (36 + 273.15, "K"),
                         "self_test_in_progress": (0, "1"),
                         "self_test_failures": (0, "1"),  # table[0]: short, 35990 h, passed
                         "exit_status": (4, "1")}
    assert smartctl.exit_status_bits(m["exit_status"].value) == ["smart_command_failed"]
    assert m["exit_status"].labels == {"device": "/dev/sda", "serial": "XXXXXXXXXXXX"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_megaraid_disk_with_an_empty_self_test_log():
    m = parse_file("smartctl-7.1-megaraid14-bus6-exit4-nocheck-standby.json")
    assert values(m) == {"smart_passed": (1, "1"), "temperature": (25 + 273.15, "K"),
                         "self_test_in_progress": (0, "1"), "exit_status": (4, "1")}
    assert "self_test_failures" not in m  # "standard": {"revision": 1, "count": 0}
    assert m["smart_passed"].labels == {"device": "/dev/bus/6", "serial": "ZAD2C11G"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_failing_disk_behind_a_usb_bridge():
    m = parse_file("smartctl-7.1-sat-usbjmicron-FAILING-exit216-selftest-readfailure.json")
    assert values(m) == {
        "smart_passed": (0, "1"),  # "passed": false
        "temperature": (25 + 273.15, "K"),
        "self_test_in_progress": (0, "1"),
        # newest entry (table[0], 42 h) is a passed short test; the read failures at 4 h and
        # before are older. smartctl still sets bit 7 for them (not outdated by a later
        # successful *extended* test), so exit_status carries them.
        "self_test_failures": (0, "1"),
        "exit_status": (216, "1"),
    }
    assert smartctl.exit_status_bits(216) == [
        "disk_failing", "prefail_attributes_at_threshold", "error_log_has_errors",
        "self_test_log_has_errors"]
    assert m["exit_status"].labels == {"device": "/dev/sdc", "serial": "MSK423Y20S3HBC"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_an_hdd_whose_self_test_log_is_empty():
    m = parse_file("smartctl-7.3-sat-hdd-all-json-selftest-log.json")
    assert values(m) == {"smart_passed": (1, "1"), "temperature": (49 + 273.15, "K"),
                         "self_test_in_progress": (0, "1"), "exit_status": (0, "1")}
    assert m["temperature"].labels == {"device": "/dev/sda", "serial": "REDACTED"}


# --- corpus: SCSI / SAS -------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize(("name", "celsius", "device", "serial"), [
    ("smartctl-6.7-prerelease-json_format_version-0.1-sas.json", 31, "/dev/sdb",
     "Z4028VRY0000C810BZXB"),
    ("smartctl-7.2-scsi-sas-old-vendor-product-keys.json", 24, "/dev/sdb", "XXXXXXX"),
    ("smartctl-7.3-scsi-sas-renamed-scsi_-keys.json", 34, "/dev/sda", "REDACTED"),
])
def test_it_reads_sas_drives_of_every_format_version(name, celsius, device, serial):
    m = parse_file(name)
    assert values(m) == {"smart_passed": (1, "1"), "temperature": (celsius + 273.15, "K"),
                         "exit_status": (0, "1")}
    assert m["temperature"].labels == {"device": device, "serial": serial}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_numbered_scsi_self_test_keys():
    m = parse_file("smartctl-7.4-scsi-sas-selftest-numbered-keys.json")
    assert values(m) == {"smart_passed": (1, "1"), "temperature": (24 + 273.15, "K"),
                         "self_test_failures": (0, "1"),  # scsi_self_test_0: "Completed"
                         "exit_status": (0, "1")}
    assert m["exit_status"].labels == {"device": "/dev/sdaa", "serial": "XYZZZZ"}


@needs_corpus
@pytest.mark.corpus
def test_it_keeps_only_the_exit_status_of_a_raid_volume():
    m = parse_file("smartctl-7.0-windows-intel-raid1-volume-scsi-exit4.json")
    # no smart_status: no verdict; temperature.current 0 means unknown, not 0 °C
    assert values(m) == {"exit_status": (4, "1")}
    assert m["exit_status"].labels == {"device": "/dev/sdb", "serial": "Volume1"}


@needs_corpus
@pytest.mark.corpus
def test_it_keeps_only_the_exit_status_when_the_device_did_not_open():
    m = parse_file("smartctl-7.0-windows-open-failed-exit2.json")
    assert values(m) == {"exit_status": (2, "1")}
    assert m["exit_status"].labels == {"device": "/dev/sda"}  # from argv: no "device" printed
    assert smartctl.exit_status_bits(m["exit_status"].value) == ["device_open_failed"]


# --- corpus: refusals ---------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", ["smartctl-7.1-scan-j-megaraid-bus.json",
                                  "smartctl-7.1-scan-j-megaraid.json"])
def test_it_refuses_the_device_list_of_a_scan(name):
    with pytest.raises(ParseError) as error:
        smartctl.parse((SMARTCTL / name).read_bytes())
    assert error.value.line == 21  # "devices": [
    assert "smartctl --scan" in str(error.value)
    assert "not a device report" in str(error.value)


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", ["smartctl-info-smart_support-OBJECT-trimmed.json",
                                  "smartctl-info-synology-smart_support-BOOL-trimmed.json"])
def test_it_refuses_trimmed_documents_without_the_smartctl_block(name):
    with pytest.raises(ParseError) as error:
        smartctl.parse((SMARTCTL / name).read_bytes())
    assert "exit_status" in str(error.value)


@needs_corpus
@pytest.mark.corpus
def test_every_smartctl_sample_has_a_test_here():
    source = Path(__file__).read_text()
    missing = [p.name for p in SMARTCTL.iterdir() if p.name not in source]
    assert missing == []


# --- temperature, warnings, labels --------------------------------------------------------------


def test_it_adds_273_to_nvme_and_273_15_to_ata_celsius():
    assert parse(report())["temperature"].value == 313  # 40 °C = 313 K as nvme-cli prints it
    assert parse(ata())["temperature"].value == pytest.approx(303.15)


def test_it_omits_a_temperature_of_zero():
    doc = report(temperature={"current": 0})
    del doc["nvme_smart_health_information_log"]["temperature"]
    assert "temperature" not in parse(doc)


def test_it_takes_the_critical_warning_of_smart_status_without_a_health_log():
    doc = report(smart_status={"passed": False, "nvme": {"value": 4}})  # -H only
    del doc["nvme_smart_health_information_log"]
    m = parse(doc)
    assert values(m)["critical_warning"] == (4, "1")
    assert values(m)["smart_passed"] == (0, "1")
    assert "media_errors" not in m


def test_it_labels_without_a_serial_number():
    doc = report()
    del doc["serial_number"]
    assert parse(doc)["exit_status"].labels == {"device": "/dev/nvme0"}


def test_it_skips_text_before_and_after_the_json():
    m = parse(report(), prefix="smartctl: warning: something\n", suffix="\ntrailing note\n")
    assert m["smart_passed"].value == 1


# --- self-tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("results", "failed"), [
    ([0, 7], 0),  # newest passed, an older one failed
    ([5, 0], 1), ([6], 1), ([7], 1),
    ([1, 7], 0),  # aborted by a self-test command: re-run, not a failure
])
def test_it_reads_the_newest_nvme_self_test(results, failed):
    doc = report(nvme_self_test_log={
        "current_self_test_operation": {"value": 0, "string": "No self-test in progress"},
        "table": [nvme_entry(r, hours=100 - i) for i, r in enumerate(results)]})
    m = parse(doc)
    assert values(m)["self_test_failures"] == (failed, "1")
    assert values(m)["self_test_in_progress"] == (0, "1")


def test_it_flags_an_nvme_self_test_in_progress():
    doc = report(nvme_self_test_log={
        "current_self_test_operation": {"value": 1, "string": "Short self-test in progress"},
        "current_self_test_completion_percent": 30, "table": [nvme_entry(7)]})
    m = parse(doc)
    assert values(m)["self_test_in_progress"] == (1, "1")
    assert values(m)["self_test_failures"] == (1, "1")  # the older, completed test


def test_it_skips_an_ata_test_in_progress_and_reads_the_one_before():
    doc = ata(ata_smart_data={"self_test": {"status": {"value": 249, "string": "in progress"}}},
              ata_smart_self_test_log={"standard": {"revision": 1, "table": [
                  ata_entry(249), ata_entry(121, passed=False)]}})  # 0xF9, then read failure
    m = parse(doc)
    assert values(m)["self_test_in_progress"] == (1, "1")
    assert values(m)["self_test_failures"] == (1, "1")


@pytest.mark.parametrize(("value", "failed"), [(0, 0), (0x10, 0), (0x79, 1), (0x38, 1)])
def test_it_reads_the_ata_status_nibble_when_passed_is_missing(value, failed):
    doc = ata(ata_smart_self_test_log={"standard": {"table": [ata_entry(value)]}})
    assert values(parse(doc))["self_test_failures"] == (failed, "1")


def test_it_prefers_the_extended_ata_log():
    doc = ata(ata_smart_self_test_log={
        "extended": {"table": [ata_entry(121, passed=False)]},
        "standard": {"table": [ata_entry(0, passed=True)]}})
    assert values(parse(doc))["self_test_failures"] == (1, "1")


@pytest.mark.parametrize(("results", "failed"), [([0, 3], 0), ([3, 0], 1), ([15, 7], 1),
                                                  ([1], 0)])
def test_it_reads_numbered_scsi_self_tests(results, failed):
    doc = ata(**{f"scsi_self_test_{i}": scsi_entry(r) for i, r in enumerate(results)})
    doc["device"] = {"name": "/dev/sdb", "type": "scsi", "protocol": "SCSI"}
    assert values(parse(doc))["self_test_failures"] == (failed, "1")


# --- exit status --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "names"), [
    (0, []),
    (1, ["command_line_error"]),
    (2, ["device_open_failed"]),
    (8, ["disk_failing"]),
    (32, ["attributes_were_at_threshold"]),
    (64 + 128, ["error_log_has_errors", "self_test_log_has_errors"]),
    (4.0, ["smart_command_failed"]),
    (256 + 16, ["prefail_attributes_at_threshold", "bit8"]),
])
def test_it_names_the_bits_of_the_exit_status(value, names):
    assert smartctl.exit_status_bits(value) == names


@pytest.mark.parametrize("value", [-1, 2.5, "4", True, None])
def test_it_refuses_to_name_bits_of_a_non_status(value):
    with pytest.raises(ValueError):
        smartctl.exit_status_bits(value)


def test_it_does_not_treat_a_non_zero_exit_status_as_a_parse_failure():
    doc = report()
    doc["smartctl"]["exit_status"] = 4 + 64  # warnings: a command failed, error log entries
    m = parse(doc)
    assert values(m)["exit_status"] == (68, "1")
    assert values(m)["smart_passed"] == (1, "1")
    # bit 3 (DISK FAILING) means FAIL whatever smart_status says (BUGS.md #9)
    doc["smartctl"]["exit_status"] = 8 + 64
    assert values(parse(doc))["smart_passed"] == (0, "1")


@pytest.mark.parametrize("bad", ["four", -4, 2.5, None])
def test_it_refuses_an_exit_status_that_is_not_a_status(bad):
    doc = report()
    doc["smartctl"]["exit_status"] = bad
    with pytest.raises(ParseError) as error:
        parse(doc)
    assert "exit_status" in str(error.value)


# --- refusals -----------------------------------------------------------------------------------


def test_it_is_registered():
    assert PARSERS["smartctl"] is smartctl
    assert smartctl.TOOL == "smartctl" and smartctl.PARSER_VERSION == "2"


@pytest.mark.parametrize("capture", [b"", b" \n"])
def test_it_refuses_empty_output(capture):
    with pytest.raises(ParseError) as error:
        smartctl.parse(capture)
    assert error.value.line == 0


def test_it_reports_the_line_where_truncated_json_stops():
    text = json.dumps(report(), indent=2)
    cut = text[: text.index('"temperature"')]
    with pytest.raises(ParseError) as error:
        smartctl.parse(cut.encode())
    assert error.value.line == cut.count("\n") + 1


def test_it_refuses_a_second_document():
    text = json.dumps(report(), indent=2)
    with pytest.raises(ParseError) as error:
        smartctl.parse((text + "\n" + text).encode())
    assert "several JSON documents" in str(error.value)
    assert error.value.line == text.count("\n") + 2


def test_it_refuses_text_output():
    with pytest.raises(ParseError):
        smartctl.parse(b"smartctl 7.4 2023-08-01 r5530\n=== START OF INFORMATION SECTION ===\n")


def test_it_refuses_an_unknown_json_format_version():
    with pytest.raises(ParseError) as error:
        parse(report(json_format_version=[2, 0]))
    assert "json_format_version" in str(error.value)


@pytest.mark.parametrize(("section", "bad"), [
    ("smart_status", {"passed": "yes"}),
    ("smart_status", [True]),
    ("nvme_smart_health_information_log", {"critical_warning": "high"}),
    ("nvme_self_test_log", {"table": "none"}),
])
def test_it_refuses_values_of_the_wrong_type(section, bad):
    with pytest.raises(ParseError):
        parse(report(**{section: bad}))
