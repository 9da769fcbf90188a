"""Samples of an RDMA port counter → received bandwidth (RUNBOOK §3.3, §4.5).

Input: one sample per line as the rdma_counter_sample probe prints it, key=value pairs with the
node's own time::

    sample=t0 time=1764500000.123456789 device=mlx5_0 port=1 counter=port_rcv_data value=123
    sample=t1 time=1764500060.456789012 device=mlx5_0 port=1 counter=port_rcv_data value=456

For each counter (device, port, counter) with at least two samples, the rate between its first
and last sample: Δvalue × unit ÷ Δtime. ``port_rcv_data`` / ``port_xmit_data`` count **4-byte
words** (InfiniBand PortCounters; the same files on RoCE ports), so the unit is 4 bytes; counter
names ending in ``_bytes`` (mlx5 ``rx_vport_rdma_unicast_bytes`` …) count bytes. A single sample
(the t0 probe) yields nothing: it is stored raw as the window's start.

Emits ``rx_bandwidth`` (B/s) for received-data counters (``port_rcv_data``, ``rx_*bytes``) and
``tx_bandwidth`` (B/s) for ``port_xmit_data`` / ``tx_*bytes``, labelled ``{"device", "port",
"counter"}``. A counter that went backwards (reset, wrap), one stuck at 4294967295 (a saturated
32-bit counter: RUNBOOK says switch source), or a window of zero or negative length is a
ParseError, never a figure.
"""

from __future__ import annotations

import re

from runners.parsers.base import MeasurementData, ParseError, decode_text

TOOL = "nic_counters"
PARSER_VERSION = "1"

SATURATED_32 = 4294967295
# ``key=value``, tried only where a run of key letters starts: a run without ``=`` is read once,
# not once from each of its letters (findall finds the same pairs).
_PAIR = re.compile(r"(?<![a-z_])([a-z_]++)=(\S+)")
_REQUIRED = ("time", "device", "port", "counter", "value")


def _kind(counter: str) -> tuple[str, float] | None:
    """(metric, bytes per counted unit) of a counter name, None when unknown."""
    if counter == "port_rcv_data":
        return "rx_bandwidth", 4.0
    if counter == "port_xmit_data":
        return "tx_bandwidth", 4.0
    if counter.endswith("_bytes") or counter.endswith("_bytes_phy"):
        if counter.startswith("rx"):
            return "rx_bandwidth", 1.0
        if counter.startswith("tx"):
            return "tx_bandwidth", 1.0
    return None


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    series: dict[tuple[str, str, str], list[tuple[int, float, int]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        pairs = dict(_PAIR.findall(line))
        missing = [key for key in _REQUIRED if key not in pairs]
        if missing:
            raise ParseError(TOOL, number, "a sample 'sample=… time=… device=… port=… "
                                           "counter=… value=…'", line.strip())
        try:
            when = float(pairs["time"])
        except ValueError:
            raise ParseError(TOOL, number, "the node's time in seconds (date +%s.%N)",
                             pairs["time"]) from None
        if not pairs["value"].isdigit():
            raise ParseError(TOOL, number, "the counter as a non-negative integer",
                             pairs["value"])
        value = int(pairs["value"])
        if value == SATURATED_32:
            raise ParseError(TOOL, number, "a counter below 4294967295 (this one is a "
                                           "saturated 32-bit counter: use another source)",
                             pairs["value"])
        if _kind(pairs["counter"]) is None:
            raise ParseError(TOOL, number, "a known RDMA counter (port_rcv_data, "
                                           "port_xmit_data, rx_*_bytes, tx_*_bytes)",
                             pairs["counter"])
        key = (pairs["device"], pairs["port"], pairs["counter"])
        series.setdefault(key, []).append((number, when, value))
    if not series:
        raise ParseError(TOOL, 0, "at least one counter sample", "no sample")
    measurements = []
    for (device, port, counter), samples in series.items():
        if len(samples) < 2:
            continue
        (_, t0, v0), (last, t1, v1) = samples[0], samples[-1]
        if t1 <= t0:
            raise ParseError(TOOL, last, "a later time than the first sample",
                             f"{t0:.9f} → {t1:.9f}")
        if v1 < v0:
            raise ParseError(TOOL, last, "a counter not lower than the first sample (reset or "
                                         "wrapped)", f"{v0} → {v1}")
        kind = _kind(counter)
        assert kind is not None  # every counter was checked known when its sample was read
        metric, unit = kind
        measurements.append(MeasurementData(
            metric, (v1 - v0) * unit / (t1 - t0), "B/s",
            {"device": device, "port": port, "counter": counter},
        ))
    return measurements
