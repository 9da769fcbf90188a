"""The G4 soak agent's window records (``windows.jsonl``, RUNBOOK §5.1) → typed window records.

The node agent (``runners.soak.node_agent``) appends one JSON line per ``vllm bench serve``
window: the client's saved result (read with :mod:`runners.parsers.vllm_bench`) plus the
agent's own keys ``soak_window`` (1-based index), ``soak_started`` / ``soak_ended`` (node epoch
seconds), ``soak_first_completion`` / ``soak_last_completion`` (epoch seconds, ``null`` when no
request completed), ``soak_completion_gap_max_s`` (longest time without a successful
completion, s) and ``soak_error`` (why the client gave no result; then the bench figures are
absent).

Not in :data:`runners.parsers.PARSERS`: a window is more than a list of measurements (it has
its node time, and a window the client failed counts the *planned* requests as failed, which
only the soak plan knows), so :func:`parse` returns :class:`WindowRecord` objects and the soak's
collection (``runners.soak.collection``) turns them into measurement rows. Blank lines are
skipped, an empty range gives no record; a line that is not a JSON object, lacks a key or has
a non-number where a number belongs raises ParseError naming that line.

:func:`measurements` maps one record to the figures the soak stores for its window (the soak's
collection and the auditor's verifier both call it).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from runners.parsers import vllm_bench
from runners.parsers.base import MeasurementData, ParseError

TOOL = "soak_windows"
PARSER_VERSION = "1"


@dataclass(frozen=True)
class WindowRecord:
    """One load window of one node, as the agent wrote it (times in node epoch seconds)."""

    line: int  # 1-based line of the raw range it was read from
    index: int
    started: float
    ended: float
    first_completion: float | None
    last_completion: float | None
    completion_gap_max_s: float
    error: str  # "" when the client produced a result
    bench: tuple[MeasurementData, ...]  # the client's figures; empty when ``error``


def parse(raw: bytes) -> list[WindowRecord]:
    """Every window record in ``raw`` (a range of ``windows.jsonl``), in file order."""
    records = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").split("\n"), start=1):
        if line.strip():
            records.append(_record(number, line))
    return records


def _record(number: int, line: str) -> WindowRecord:
    record = json_object(TOOL, number, line)
    index = number_at(TOOL, number, record, "soak_window")
    if index != int(index) or index < 0:
        raise ParseError(TOOL, number, "a window index for 'soak_window'", repr(index))
    error = record.get("soak_error")
    bench: tuple[MeasurementData, ...] = ()
    if not error:
        try:
            bench = tuple(vllm_bench.parse(line.encode()))
        except ParseError as failure:
            raise ParseError(TOOL, number, f"the window's vllm bench result ({failure.expected})",
                             failure.found) from None
    return WindowRecord(
        line=number, index=int(index),
        started=number_at(TOOL, number, record, "soak_started"),
        ended=number_at(TOOL, number, record, "soak_ended"),
        first_completion=number_or_none(TOOL, number, record, "soak_first_completion"),
        last_completion=number_or_none(TOOL, number, record, "soak_last_completion"),
        completion_gap_max_s=number_at(TOOL, number, record, "soak_completion_gap_max_s"),
        error=str(error) if error else "", bench=bench)


def json_object(tool: str, number: int, line: str) -> dict[str, object]:
    """One JSON Lines line → its object; ParseError naming line ``number`` otherwise."""
    try:
        record = json.loads(line)
    except ValueError as failure:
        raise ParseError(tool, number, f"a JSON object ({failure})", line.strip()) from None
    if not isinstance(record, dict):
        raise ParseError(tool, number, "a JSON object", line.strip())
    return record


def number_or_none(tool: str, number: int, record: dict[str, object], key: str) -> float | None:
    """``record[key]`` as a finite float, None when absent or null; ParseError otherwise."""
    if record.get(key) is None:
        return None
    return number_at(tool, number, record, key)


def number_at(tool: str, number: int, record: dict[str, object], key: str) -> float:
    """``record[key]``, a JSON number with a finite value; ParseError naming line ``number``."""
    if key not in record:
        raise ParseError(tool, number, f"the key {key!r}", "a record without it")
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParseError(tool, number, f"a number for {key!r}", repr(value))
    return float(value)


def planned_requests(request_rate: float, window_real_s: float) -> float:
    """The requests a window of ``window_real_s`` real seconds plans at ``request_rate`` per
    second (at least 1): what a window the client failed counts as failed."""
    return float(max(1, round(request_rate * window_real_s)))


def measurements(record: WindowRecord, planned: float) -> list[MeasurementData]:
    """The figures of one window, labelled ``soak_window``: the client's figures (or, when the
    client failed, ``planned`` failed requests and none completed, labelled ``client_error``)
    and ``completion_gap_max`` carrying the window's start and first / last completion (epoch
    seconds, 3 decimals; "" when none)."""
    labels = {"soak_window": str(record.index)}
    rows = []
    if record.error:
        error = {**labels, "client_error": record.error[:200]}
        rows.append(MeasurementData("failed_requests", planned, "1", error))
        rows.append(MeasurementData("completed_requests", 0.0, "1", dict(error)))
    else:
        rows.extend(MeasurementData(m.metric, m.value, m.unit, {**m.labels, **labels})
                    for m in record.bench)
    rows.append(MeasurementData(
        "completion_gap_max", record.completion_gap_max_s, "s",
        {**labels, "window_start": f"{record.started:.3f}",
         "first_completion": _epoch_text(record.first_completion),
         "last_completion": _epoch_text(record.last_completion)}))
    return rows


def _epoch_text(epoch: float | None) -> str:
    return "" if epoch is None else f"{epoch:.3f}"
