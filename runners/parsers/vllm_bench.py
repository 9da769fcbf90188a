"""Saved result of ``vllm bench serve --save-result`` (or old ``benchmark_serving.py``) → serving
latency and throughput for G2 baseline replay, G3 arms and G4 soak windows (RUNBOOK §3.4).

Reads the JSON object the client saves (new ``vllm/benchmarks/serve.py`` and the old
``benchmarks/benchmark_serving.py``, ≤ ~0.9, same ``*_ms`` key scheme), pretty-printed or on one
line, and JSON Lines (``--append-result``: one object per line, every line is read).

Emits (METRICS.md units; the tool prints latencies in **milliseconds**, converted ÷1000 → s):

* ``ttft_p50`` ← ``median_ttft_ms`` (or ``p50_ttft_ms``), ``ttft_p90`` ← ``p90_ttft_ms``,
  ``ttft_p99`` ← ``p99_ttft_ms``, ``ttft_mean`` ← ``mean_ttft_ms`` (s);
* ``tpot_mean`` ← ``mean_tpot_ms``, ``tpot_p99`` ← ``p99_tpot_ms``,
  ``itl_p99`` ← ``p99_itl_ms`` (s);
* ``output_throughput``, ``total_token_throughput`` (tok/s), ``request_throughput`` (1/s);
* ``completed_requests`` ← ``completed``; ``failed_requests`` ← ``failed``, or
  ``num_prompts − completed`` where ``failed`` is absent (old client) (1).

A metric whose key is absent (percentiles not requested with ``--metric-percentiles``, latency
metrics not selected), ``null``, NaN or ``"inf"`` is skipped, never reported as 0. ``completed``
is required: without it the document is not a benchmark result (LMCache summaries, the nightly
summary table) and ParseError is raised. Other keys are ignored, among them ``request_rate``
(``"inf"`` as a string), ``"request_goodput:"`` (old key with a colon in its name) and the
per-request lists.

Labels: ``{"concurrency": str(max_concurrency)}`` or ``"unbounded"`` when it is null or absent;
plus ``"arm"`` when the result has a top-level ``arm`` (copied there by ``--metadata arm=...``);
plus ``{"result": "<i>"}`` (0-based position in the file) when the file holds several results.
"""

from __future__ import annotations

import json
from typing import Any

from runners.parsers.base import (
    MeasurementData,
    ParseError,
    as_number,
    decode_text,
    finite,
    line_of,
)

TOOL = "vllm_bench"
PARSER_VERSION = "1"

# metric → (keys tried in order, unit, divisor to the canonical unit)
_FIELDS: dict[str, tuple[tuple[str, ...], str, float]] = {
    "ttft_p50": (("median_ttft_ms", "p50_ttft_ms"), "s", 1000.0),
    "ttft_p90": (("p90_ttft_ms",), "s", 1000.0),
    "ttft_p99": (("p99_ttft_ms",), "s", 1000.0),
    "ttft_mean": (("mean_ttft_ms",), "s", 1000.0),
    "tpot_mean": (("mean_tpot_ms",), "s", 1000.0),
    "tpot_p99": (("p99_tpot_ms",), "s", 1000.0),
    "itl_p99": (("p99_itl_ms",), "s", 1000.0),
    "output_throughput": (("output_throughput",), "tok/s", 1.0),
    "total_token_throughput": (("total_token_throughput",), "tok/s", 1.0),
    "request_throughput": (("request_throughput",), "1/s", 1.0),
}


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    results = _documents(text)
    measurements: list[MeasurementData] = []
    for index, (line, result) in enumerate(results):
        labels = _labels(result)
        if len(results) > 1:
            labels["result"] = str(index)
        measurements += _measurements(result, labels, line, text)
    return measurements


def _documents(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every JSON object in ``text``, one after the other (one document or JSON Lines), each with
    the line it starts on. Text before the first object is skipped (RUNBOOK §0); a top-level
    array (the nightly summary table) is not a result."""
    first = text.lstrip()[:1]
    start = text.find("{")
    if first == "[" or start < 0:
        found = text.strip().splitlines()[0]
        raise ParseError(TOOL, 1, "a JSON object saved by vllm bench serve --save-result", found)
    decoder = json.JSONDecoder()
    documents: list[tuple[int, dict[str, Any]]] = []
    position = start
    while position < len(text):
        line = text.count("\n", 0, position) + 1
        if text[position] != "{":
            raise ParseError(TOOL, line, "another JSON object (one result per line)",
                             text[position:].splitlines()[0])
        try:
            document, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise ParseError(TOOL, text.count("\n", 0, error.pos) + 1,
                             f"complete JSON ({error.msg})") from None
        except (RecursionError, ValueError) as error:  # too deep; 4300-digit integers
            raise ParseError(TOOL, line, "JSON the tool could print",
                             type(error).__name__) from None
        documents.append((line, document))
        position = end
        while position < len(text) and text[position].isspace():
            position += 1
    return documents


def _labels(result: dict[str, Any]) -> dict[str, str]:
    concurrency = result.get("max_concurrency")
    if concurrency is None:
        labels = {"concurrency": "unbounded"}
    elif isinstance(concurrency, float) and concurrency.is_integer():
        labels = {"concurrency": str(int(concurrency))}
    else:
        labels = {"concurrency": str(concurrency)}
    if result.get("arm") is not None:
        labels["arm"] = str(result["arm"])
    return labels


def _measurements(result: dict[str, Any], labels: dict[str, str], line: int,
                  text: str) -> list[MeasurementData]:
    if "completed" not in result:
        raise ParseError(TOOL, line, "a vllm bench serve result with the key 'completed'",
                         ", ".join(list(result)[:4]))
    completed = as_number(TOOL, "completed", result["completed"], text)
    if completed is None:
        raise ParseError(TOOL, line_of(text, '"completed"'), "a number for 'completed'",
                         repr(result["completed"]))

    measurements = []
    for metric, (keys, unit, divisor) in _FIELDS.items():
        for key in keys:
            value = as_number(TOOL, key, result.get(key), text)
            if value is not None:
                measurements.append(MeasurementData(metric, value / divisor, unit, dict(labels)))
                break

    measurements.append(MeasurementData("completed_requests", completed, "1", dict(labels)))
    failed = as_number(TOOL, "failed", result.get("failed"), text)
    if failed is None and "num_prompts" in result:
        prompts = as_number(TOOL, "num_prompts", result["num_prompts"], text)
        failed = None if prompts is None else prompts - completed
    if failed is not None:
        failed = finite(TOOL, "failed_requests", failed, text, "num_prompts")
        measurements.append(MeasurementData("failed_requests", failed, "1", dict(labels)))
    return measurements
