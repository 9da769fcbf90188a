"""``ethtool IF`` text or ``/sys/class/net/IF/speed`` → negotiated link speed (G2, RUNBOOK §3.1).

Two inputs are accepted:

* the plain text of ``ethtool IF``: ``Settings for IF:`` on the first line, then indented
  ``Key: value`` lines, among them ``Speed: 100000Mb/s`` and ``Link detected: yes``;
* the content of ``/sys/class/net/IF/speed``: one integer in Mb/s (RUNBOOK §3.1 prefers it).

Emits:

* ``link_speed`` (B/s) = Mb/s × 1e6 / 8 (100000 Mb/s → 12.5e9 B/s), labels
  ``{"interface": IF}`` from the ``Settings for IF:`` line (``{}`` for the bare sysfs integer).
* ``link_detected`` (1, vocabulary extension), 1 for ``Link detected: yes``, 0 for ``no``, same
  labels; omitted when ethtool prints no such line.

``Speed: Unknown!`` (link down or no driver support), a missing ``Speed:`` line, or a sysfs
value that is not a positive integer (``-1`` when the link is down) raise ParseError naming the
line that was expected. ``ethtool --json`` covers only some commands and its ``speed`` key is
version dependent (RUNBOOK §3.1), so it is not read here. ``ethtool -m`` (module EEPROM) has no
``Speed:`` line and is rejected the same way.
"""

from __future__ import annotations

import re

from runners.parsers.base import MeasurementData, ParseError, decode_text

TOOL = "ethtool"
PARSER_VERSION = "1"

_SETTINGS = re.compile(r"^Settings for (\S+):\s*$")
_SPEED = re.compile(r"^\s*Speed:\s*(.*?)\s*$")
_MBPS = re.compile(r"^(\d+)\s*Mb/s$")
_LINK = re.compile(r"^\s*Link detected:\s*(\S+)")
_BARE_INTEGER = re.compile(r"^-?\d+$")
_MAX_DIGITS = 15  # 10^15 Mb/s is far beyond any link; longer digit runs are not a speed

BYTES_PER_SECOND_PER_MBPS = 1e6 / 8


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    stripped = text.strip()
    if _BARE_INTEGER.match(stripped):
        return [_speed(_mbps(stripped, 1), {}, 1, stripped)]

    lines = text.splitlines()
    labels: dict[str, str] = {}
    for line in lines:
        match = _SETTINGS.match(line.strip())
        if match:
            labels["interface"] = match.group(1)
            break

    speed: MeasurementData | None = None
    measurements: list[MeasurementData] = []
    for number, line in enumerate(lines, start=1):
        match = _SPEED.match(line)
        if match and speed is None:
            mbps = _MBPS.match(match.group(1))
            if not mbps:
                raise ParseError(TOOL, number, "'Speed: <N>Mb/s'", line.strip())
            speed = _speed(_mbps(mbps.group(1), number), labels, number, line.strip())
            measurements.append(speed)
        link = _LINK.match(line)
        if link:
            answer = link.group(1).lower()
            if answer not in ("yes", "no"):
                raise ParseError(TOOL, number, "'Link detected: yes' or 'no'", line.strip())
            value = 1.0 if answer == "yes" else 0.0
            measurements.append(MeasurementData("link_detected", value, "1", dict(labels)))
    if speed is None:
        first = next((line.strip() for line in lines if line.strip()), "")
        raise ParseError(TOOL, 0, "a 'Speed: <N>Mb/s' line (ethtool IF) or an integer (sysfs)",
                         first)
    return measurements


def _speed(mbps: int, labels: dict[str, str], line: int, found: str) -> MeasurementData:
    if mbps <= 0:
        raise ParseError(TOOL, line, "a positive link speed in Mb/s (the link is down?)", found)
    return MeasurementData("link_speed", mbps * BYTES_PER_SECOND_PER_MBPS, "B/s", dict(labels))


def _mbps(digits: str, line: int) -> int:
    """``int(digits)``, refusing digit runs too long to be a speed (``int`` itself raises
    ValueError past 4300 digits)."""
    if len(digits.lstrip("-")) > _MAX_DIGITS:
        raise ParseError(TOOL, line, "a link speed in Mb/s", digits[:20] + "…")
    return int(digits)
