"""``iperf3 -c HOST -J`` (or the server's ``iperf3 -s -J``) → end-of-test network throughput.

Reads the totals of the ``end`` object iperf3 prints once the test is over (iperf 3.0 → 3.x;
interval samples are ignored: with ``--omit`` the first ones are excluded from the totals anyway).
Emits, labels ``{"protocol": "tcp" | "udp", "streams": str(n)}`` (``start.test_start.protocol``
and ``num_streams``; without ``test_start`` the protocol is inferred from the ``end`` shape and
``n`` is the number of ``end.streams``):

* ``sent_bandwidth``, ``received_bandwidth`` (B/s) = ``bits_per_second`` ÷ 8 (iperf3's bits are
  decimal, 10^6 per Mbit) of ``end.sum_sent`` and ``end.sum_received`` (TCP, and UDP from the
  releases that print them). UDP from older releases (3.9 and before) prints only ``end.sum``,
  the sender's total: ``sent_bandwidth`` is that, and ``received_bandwidth`` is that × (1 −
  ``lost_packets``/``packets``), the share of datagrams the receiver reported as arrived
  (omitted when ``packets`` is 0 or absent).
* ``retransmits`` (1): ``end.sum_sent.retransmits``, TCP only (absent for UDP, and where the OS
  does not report retransmits).

Refused with ParseError: empty output, the text report of a run without ``-J`` (no JSON), a
truncated document (with the line where it stops), several JSON documents, and any document
with a top-level ``error`` — iperf3 writes its error there ("error - unable to connect to server:
Connection refused", "interrupt - the client has terminated"), and the message surfaces it. The
interrupted capture ``^C{…`` is refused that way although its ``end`` looks complete: the
receiver's total is 0. An ``end`` without totals and without ``error`` (the client was killed
before the test started) raises "no end totals": absence of ``error`` is not success.

Quirks: text before the JSON (``^C``, warnings: RUNBOOK §0), CRLF line ends, tab or space
indentation, and bare ``-nan``/``nan``/``inf`` tokens that iperf 3.0.x prints for an interval
without packets (esnet/iperf#364) — they read as null (base.null_bare_nonfinite), so such a
document still parses; a total that is NaN is refused as not a number.

Rules from the public bug reports (BUGS.md):

* #11 (esnet/iperf#364, #370, #613, #826, #1489) UDP: the receiver's figures are
  ``end.sum_received`` (iperf ≥ 3.10) or ``end.sum``. When it counted no datagram
  (``packets`` 0 or absent, ``lost_percent`` NaN/null, a ``jitter_ms`` like 6.1e8 next to
  ``packets`` 0) the parse fails with "no datagrams received" — never a sent rate alone, never a
  received figure made up. A ``lost_percent`` outside 0…100 (iperf 3.9/3.12 accounting under
  overload, #1489: 179.6 %), ``lost_packets`` above ``packets``, and any negative bandwidth are
  impossible figures: ParseError naming the field and its value (base.impossible).
* #12 (esnet/iperf#1716, #1223, #1776, #1491): the same document printed twice is one result
  (base.decode_json ``repeated_ok``); two different documents are refused; ``warning:`` lines
  before the JSON and ``^C`` are skipped; a truncated document is a failed run.
* #13 (esnet/iperf#167, #545, #1413): success needs no ``error`` key, a non-empty ``intervals``
  list, and ``end.sum_received`` (TCP) or ``end.sum``/``sum_received`` (UDP); bits are SI
  (÷ 8 → B/s).

Sources: corpus ``iperf3/`` samples (SOURCES.md), esnet/iperf ``src/iperf_api.c``
(``iperf_print_results``: ``sum_sent``/``sum_received``, ``sum`` for UDP).
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
    impossible,
    line_of,
)

TOOL = "iperf3"
PARSER_VERSION = "2"  # 2: UDP without datagrams / loss > 100 % refused, repeats, no intervals

BITS_PER_BYTE = 8.0


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    if "{" not in text:
        lines = text.splitlines()
        number, first = next(((n, line.strip()) for n, line in enumerate(lines, start=1)
                              if line.strip()), (1, ""))
        raise ParseError(TOOL, number, "iperf3 JSON output (iperf3 -J)", first)
    document, _prefix = extract_json(TOOL, text, repeated_ok=True)
    if not isinstance(document, dict):
        raise ParseError(TOOL, 1, "a JSON object from iperf3 -J")

    error = document.get("error")
    if error not in (None, ""):
        message = " ".join(str(error).split())
        raise ParseError(TOOL, line_of(text, '"error"'),
                         f'a completed test; iperf3 reported "iperf3: {message}"')

    end = document.get("end")
    if not isinstance(end, dict):
        raise ParseError(TOOL, line_of(text, '"end"') or 1, "an 'end' object with the totals")
    sent, received, udp_sum = (_section(end, key, text)
                               for key in ("sum_sent", "sum_received", "sum"))
    if sent is None and received is None and udp_sum is None:
        raise ParseError(TOOL, line_of(text, '"end"'),
                         "end totals ('sum_sent'/'sum_received', or 'sum' for UDP)",
                         "no end totals (the test never ran)")

    intervals = document.get("intervals")  # iperf3 -J always prints the list
    if intervals is not None and (not isinstance(intervals, list) or not intervals):
        raise ParseError(TOOL, line_of(text, '"intervals"') or 1,
                         "a non-empty 'intervals' list (a test that ran)",
                         "no intervals" if isinstance(intervals, list) else repr(intervals)[:80])

    labels = _labels(document, end, udp_sum)
    measurements: list[MeasurementData] = []

    def add(metric: str, value: float, unit: str, key: str) -> None:
        value = finite(TOOL, metric, value, text, key)
        if value < 0:
            raise impossible(TOOL, key, value * BITS_PER_BYTE if unit == "B/s" else value,
                             f"{metric} cannot be negative", text)
        measurements.append(MeasurementData(metric, value, unit, dict(labels)))

    if labels["protocol"] == "udp":
        lost_share = (_udp_received(received, "sum_received", text) if received is not None
                      else _udp_received(udp_sum, "sum", text))
    elif received is None:
        raise ParseError(TOOL, line_of(text, '"end"'), "end.sum_received (the receiver's total)",
                         "only the sender's total")

    if sent is None and received is None and udp_sum is not None:  # UDP before sum_sent existed
        bandwidth = _bits_per_second(udp_sum, "sum", text) / BITS_PER_BYTE
        add("sent_bandwidth", bandwidth, "B/s", "bits_per_second")
        add("received_bandwidth", bandwidth * (1.0 - lost_share), "B/s", "lost_packets")
        return measurements

    if sent is not None:
        add("sent_bandwidth", _bits_per_second(sent, "sum_sent", text) / BITS_PER_BYTE, "B/s",
            "bits_per_second")
    if received is not None:
        add("received_bandwidth",
            _bits_per_second(received, "sum_received", text) / BITS_PER_BYTE, "B/s",
            "bits_per_second")
    if labels["protocol"] == "tcp" and sent is not None:
        retransmits = as_number(TOOL, "retransmits", sent.get("retransmits"), text)
        if retransmits is not None:
            add("retransmits", retransmits, "1", "retransmits")
    return measurements


_END_OBJECT = re.compile(r'"end"\s*:\s*\{')  # intervals' "end" keys hold numbers


def _end_line(text: str, key: str, total: str) -> int:
    """The line of ``"key"`` in the ``total`` object (``sum``, ``sum_received``) of the top-level
    ``end`` object — interval and stream entries carry the same keys earlier in the document —
    else of the first one anywhere."""
    found = _END_OBJECT.search(text)
    section = re.compile(r'"' + total + r'"\s*:\s*\{').search(text, found.end()) if found else None
    position = text.find(f'"{key}"', section.end()) if section else -1
    return text.count("\n", 0, position) + 1 if position >= 0 else line_of(text, f'"{key}"')


def _udp_received(section: dict[str, Any] | None, total: str, text: str) -> float:
    """The share of datagrams lost, from the receiver's UDP total (``sum_received`` or ``sum``);
    ParseError when no datagram arrived or the loss is impossible (BUGS.md #11)."""
    if section is None:
        raise ParseError(TOOL, line_of(text, '"end"'), "the receiver's UDP total in 'end'",
                         "no datagrams received (no receiver total)")
    packets = as_number(TOOL, "packets", section.get("packets"), text)
    lost = as_number(TOOL, "lost_packets", section.get("lost_packets"), text)
    percent = as_number(TOOL, "lost_percent", section.get("lost_percent"), text)
    if percent is not None and not 0.0 <= percent <= 100.0:
        raise impossible(TOOL, "lost_percent", percent, "a loss between 0 and 100 %", text,
                         line=_end_line(text, "lost_percent", total))
    if packets is not None and packets < 0:
        raise impossible(TOOL, "packets", packets, "a count cannot be negative", text,
                         line=_end_line(text, "packets", total))
    if lost is not None and lost < 0:
        raise impossible(TOOL, "lost_packets", lost, "a count cannot be negative", text,
                         line=_end_line(text, "lost_packets", total))
    if not packets:
        where = _end_line(text, "packets", total) or line_of(text, '"end"')
        found = ("no datagrams received (packets = 0)" if packets is not None
                 else "no datagrams received (no 'packets')")
        raise ParseError(TOOL, where, "datagrams at the receiver (UDP 'packets' > 0)", found)
    if lost is not None and lost > packets:
        raise impossible(TOOL, "lost_packets", lost, f"at most packets = {packets:g}", text,
                         line=_end_line(text, "lost_packets", total))
    if lost is None:
        return (percent or 0.0) / 100.0
    return lost / packets


def _section(end: dict[str, Any], key: str, text: str) -> dict[str, Any] | None:
    value = end.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"an object for {key!r}",
                         repr(value)[:80])
    return value


