"""``nvme self-test-log DEV -o json`` (nvme-cli) → device self-test outcome for G1 (RUNBOOK §2.3).

Reads the keys nvme-cli has printed from 1.16 to 3.0: ``"Current Device Self-Test Operation"``
(0 none, 1 short, 2 extended, 0xe vendor), ``"Current Device Self-Test Completion"`` (percent)
and ``"List of Valid Reports"``, newest first, each with ``"Self test result"`` (the low nibble of
DSTS; 0xf marks an unused slot, which then has no other key). nvme-cli 3.0 renames the command
``nvme log self-test`` and prints a deprecation warning for the old name on **stderr** only;
stdout stays JSON, and a warning merged in before the JSON is skipped anyway (extract_json).

Emits, unit ``1``, labels ``{}`` (the runner knows the controller it asked):

* ``self_test_in_progress``: 1 while the current operation is non-zero, else 0. The runner polls
  until it is 0 (RUNBOOK §2.3); figures from a poll with 1 describe an *older* test.
* ``self_test_result`` (vocabulary extension): the result code of the newest used entry
  (0 passed; 1-4, 8, 9 aborted, meaning "re-run"; 5-7 failed; RUNBOOK §2.3). Omitted when the
  log holds no used entry.
* ``self_test_failures``: 1 when that newest result is a failure (5 fatal, 6 unknown-segment
  failure, 7 failed segment), else 0. An aborted test is not a failure, but not a pass either:
  criteria should also look at ``self_test_result``. When the log holds no used entry at all the
  outcome cannot be decided and ``self_test_failures`` is **not emitted** (whether or not a test
  is running), so the gate sees insufficient data rather than a pass.

A document without these keys (another command's JSON, the issue fragment of one entry) raises
ParseError naming the missing key.
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

TOOL = "nvme_self_test_log"
PARSER_VERSION = "1"

OPERATION = "Current Device Self-Test Operation"
REPORTS = "List of Valid Reports"
RESULT = "Self test result"
UNUSED = 0xF
FAILURES = frozenset({5, 6, 7})


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    document, _prefix = extract_json(TOOL, text)
    if not isinstance(document, dict):
        raise ParseError(TOOL, 1, "a JSON object from nvme self-test-log")
    for key in (OPERATION, REPORTS):
        if key not in document:
            raise ParseError(TOOL, 0, f"the key {key!r} in the self-test-log JSON")
    reports = document[REPORTS]
    if not isinstance(reports, list):
        raise ParseError(TOOL, line_of(text, f'"{REPORTS}"'), f"a list under {REPORTS!r}")

    operation = _integer(document[OPERATION], OPERATION, text)
    measurements = [MeasurementData("self_test_in_progress", 1.0 if operation else 0.0, "1", {})]

    newest: int | None = None
    for report in reports:
        if not isinstance(report, dict) or RESULT not in report:
            raise ParseError(TOOL, line_of(text, f'"{REPORTS}"'),
                             f"{RESULT!r} in every entry of {REPORTS!r}")
        result = _integer(report[RESULT], RESULT, text) & 0xF  # low nibble of DSTS
        if result != UNUSED:
            newest = result
            break
    if newest is not None:
        measurements += [
            MeasurementData("self_test_result", float(newest), "1", {}),
            MeasurementData("self_test_failures", 1.0 if newest in FAILURES else 0.0, "1", {}),
        ]
    return measurements


def _integer(value: object, key: str, text: str) -> int:
    number = as_number(TOOL, key, value, text)
    if number is None or number != int(number):
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"an integer for {key!r}", repr(value))
    return int(number)
