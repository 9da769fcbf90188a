"""A node's RDMA port counter sampled every second through its shared read-back (RUNBOOK §4.4,
§4.5), and the node's clock when the sampler started.

The ``rdma_counter_series`` probe prints, at its start (``action=start``), the node's clock as
``date +%s.%N`` gives it::

    clock time=1764500000.123456789

and at its stop (``action=stop``) every sample its background sampler wrote, one a second,
each stamped with the node's own clock (the same key=value shape as ``nic_counters``)::

    time=1764500000.131 device=mlx5_0 port=1 counter=port_rcv_data value=123
    time=1764500001.135 device=mlx5_0 port=1 counter=port_rcv_data value=456

``clock`` → ``node_clock`` (s, the node's epoch time; the service adds the SSH round trip
around it as labels ``service_sent`` / ``service_received``, from which
``gates.derivations.derive_readback`` gets the node's clock skew). Each sample →
``rdma_counter`` (B: ``port_rcv_data`` / ``port_xmit_data`` count **4-byte words** —
InfiniBand PortCounters, the same sysfs files on RoCE ports — counters named ``*_bytes`` count
bytes), labels ``device``, ``port``, ``counter`` and ``time`` (the node's clock, as printed);
and per counter the mean over the whole series as ``rx_bandwidth`` / ``tx_bandwidth`` (B/s),
shown per node. A counter that goes backwards (reset, wrap), one stuck at 4294967295 (a
saturated 32-bit counter), times that do not increase, or a series of one sample is a
ParseError, never a figure.
"""

from __future__ import annotations

import re

from runners.parsers.base import MeasurementData, ParseError, decode_text

TOOL = "rdma_series"
PARSER_VERSION = "1"

# Standalone (the collection script carries each parser with ``base`` only): the same counter
# rules as ``nic_counters``.
SATURATED_32 = 4294967295
_PAIR = re.compile(r"(?<![a-z_])([a-z_]++)=(\S+)")


def _kind(counter: str) -> tuple[str, float] | None:
    """(metric, bytes per counted unit) of a counter name, None when unknown."""
    if counter in ("port_rcv_data", "port_xmit_data"):
        return ("rx_bandwidth" if counter == "port_rcv_data" else "tx_bandwidth"), 4.0
    if counter.endswith("_bytes") or counter.endswith("_bytes_phy"):
        if counter.startswith("rx"):
            return "rx_bandwidth", 1.0
        if counter.startswith("tx"):
            return "tx_bandwidth", 1.0
    return None

_REQUIRED = ("time", "device", "port", "counter", "value")


def _time(number: int, text: str) -> float:
    try:
        when = float(text)
    except ValueError:
        raise ParseError(TOOL, number, "the node's time in seconds (date +%s.%N)",
                         text) from None
    if not when > 0 or when == float("inf"):
        raise ParseError(TOOL, number, "a positive epoch time", text)
    return when


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    out: list[MeasurementData] = []
    series: dict[tuple[str, str, str], list[tuple[int, float, int]]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        pairs = dict(_PAIR.findall(line))
        if line.startswith("clock "):
            if "time" not in pairs:
                raise ParseError(TOOL, number, "'clock time=…'", line.strip())
            out.append(MeasurementData("node_clock", _time(number, pairs["time"]), "s"))
            continue
        missing = [key for key in _REQUIRED if key not in pairs]
        if missing:
            raise ParseError(TOOL, number, "a sample 'time=… device=… port=… counter=… "
                                           "value=…' or 'clock time=…'", line.strip())
        when = _time(number, pairs["time"])
        if not pairs["value"].isdigit():
            raise ParseError(TOOL, number, "the counter as a non-negative integer",
                             pairs["value"])
        value = int(pairs["value"])
        if value == SATURATED_32:
            raise ParseError(TOOL, number, "a counter below 4294967295 (this one is a "
                                           "saturated 32-bit counter: use another source)",
                             pairs["value"])
        kind = _kind(pairs["counter"])
        if kind is None:
            raise ParseError(TOOL, number, "a known RDMA counter (port_rcv_data, "
                                           "port_xmit_data, rx_*_bytes, tx_*_bytes)",
                             pairs["counter"])
        key = (pairs["device"], pairs["port"], pairs["counter"])
        earlier = series.setdefault(key, [])
        if earlier:
            _, t_before, v_before = earlier[-1]
            if when <= t_before:
                raise ParseError(TOOL, number, "a later time than the sample before",
                                 f"{t_before:.9f} → {when:.9f}")
            if value < v_before:
                raise ParseError(TOOL, number, "a counter not lower than the sample before "
                                               "(reset or wrapped)", f"{v_before} → {value}")
        earlier.append((number, when, value))
        out.append(MeasurementData("rdma_counter", value * kind[1], "B", {
            "device": key[0], "port": key[1], "counter": key[2], "time": pairs["time"]}))
    if not out:
        raise ParseError(TOOL, 0, "a clock reading or counter samples", "no line")
    for (device, port, counter), samples in series.items():
        if len(samples) < 2:
            raise ParseError(TOOL, samples[0][0], "at least two samples of the counter",
                             f"one sample of {device} port {port} {counter}")
        (_, t0, v0), (_, t1, v1) = samples[0], samples[-1]
        known = _kind(counter)
        assert known is not None  # checked when its samples were read
        metric, unit = known
        out.append(MeasurementData(metric, (v1 - v0) * unit / (t1 - t0), "B/s",
                                      {"device": device, "port": port, "counter": counter}))
    return out