def _bits_per_second(section: dict[str, Any], name: str, text: str) -> float:
    value = as_number(TOOL, "bits_per_second", section.get("bits_per_second"), text)
    if value is None:
        raise ParseError(TOOL, line_of(text, f'"{name}"'),
                         f"a finite 'bits_per_second' in end.{name}",
                         repr(section.get("bits_per_second")))
    return value


def _labels(document: dict[str, Any], end: dict[str, Any],
            udp_sum: dict[str, Any] | None) -> dict[str, str]:
    start = document.get("start")
    test_start = start.get("test_start") if isinstance(start, dict) else None
    test_start = test_start if isinstance(test_start, dict) else {}
    streams = end.get("streams")

    protocol = test_start.get("protocol")
    if isinstance(protocol, str) and protocol.strip():
        protocol = protocol.strip().lower()
    else:  # infer: UDP end totals carry jitter and loss, UDP streams an "udp" object
        first = streams[0] if isinstance(streams, list) and streams else None
        udp = (udp_sum is not None and "jitter_ms" in udp_sum) or (
            isinstance(first, dict) and "udp" in first)
        protocol = "udp" if udp else "tcp"

    count = as_number(TOOL, "num_streams", test_start.get("num_streams"), "")
    if count is None or count != int(count):
        count = len(streams) if isinstance(streams, list) else 0
    return {"protocol": protocol, "streams": str(int(count))}
