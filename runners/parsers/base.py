"""The contract every parser keeps: raw tool output in, typed measurements out.

A parser is a pure function ``parse(raw: bytes) -> list[MeasurementData]``. It never touches the
database or the network, so stored raw output can be re-parsed at any time. Values are converted
to the canonical unit of ``../shared/spec/METRICS.md`` at this boundary; a parser that cannot
read its input raises :class:`ParseError` naming the tool, the line and what was expected.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

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

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "unit": self.unit,
                "labels": dict(self.labels)}


class Parser(Protocol):
    """What a parser module provides; the registry holds the modules themselves."""

    TOOL: str
    PARSER_VERSION: str

    def parse(self, raw: bytes) -> list[MeasurementData]: ...


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
    """Raw bytes → text: UTF-8 (a leading BOM dropped); ParseError on empty input.

    Works without copying ``raw`` first (a 50 MB fio capture is decoded once, not stripped and
    then decoded)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        text = str(memoryview(raw)[3:], "utf-8", "replace")
    else:
        text = raw.decode("utf-8", errors="replace")
    if not text or text.isspace():  # str.isspace stops at the first other character
        raise ParseError(tool, 0, "output from the tool", "an empty capture")
    return text


def decode_json(tool: str, text: str, opener: str = "{", *, at: int | None = None,
                repeated_ok: bool = False) -> tuple[object, str, int, int]:
    """The first JSON document starting with ``opener`` in ``text``, as ``(document, text, start,
    end)``: in the returned ``text``, ``text[:start]`` is what the tool printed before the
    document and ``text[end:]`` what it printed after.

    One capture holds one document. Text before it (warnings, ``^C``: RUNBOOK §0) and after it is
    tolerated and left to the caller; a *second* document (a line starting with ``opener`` after
    the first one) raises ParseError "several JSON documents", since taking either of two runs
    silently would be wrong. Parsers that read JSON Lines on purpose (vllm_bench) do not use this.
    Bare ``nan``/``-nan``/``inf`` tokens read as null (:func:`null_bare_nonfinite`); the returned
    ``text`` is then the rewritten one (same lines). No document, or a truncated one, raises
    ParseError with the line where reading stopped.

    ``at``: where the document starts, when the caller located it itself (fio: the first line
    that is exactly ``{``, so a ``{`` inside a preamble line is not taken for the document).
    ``repeated_ok``: a following document *identical* to the first (decoded equal) is the same
    result printed twice (iperf 3.16/3.17, esnet/iperf#1716) and is accepted as one; a
    different one is still refused.
    """
    start = text.find(opener) if at is None else at
    if start < 0:
        first = text.strip().splitlines()[0] if text.strip() else ""
        raise ParseError(tool, 1, f"a JSON document starting with {opener!r}", first)
    try:
        document, end = _raw_decode(tool, text, start)
    except _BareNonFinite:
        # Only now pay for the rewrite: the decoder stopped exactly at such a token.
        text = null_bare_nonfinite(text)  # same lines; ``at`` points at the same line start
        start = text.find(opener) if at is None else _line_start(text, text.count("\n", 0, at))
        try:
            document, end = _raw_decode(tool, text, start)
        except _BareNonFinite as error:
            raise ParseError(tool, error.line, "complete JSON (a bare non-finite number)") \
                from None
    following = _following(text, end, opener)
    while following is not None and repeated_ok:
        again_at = following.end() - 1
        try:
            again, again_end = _raw_decode(tool, text, again_at)
        except (ParseError, _BareNonFinite):
            break
        if again != document:
            break
        end = again_end
        following = _following(text, end, opener)
    if following is not None:
        line = text.count("\n", 0, following.end() - 1) + 1
        raise ParseError(tool, line, "one JSON document per capture",
                         "several JSON documents (another one starts here)")
    return document, text, start, end


def _following(text: str, end: int, opener: str) -> re.Match[str] | None:
    """A further document after ``end``: glued to it, or first on a later line."""
    glued = _GLUED[opener].match(text, end)
    return glued if glued is not None else _NEXT_LINE[opener].search(text, end)


def _line_start(text: str, line_index: int) -> int:
    """Offset of the first non-blank character of 0-based line ``line_index``."""
    position = 0
    for _ in range(line_index):
        position = text.index("\n", position) + 1
    while text[position] in " \t":
        position += 1
    return position


def extract_json(tool: str, text: str, opener: str = "{", *,
                 repeated_ok: bool = False) -> tuple[object, str]:
    """Find the first JSON document starting with ``opener`` and decode it.

    Returns ``(document, prefix)`` where ``prefix`` is the text printed before the document (tools
    such as fio print warnings there, RUNBOOK §0). Raises ParseError with the line number when no
    document starts, the document is truncated, or a second document follows (:func:`decode_json`).
    """
    document, text, start, _end = decode_json(tool, text, opener, repeated_ok=repeated_ok)
    return document, text[:start]


