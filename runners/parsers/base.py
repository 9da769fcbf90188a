"""The contract every parser keeps: raw tool output in, typed measurements out.

A parser is a pure function ``parse(raw: bytes) -> list[MeasurementData]``. It never touches the
database or the network, so stored raw output can be re-parsed at any time. Values are converted
to the canonical unit of ``../shared/spec/METRICS.md`` at this boundary; a parser that cannot
read its input raises :class:`ParseError` naming the tool, the line and what was expected.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

# The closed set of units a measurement may carry (METRICS.md). Display conversion lives in the
# templates' filters; storage is always in one of these.
UNITS = frozenset({"B", "B/s", "1/s", "s", "1", "%", "K", "tok/s", "ratio"})


@dataclass(frozen=True)
class MeasurementData:
    """One parsed figure: ``metric`` (METRICS.md name), ``value`` (float, canonical unit),
    ``unit`` (one of :data:`UNITS`) and ``labels`` (str → str, what tells two measurements of the
    same metric apart: job, device, serial, concurrency…)."""

    metric: str
    value: float
    unit: str
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r} of {self.metric} is not one of {sorted(UNITS)}")
        if not isinstance(self.value, int | float) or math.isnan(self.value) or math.isinf(
            self.value
        ):
            raise ValueError(f"{self.metric} has no finite value: {self.value!r}")

    def as_json(self) -> dict:
        return {"metric": self.metric, "value": self.value, "unit": self.unit,
                "labels": dict(self.labels)}


class ParseError(ValueError):
    """Raised when raw output cannot be turned into measurements.

    ``tool`` is the parser name, ``line`` the 1-based line of the raw text where reading failed
    (0 when the whole input is at fault, e.g. empty), ``expected`` what the parser looked for.
    """

    def __init__(self, tool: str, line: int, expected: str, found: str = "") -> None:
        self.tool, self.line, self.expected, self.found = tool, line, expected, found
        where = f"line {line}" if line else "input"
        message = f"{tool}: {where}: expected {expected}"
        if found:
            message += f", found {found[:80]!r}"
        super().__init__(message)


def decode_text(tool: str, raw: bytes) -> str:
    """Raw bytes → text: UTF-8 (a leading BOM dropped); ParseError on empty input."""
    if not raw or not raw.strip():
        raise ParseError(tool, 0, "output from the tool", "an empty capture")
    return raw.decode("utf-8", errors="replace").lstrip("\ufeff")


def extract_json(tool: str, text: str, opener: str = "{") -> tuple[object, str]:
    """Find the first JSON document starting with ``opener`` and decode it.

    Returns ``(document, prefix)`` where ``prefix`` is the text printed before the document (tools
    such as fio print warnings there, RUNBOOK §0). Raises ParseError with the line number when no
    document starts or the document is truncated.
    """
    start = text.find(opener)
    if start < 0:
        first = text.strip().splitlines()[0] if text.strip() else ""
        raise ParseError(tool, 1, f"a JSON document starting with {opener!r}", first)
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as error:
        line = text.count("\n", 0, error.pos) + 1
        raise ParseError(tool, line, f"complete JSON ({error.msg})") from None
    return document, text[:start]


def line_of(text: str, needle: str) -> int:
    """1-based line of the first ``needle`` in ``text``, 0 when absent (for error messages)."""
    pos = text.find(needle)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 0


def as_number(tool: str, key: str, value: object, text: str = "") -> float | None:
    """One JSON value → a finite float, or None when the tool printed "no figure".

    Tools print numbers as ints, floats (``310.0``) or numeric strings (``"310"``, ``"0x1f"``);
    all are accepted. ``null``, NaN and ±infinity (as numbers or as strings such as ``"inf"``)
    mean "no figure" and give None: the caller decides whether that is an error. Anything else
    (``"37 C"``, ``true``, an object) raises ParseError naming ``key``, on its line in ``text``.
    """
    if value is None:
        return None
    number: float | None = None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            word = value.strip().lower()
            number = float(int(word, 16)) if word.startswith("0x") else float(word)
    except (ValueError, OverflowError):
        number = None
    if number is None:
        raise ParseError(tool, line_of(text, f'"{key}"'), f"a number for {key!r}", repr(value))
    if math.isnan(number) or math.isinf(number):
        return None
    return number
