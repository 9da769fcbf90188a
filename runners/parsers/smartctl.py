"""``smartctl -j -a DEV`` / ``smartctl -j -x DEV`` (smartmontools ≥ 7.0, and the 6.7 pre-release
JSON) → drive health for G1, the alternative to nvme-cli (RUNBOOK §2.5, §6, §7).

Reads NVMe, ATA (SAT, also behind USB bridges and MegaRAID) and SCSI/SAS device reports. Emits,
labels ``{"device": device.name, "serial": serial_number}`` (``serial`` only when printed;
``device`` from the ``argv`` of an open failure that printed no ``device``):

* ``smart_passed`` (1): 1 when ``smart_status.passed`` is true, else 0. **Absent** when smartctl
  printed no ``smart_status`` (a RAID volume, an open failure): no verdict is not a pass.
* ``critical_warning`` (1), ``media_errors`` (1): NVMe only, from
  ``nvme_smart_health_information_log`` (``critical_warning`` falls back to
  ``smart_status.nvme.value``, the same byte, when only ``-H`` was asked). ATA/SCSI attributes are
  not mapped onto them; a failing ATA/SCSI drive shows in ``smart_passed`` and ``exit_status``.
* ``temperature`` (K): smartctl prints **°C**. For NVMe it computed them as ``K − 273`` from the
  drive's Kelvin (``src/nvmeprint.cpp``), so **+273** gives back exactly the Kelvin nvme-cli prints
  (RUNBOOK §2.5 and §7 say "+273"; nvme_smart_log and smartctl then agree to the degree). ATA and
  SCSI drives report whole °C themselves, converted with **+273.15**. NVMe reads
  ``nvme_smart_health_information_log.temperature``, else ``temperature.current``; others read
  ``temperature.current``. A value of 0 means "not reported" (smartctl omits an NVMe temperature
  of 0 K; the Intel RAID volume prints ``current: 0``) and is omitted, never stored as 0 °C.
* ``self_test_failures`` (1): 1 when the newest completed self-test failed, else 0; absent when
  the log has no completed entry (or the report has no log). NVMe (smartctl ≥ 7.4):
  ``nvme_self_test_log.table[0].self_test_result.value`` in {5, 6, 7} (RUNBOOK §2.3; aborts are not
  failures). ATA: ``ata_smart_self_test_log.extended`` (``-x``) or ``.standard`` (``-a``),
  ``table[0].status.passed`` false (without ``passed``: status high nibble 3-8); an entry "in
  progress" (high nibble 0xF) is skipped. SCSI: ``scsi_self_test_0``, ``_1``… (numbered keys, not
  an array), ``result.value`` in {3…7}, 15 (in progress) skipped. Tables are newest first.
  Note: only the *newest* entry counts; smartctl's own exit-status bit 7 ("self-test log has
  errors") also counts older failures not outdated by a later successful extended test.
* ``self_test_in_progress`` (1, vocabulary extension as in nvme_self_test_log): 1 while a test
  runs (NVMe ``nvme_self_test_log.current_self_test_operation.value`` ≠ 0; ATA
  ``ata_smart_data.self_test.status.value`` high nibble 0xF), else 0; absent when not printed.
  While it is 1, ``self_test_failures`` describes an older test.
* ``exit_status`` (1): ``smartctl.exit_status`` as reported, a bit mask (:func:`exit_status_bits`).
  Non-zero is **not** a parse failure: exit 4 with ``passed: true`` is common (MegaRAID, "based on
  an Attribute check"), and an open failure (exit 2, only ``smartctl`` and
  ``json_format_version`` printed) yields ``exit_status`` alone, so the gate sees no health data
  (insufficient) rather than a pass.

Exit-status rules (BUGS.md #9: prometheus-community/smartctl_exporter#265, #152;
matusnovak/prometheus-smartctl#56; netdata PR #21858):

* bit 0 (command line) or bit 1 (device open / IDENTIFY failed, e.g. under ``-T
  verypermissive``, or standby with ``-n``) make the data absent or unreliable: **no health
  figure** is emitted — not ``smart_passed`` even when ``smart_status.passed`` is true, nor
  ``critical_warning``, ``media_errors``, ``temperature`` or self-test figures — only
  ``exit_status``, so the gate reads "could not assess", never PASS.
* bit 3 (DISK FAILING) or bit 4 (prefail attribute ≤ threshold now) give ``smart_passed`` 0
  whatever ``smart_status`` says. Bit 7 (self-test log has errors, also older failures) stays
  in ``exit_status``; ``self_test_failures`` keeps its METRICS.md meaning (the newest entry).
* bits 2, 5 and 6 are warnings: the data is read as usual.
* Exit 0 with NVMe ``media_errors`` > 0 or ``critical_warning`` ≠ 0 still reports those
  figures (smartctl-7.0 scrutiny sample): the gate fails on them, not on ``passed``.

Schema drift (BUGS.md #10: smartmontools#583, scrutiny PR #1010): ``extended`` or
``standard`` ATA self-test logs, numbered ``scsi_self_test_N`` keys, an NVMe log without
``table`` (no test run: no figure, not an error); identity keys are not read.

Refused with ParseError: empty output, no JSON, truncated JSON, several JSON documents, the
device list of ``smartctl --scan -j`` (not a device report), a document without
``smartctl.exit_status`` (every smartctl JSON has it; the trimmed ``-i`` samples of scrutiny do
not), a ``json_format_version`` other than 0.x/1.x, and values of the wrong type.

Sources: smartmontools ``src/nvmeprint.cpp`` (``k - 273``, ``smart_status``), ``smartctl.8``
EXIT STATUS, RUNBOOK §2.3/§2.5; the corpus ``smartctl/`` samples (SOURCES.md).
"""

