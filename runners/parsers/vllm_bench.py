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

Rules from the public bug reports (BUGS.md):

* #14 (vllm PR #14879, #15794, #15793/PR #15795, PR #32667; InferenceX PR #1705;
  inference-benchmark PR #29): no optional key is required. Percentile keys exist only for the
  ``--metric-percentiles`` asked for (``p99_*`` may be absent while ``p90_*`` or ``p99.9_*``
  exist). When ``ttft_p50``/``ttft_p90``/``ttft_p99``/``ttft_mean`` or ``itl_p99`` has no key but
  the ``--save-detailed`` lists are in the file, the figure is **derived from the lists** the way
  vLLM computes it (``calculate_metrics``): over the *successful* requests only (``errors[i]``
  empty; without ``errors``, all entries when there are exactly ``completed`` of them), TTFT from
  ``ttfts`` and ITL from all ``itls`` entries concatenated, both in **seconds** (the aggregates are
  ms), with numpy's default percentile method (linear interpolation between closest ranks,
  :func:`percentile`; numpy itself is not needed).
* #15 (vllm#6064, PR #5895, PR #26478; InferenceX #339, #357): "successful" requests with a TTFT
  of 0 are a broken run (a server that streamed no valid token), never a 0 s TTFT: a
  ``median_ttft_ms``/``mean_ttft_ms``/``p50_ttft_ms`` of 0 with ``completed`` > 0, or a 0 in the
  ``ttfts`` of a successful request, raises ParseError naming the field and value. A negative
  latency or throughput, or ``completed`` above ``num_prompts``, is refused the same way
  (base.impossible). ``request_rate`` (``"inf"``) and ``request_goodput``/``"request_goodput:"``
  are not read.

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
    impossible,
    line_of,
)

TOOL = "vllm_bench"
PARSER_VERSION = "2"  # 2: percentiles derived from the detailed lists; TTFT 0 refused

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

    if completed < 0:
        raise impossible(TOOL, "completed", completed, "a count cannot be negative", text)

    derived = _from_lists(result, completed, text)
    measurements = []
    for metric, (keys, unit, divisor) in _FIELDS.items():
        for key in keys:
            value = as_number(TOOL, key, result.get(key), text)
            if value is not None:
                if value < 0:
                    raise impossible(TOOL, key, value, f"{metric} cannot be negative", text)
                if value == 0 and completed > 0 and key in _TTFT_KEYS:
                    raise impossible(TOOL, key, value, "a TTFT above 0 for completed requests: "
                                     "0 means no valid token was streamed (vllm#6064)", text)
                measurements.append(MeasurementData(metric, value / divisor, unit, dict(labels)))
                break
        else:
            if metric in derived:
                measurements.append(MeasurementData(metric, derived[metric], unit, dict(labels)))

    measurements.append(MeasurementData("completed_requests", completed, "1", dict(labels)))
    failed = as_number(TOOL, "failed", result.get("failed"), text)
    if failed is None and "num_prompts" in result:
        prompts = as_number(TOOL, "num_prompts", result["num_prompts"], text)
        failed = None if prompts is None else prompts - completed
    if failed is not None:
        failed = finite(TOOL, "failed_requests", failed, text, "num_prompts")
        if failed < 0:
            raise impossible(TOOL, "completed", completed,
                             f"at most num_prompts ({completed + failed:g})", text)
        measurements.append(MeasurementData("failed_requests", failed, "1", dict(labels)))
    return measurements


_TTFT_KEYS = frozenset({"median_ttft_ms", "p50_ttft_ms", "mean_ttft_ms"})


def percentile(values: list[float], percent: float) -> float:
    """``numpy.percentile(values, percent)`` with numpy's default method ("linear", type 7 of
    Hyndman & Fan): the rank ``(n − 1) × percent / 100`` of the sorted values, interpolated
    between its two neighbours exactly as numpy's ``_lerp`` does (``b − (b − a)(1 − t)`` for
    ``t ≥ 0.5``). ValueError for an empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * percent / 100.0
    below = int(rank // 1)
    above = min(below + 1, len(ordered) - 1)
    a, b, t = ordered[below], ordered[above], rank - below
    difference = b - a
    return b - difference * (1.0 - t) if t >= 0.5 else a + difference * t


def _list(result: dict[str, Any], key: str, text: str) -> list[Any] | None:
    value = result.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a list for {key!r}", repr(value)[:80])
    return value


def _from_lists(result: dict[str, Any], completed: float, text: str) -> dict[str, float]:
    """TTFT and ITL figures (s) from the ``--save-detailed`` per-request lists (BUGS.md #14);
    ParseError for a successful request with a TTFT of 0 (#15)."""
    ttfts = _list(result, "ttfts", text)
    itls = _list(result, "itls", text)
    errors = _list(result, "errors", text)
    requests = ttfts if ttfts is not None else itls
    if requests is None:
        return {}
    if errors is not None and len(errors) == len(requests):
        successful = [index for index, error in enumerate(errors) if not error]
    elif len(requests) == completed:
        successful = list(range(len(requests)))
    else:
        return {}  # which entries succeeded cannot be told: derive nothing
    figures: dict[str, float] = {}
    if ttfts is not None:
        firsts = []
        for index in successful:
            value = as_number(TOOL, "ttfts", ttfts[index], text)
            if value is None:
                continue
            if value <= 0:
                raise impossible(TOOL, "ttfts", value,
                                 f"a TTFT above 0 for successful request {index} "
                                 "(0 means no valid token was streamed, vllm#6064)", text)
            firsts.append(value)
        if firsts:
            figures["ttft_p50"] = percentile(firsts, 50.0)
            figures["ttft_p90"] = percentile(firsts, 90.0)
            figures["ttft_p99"] = percentile(firsts, 99.0)
            figures["ttft_mean"] = sum(firsts) / len(firsts)
    if itls is not None and len(itls) == len(requests):
        gaps = []
        for index in successful:
            entry = itls[index]
            if not isinstance(entry, list):
                raise ParseError(TOOL, line_of(text, '"itls"'), "a list per request in 'itls'",
                                 repr(entry)[:80])
            for gap in entry:
                value = as_number(TOOL, "itls", gap, text)
                if value is not None:
                    if value < 0:
                        raise impossible(TOOL, "itls", value, "an ITL cannot be negative", text)
                    gaps.append(value)
        if gaps:
            figures["itl_p99"] = percentile(gaps, 99.0)
    return figures
