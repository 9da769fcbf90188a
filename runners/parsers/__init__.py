"""Pure parsers: raw tool output (bytes) → measurements in the units of METRICS.md.

One module per tool, each exposing ``TOOL``, ``PARSER_VERSION`` and
``parse(raw: bytes) -> list[MeasurementData]``; the contract is in :mod:`runners.parsers.base`.
:data:`PARSERS` is the explicit registry, keyed by the parser name stored with every raw output.
"""

from __future__ import annotations

from runners.parsers import (
    bom_checklist,
    ethtool,
    fio,
    iperf3,
    nic_counters,
    nvme_list,
    nvme_self_test_log,
    nvme_smart_log,
    rdma_series,
    smartctl,
    vllm_bench,
    vllm_metrics,
)
from runners.parsers.base import MeasurementData, ParseError, Parser

PARSERS: dict[str, Parser] = {
    "bom_checklist": bom_checklist,
    "fio": fio,
    "nvme_list": nvme_list,
    "nvme_smart_log": nvme_smart_log,
    "nvme_self_test_log": nvme_self_test_log,
    "ethtool": ethtool,
    "vllm_bench": vllm_bench,
    "smartctl": smartctl,
    "iperf3": iperf3,
    "vllm_metrics": vllm_metrics,
    "nic_counters": nic_counters,
    "rdma_series": rdma_series,
}

__all__ = ["PARSERS", "MeasurementData", "ParseError", "parse_output"]


# A NUL character in a label (a tool printing a NUL-padded or -embedded field, e.g. a drive's
# model number, JSON-escaped as \u0000) becomes U+FFFD, the replacement character: PostgreSQL's
# text and jsonb cannot hold NUL, and the label must read the same wherever it is parsed (the
# service, an auditor's offline re-decision). The raw output keeps the byte as the tool sent it.
NUL, NUL_SHOWN = "\x00", "\ufffd"


def _nul_shown(rows: list[MeasurementData]) -> list[MeasurementData]:
    if not any(NUL in key or NUL in value for row in rows for key, value in row.labels.items()):
        return rows
    return [MeasurementData(row.metric, row.value, row.unit, {
        key.replace(NUL, NUL_SHOWN): value.replace(NUL, NUL_SHOWN)
        for key, value in row.labels.items()}) for row in rows]


def parse_output(tool: str, raw: bytes) -> list[MeasurementData]:
    """Parse ``raw`` with the parser registered as ``tool``; ParseError for an unknown tool.
    A NUL in a label is shown as U+FFFD (:data:`NUL_SHOWN`)."""
    parser = PARSERS.get(tool)
    if parser is None:
        raise ParseError(tool, 0, f"a known parser ({', '.join(sorted(PARSERS))})")
    return _nul_shown(parser.parse(raw))