from __future__ import annotations

import re
from typing import Any

from runners.parsers.base import (
    MeasurementData,
    ParseError,
    as_number,
    decode_text,
    extract_json,
    finite,
    line_of,
)

TOOL = "smartctl"
PARSER_VERSION = "2"  # 2: exit bits 0/1 → no health figure; bits 3/4 → not passed

# smartctl.8, EXIT STATUS: bit i of the exit status → name.
EXIT_STATUS_BITS = (
    "command_line_error",  # 0: command line did not parse
    "device_open_failed",  # 1: open failed, no IDENTIFY answer, or device in low-power mode
    "smart_command_failed",  # 2: a SMART or other command failed, or a checksum error
    "disk_failing",  # 3: SMART status "DISK FAILING" (NVMe: critical_warning != 0)
    "prefail_attributes_at_threshold",  # 4: prefail attributes <= threshold
    "attributes_were_at_threshold",  # 5: attributes <= threshold some time in the past
    "error_log_has_errors",  # 6: the device error log has entries
    "self_test_log_has_errors",  # 7: the self-test log has (not outdated) failures
)

UNUSABLE_BITS = 0b11  # bits 0-1: command line error, device open failed
FAILING_BITS = 0b11000  # bits 3-4: DISK FAILING, prefail attribute at or below threshold now

NVME_KELVIN_OFFSET = 273.0  # exact inverse of smartctl's ``k - 273``
CELSIUS_TO_KELVIN = 273.15
NVME_FAILURES = frozenset({5, 6, 7})  # RUNBOOK §2.3
ATA_FAILURES = frozenset(range(3, 9))  # status high nibble: 3 fatal … 8 handling damage
SCSI_FAILURES = frozenset({3, 4, 5, 6, 7})  # SPC self-test results: error / failed segment
IN_PROGRESS_NIBBLE = 0xF
SCSI_IN_PROGRESS = 15
_SCSI_SELF_TEST = re.compile(r"^scsi_self_test_(\d+)$")


