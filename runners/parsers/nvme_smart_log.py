"""``nvme smart-log DEV -o json`` (nvme-cli) → drive health figures for G1 (RUNBOOK §2.4).

Emits, labels ``{}`` (the device is known to the runner, not printed by nvme-cli):

* ``critical_warning`` (1): the critical-warning bit field as an integer, 0 = none. nvme-cli
  prints an int, or with ``-v``/2.11+ an object whose ``value`` holds the whole field.
* ``media_errors`` (1): media and data integrity errors.
* ``percentage_used`` (%): endurance used, from nvme-cli's ``percent_used`` (may exceed 100).
* ``temperature`` (K): composite temperature, which nvme-cli prints in Kelvin already.

Values come as ints, floats (``310.0``, nvme-cli 2.3) or numeric strings (``"310"``); all are
accepted. A missing key or a value that is not a number raises ParseError naming the key: a
health gate must never pass on a figure it could not read. Sources: RUNBOOK §2.4 and §6 (Kelvin,
``percent_used``, object-valued ``critical_warning``); nvme-cli ``nvme-print-json.c``.
"""

from __future__ import annotations

from runners.parsers.base import (
    MeasurementData,
    ParseError,
    as_number,
    decode_text,
    extract_json,
    line_of,
)

TOOL = "nvme_smart_log"
PARSER_VERSION = "1"

# metric → (keys tried in order, unit)
_FIELDS = {
    "critical_warning": (("critical_warning",), "1"),
    "media_errors": (("media_errors",), "1"),
    "percentage_used": (("percent_used", "percentage_used"), "%"),
    "temperature": (("temperature",), "K"),
}


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    document, _prefix = extract_json(TOOL, text)
    if not isinstance(document, dict):
        raise ParseError(TOOL, 1, "a JSON object from nvme smart-log")
    measurements = []
    for metric, (keys, unit) in _FIELDS.items():
        key = next((k for k in keys if k in document), None)
        if key is None:
            raise ParseError(TOOL, 0, f"the key {keys[0]!r} in the smart-log JSON")
        value = document[key]
        if key == "critical_warning" and isinstance(value, dict):
            if "value" not in value:
                raise ParseError(TOOL, line_of(text, '"critical_warning"'),
                                 "'value' inside the 'critical_warning' object")
            value = value["value"]
        number = as_number(TOOL, key, value, text)
        if number is None:
            raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a number for {key!r}", repr(value))
        measurements.append(MeasurementData(metric, number, unit, {}))
    return measurements