class _BareNonFinite(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


def _raw_decode(tool: str, text: str, start: int) -> tuple[object, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as error:
        line = text.count("\n", 0, error.pos) + 1
        if _NONFINITE_AT.match(text, error.pos):
            raise _BareNonFinite(line) from None
        raise ParseError(tool, line, f"complete JSON ({error.msg})") from None
    except RecursionError:
        raise ParseError(tool, text.count("\n", 0, start) + 1,
                         "JSON nested to a sane depth") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits (int_max_str_digits)
        raise ParseError(tool, text.count("\n", 0, start) + 1, "JSON the tool could print",
                         str(error)) from None


_DECODER = json.JSONDecoder()
# A further document: the opener right after the first one, or first on a later line.
_GLUED = {opener: re.compile(r"\s*" + re.escape(opener)) for opener in "{["}
_NEXT_LINE = {opener: re.compile(r"^[ \t]*" + re.escape(opener), re.MULTILINE)
              for opener in "{["}

# A bare non-finite number as C's printf writes it (``nan``, ``-nan``, ``inf``, ``-inf``; also
# JSON-ish ``NaN``/``Infinity``), or the opening quote of a string literal, which is skipped whole.
_NONFINITE = r"-?(?:nan|inf(?:inity)?)(?![\w.])"
_NONFINITE_AT = re.compile(_NONFINITE, re.IGNORECASE)
_BARE_NONFINITE = re.compile(r"(?<![\w.])" + _NONFINITE, re.IGNORECASE)
# The rewrite in one pass without backtracking: each match is a run of text that holds no bare
# token — plain characters, whole string literals, token letters that start none — taken
# possessively, then what stopped it: a bare token, a string that never closes (read to where it
# stops, once: its quotes open nothing either), or the end. Each match starts where the last
# one ended, so nothing is read twice. (Under IGNORECASE, U+0130 and U+0131 match ``i`` too.)
_NONFINITE_FIRST = "nNiI\u0130\u0131-"
_TOKEN_LETTER = re.compile("[" + _NONFINITE_FIRST + "]")
_STRING_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+'
_NO_TOKEN_HERE = r"(?!(?<![\w.])" + _NONFINITE + r")[" + _NONFINITE_FIRST + r"]"
_REWRITE = re.compile(
    r'((?:[^"' + _NONFINITE_FIRST + r']++|"' + _STRING_BODY + r'"|' + _NO_TOKEN_HERE + r")*+)"
    r'(?:(?<![\w.])(' + _NONFINITE + r')|"(' + _STRING_BODY + r")|\Z)",
    re.IGNORECASE)


def _rewritten(match: re.Match[str]) -> str:
    kept, token, unclosed = match.group(1, 2, 3)
    if token is not None:
        return kept + "null"
    if unclosed is not None:  # bare tokens inside still count, as outside any string
        if _TOKEN_LETTER.search(unclosed) is None:
            return kept + '"' + unclosed
        return kept + '"' + _BARE_NONFINITE.sub("null", unclosed)
    return kept


def null_bare_nonfinite(text: str) -> str:
    """Replace bare ``nan``/``-nan``/``inf`` tokens (not inside strings) with ``null``.

    Tools that format doubles with printf print NaN as ``-nan`` (iperf 3.0.x ``lost_percent`` of
    an interval without packets, esnet/iperf#364; fio's ``%f`` floats): strict JSON then fails as
    a whole. After this, the value reads as null, i.e. "no figure" (:func:`as_number`). Line
    numbers are unchanged. :func:`decode_json` calls it only when the decoder stopped at such a
    token, so clean captures pay nothing. Linear in the text (:data:`_REWRITE`).
    """
    return _REWRITE.sub(_rewritten, text)


def finite(tool: str, metric: str, value: float, text: str = "", key: str = "") -> float:
    """``value`` if finite; ParseError otherwise (a sum of huge figures that overflowed)."""
    if math.isfinite(value):
        return value
    line = line_of(text, f'"{key}"') if key else 0
    raise ParseError(tool, line, f"a finite value for {metric}", repr(value))


def impossible(tool: str, key: str, value: float, rule: str, text: str = "",
               line: int | None = None) -> ParseError:
    """The ParseError for a figure that cannot be true (a negative bandwidth, a loss over 100 %,
    a TTFT of 0 with completed requests): such a figure is never stored as a measurement; the
    message names the field, its value and the rule it breaks, on ``line`` (default: the first
    line of ``text`` holding the key)."""
    if line is None:
        line = line_of(text, f'"{key}"') if text else 0
    return ParseError(tool, line, f"a possible {key} ({rule})", f"{key} = {value:g}")


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