def exit_status_bits(value: int | float) -> list[str]:
    """The names of the bits set in smartctl's exit status, lowest first (``216`` →
    ``["disk_failing", "prefail_attributes_at_threshold", "error_log_has_errors",
    "self_test_log_has_errors"]``; ``0`` → ``[]``). Bits above 7 (not defined) are named
    ``"bit8"``… ValueError for a negative or fractional value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"an exit status is a non-negative integer, not {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"an exit status is a non-negative integer, not {value!r}")
        value = int(value)
    if value < 0:
        raise ValueError(f"an exit status is a non-negative integer, not {value!r}")
    return [EXIT_STATUS_BITS[bit] if bit < len(EXIT_STATUS_BITS) else f"bit{bit}"
            for bit in range(value.bit_length()) if value >> bit & 1]


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    document, _prefix = extract_json(TOOL, text)
    if not isinstance(document, dict):
        raise ParseError(TOOL, 1, "a JSON object from smartctl -j")
    if "devices" in document and "device" not in document:
        raise ParseError(TOOL, line_of(text, '"devices"'),
                         "a device report (smartctl -j -a DEV)",
                         "the device list of smartctl --scan, which is not a device report")
    head = document.get("smartctl")
    if not isinstance(head, dict) or "exit_status" not in head:
        raise ParseError(TOOL, line_of(text, '"smartctl"'),
                         "the 'smartctl' object with 'exit_status' that smartctl -j prints",
                         ", ".join(str(key) for key in list(document)[:4]))
    _check_format(document.get("json_format_version"), text)
    exit_status = _integer(head["exit_status"], "exit_status", text)

    labels = _labels(document, head)
    nvme = _is_nvme(document)
    measurements: list[MeasurementData] = []

    def add(metric: str, value: float, unit: str, key: str = "") -> None:
        value = finite(TOOL, metric, value, text, key)
        measurements.append(MeasurementData(metric, value, unit, dict(labels)))

    if exit_status & UNUSABLE_BITS:  # bits 0-1: no health verdict may be reported
        add("exit_status", float(exit_status), "1", "exit_status")
        return measurements

    status = _object(document, "smart_status", text)
    if status is not None and "passed" in status:
        passed = status["passed"]
        if not isinstance(passed, bool):
            raise ParseError(TOOL, line_of(text, '"passed"'), "true or false for 'passed'",
                             repr(passed))
        add("smart_passed", 1.0 if passed and not exit_status & FAILING_BITS else 0.0, "1")
    elif exit_status & FAILING_BITS:
        add("smart_passed", 0.0, "1")

    health = _object(document, "nvme_smart_health_information_log", text)
    warning = _number(health, "critical_warning", text)
    if warning is None and nvme and status is not None:
        warning = _number(_object(status, "nvme", text), "value", text)
    if warning is not None:
        add("critical_warning", warning, "1", "critical_warning")
    media_errors = _number(health, "media_errors", text)
    if media_errors is not None:
        add("media_errors", media_errors, "1", "media_errors")

    celsius = _number(health, "temperature", text)
    if celsius is None:
        celsius = _number(_object(document, "temperature", text), "current", text)
    if celsius:  # None: not printed; 0: "not reported"
        offset = NVME_KELVIN_OFFSET if nvme else CELSIUS_TO_KELVIN
        add("temperature", celsius + offset, "K", "temperature")

    in_progress = _self_test_in_progress(document, text)
    if in_progress is not None:
        add("self_test_in_progress", 1.0 if in_progress else 0.0, "1")
    failed = _newest_self_test_failed(document, text)
    if failed is not None:
        add("self_test_failures", 1.0 if failed else 0.0, "1")

    add("exit_status", float(exit_status), "1", "exit_status")
    return measurements


# --- the document -------------------------------------------------------------------------------


def _check_format(version: object, text: str) -> None:
    """json_format_version is [1, 0] since 7.0 and [0, 1] in the 6.7 pre-release; a major
    version above 1 would mean renamed keys, read wrongly rather than not at all."""
    if version is None:
        return
    major = version[0] if isinstance(version, list) and version else None
    if isinstance(major, bool) or not isinstance(major, int) or major not in (0, 1):
        raise ParseError(TOOL, line_of(text, '"json_format_version"'),
                         "json_format_version 0.x or 1.x", repr(version))


def _labels(document: dict[str, Any], head: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    device = document.get("device")
    name = device.get("name") if isinstance(device, dict) else None
    if not isinstance(name, str) or not name.strip():
        argv = head.get("argv")
        paths = [arg for arg in argv if isinstance(arg, str) and arg.startswith("/dev/")] \
            if isinstance(argv, list) else []
        name = paths[-1] if paths else None
    if isinstance(name, str) and name.strip():
        labels["device"] = name.strip()
    serial = document.get("serial_number")
    if isinstance(serial, str | int) and not isinstance(serial, bool) and str(serial).strip():
        labels["serial"] = str(serial).strip()
    return labels


def _is_nvme(document: dict[str, Any]) -> bool:
    device = document.get("device")
    protocol = device.get("protocol") if isinstance(device, dict) else None
    if isinstance(protocol, str):
        return protocol.strip().lower() == "nvme"
    return "nvme_smart_health_information_log" in document


def _object(container: dict[str, Any] | None, key: str, text: str) -> dict[str, Any] | None:
    """``container[key]`` when it is an object, None when absent or null; ParseError for any
    other type (a health figure must not be misread)."""
    if container is None or container.get(key) is None:
        return None
    value = container[key]
    if not isinstance(value, dict):
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"an object for {key!r}",
                         repr(value)[:80])
    return value


def _number(container: dict[str, Any] | None, key: str, text: str) -> float | None:
    if container is None:
        return None
    return as_number(TOOL, key, container.get(key), text)


def _integer(value: object, key: str, text: str) -> int:
    number = as_number(TOOL, key, value, text)
    if number is None or number != int(number) or number < 0:
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a non-negative integer for {key!r}",
                         repr(value))
    return int(number)


def _list(container: dict[str, Any], key: str, text: str) -> list[Any]:
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a list for {key!r}", repr(value)[:80])
    return value


# --- self-tests ---------------------------------------------------------------------------------


def _self_test_in_progress(document: dict[str, Any], text: str) -> bool | None:
    log = _object(document, "nvme_self_test_log", text)
    operation = _object(log, "current_self_test_operation", text)
    value = _number(operation, "value", text)
    if value is not None:
        return value != 0
    self_test = _object(_object(document, "ata_smart_data", text), "self_test", text)
    value = _number(_object(self_test, "status", text), "value", text)
    if value is not None:
        return (int(value) >> 4) & 0xF == IN_PROGRESS_NIBBLE
    return None


def _newest_self_test_failed(document: dict[str, Any], text: str) -> bool | None:
    """Whether the newest completed self-test failed; None when the log has no such entry."""
    nvme_log = _object(document, "nvme_self_test_log", text)
    if nvme_log is not None:
        for entry in _list(nvme_log, "table", text):
            result = _number(_entry_object(entry, "self_test_result", text), "value", text)
            if result is not None and int(result) & 0xF != 0xF:  # 0xF: unused slot
                return int(result) & 0xF in NVME_FAILURES
        return None

    ata_log = _object(document, "ata_smart_self_test_log", text)
    if ata_log is not None:
        # -x prints the GP log as "extended" (a superset of the SMART log); -a prints "standard".
        for name in ("extended", "standard"):
            section = _object(ata_log, name, text)
            for entry in _list(section, "table", text) if section is not None else []:
                status = _entry_object(entry, "status", text)
                value = _number(status, "value", text)
                nibble = (int(value) >> 4) & 0xF if value is not None else None
                if nibble == IN_PROGRESS_NIBBLE:
                    continue
                passed = status.get("passed") if status is not None else None
                if isinstance(passed, bool):
                    return not passed
                if nibble is not None:
                    return nibble in ATA_FAILURES
        return None

    numbered = sorted((int(match.group(1)), key) for key in document
                      if (match := _SCSI_SELF_TEST.match(str(key))))
    for _index, key in numbered:
        result = _number(_object(_object(document, key, text), "result", text), "value", text)
        if result is None or int(result) == SCSI_IN_PROGRESS:
            continue
        return int(result) in SCSI_FAILURES
    return None


def _entry_object(entry: object, key: str, text: str) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        raise ParseError(TOOL, line_of(text, '"table"'), "objects in the self-test 'table'",
                         repr(entry)[:80])
    return _object(entry, key, text)
