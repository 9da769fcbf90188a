"""The serving engine's Prometheus ``/metrics`` (vLLM, LMCache) → evidence that a KV tier was used
(RUNBOOK §4.4), and the tier sizing the G3 probes print in the same text format (§4.2).

Input: one or more scrapes in Prometheus text exposition format. The G3 probes put a comment line
before each scrape, ``# acceptance-scrape: name=t0 time=1764500000.123456789 url=…`` (the node's
own clock); text without such a line is one scrape. Other comments (``# HELP``, ``# TYPE``) and
blank lines are skipped; every other line must be a sample ``name{labels} value [timestamp]``.

**Counters are read as the difference of the first and the last scrape** (the window probe prints
the scrape ``evicted`` the flush kept — t0 of engine start for an arm without a flush — then the
fresh t1 scrape): a single scrape yields no counter measurement — it is stored raw as the
window's start. Every counter measurement carries the label ``window`` = ``FIRST→LAST`` (the two
scrapes' names, e.g. ``evicted→t1``), so a decision can tell a window from the eviction from one
from engine start (whose warm-up hits say nothing about the measured pass). The difference is
computed here, not in the gate evaluation, so the measurement stands on its own raw output. A
counter summed over its label sets (engines, workers); ``_total`` and bare names both read;
``_created`` samples ignored. A counter absent at t0 counts from 0 (labelled counters appear on
first use); a counter that went down (the engine restarted inside the window) or disappeared is
a ParseError.

Emits (METRICS.md, unit):

* ``prefix_cache_hit_tokens`` (1) ← ``vllm:prefix_cache_hits`` (≤ 0.9:
  ``vllm:gpu_prefix_cache_hits``): tokens found in the GPU prefix cache;
* ``external_prefix_cache_hit_tokens`` (1) ← ``vllm:external_prefix_cache_hits``, else
  ``vllm:prompt_tokens_by_source{source="external_kv_transfer"}``, else
  ``lmcache_mp_lookup_hit_tokens`` (LMCache MP mode), else ``lmcache:num_hit_tokens`` — the
  first family present; tokens served through the KV connector (LMCache);
* ``external_tier_read_bytes`` (B) ← ``lmcache:num_remote_read_bytes`` (fs / remote backends
  only: LMCache does not count local-disk reads there, so the local-NVMe arm has none);
* ``storage_tier_hit_tokens`` (1) ← ``lmcache_mp_lookup_hit_l2_tokens`` (LMCache MP mode, on
  LMCache's own endpoint, which the window probe scrapes into the same block): the hits that
  needed L2, the storage tier — unlike the external hits above, which include LMCache's CPU
  tier;
* ``rdma_read_bytes`` (B) ← ``acceptance_rdma_port_rcv_data`` × 4 (the RDMA port counter the
  window probe reads with each scrape, in 4-byte words; RUNBOOK §3.3). It must be in the first
  scrape as in the last (a counter from 0 would be the port's whole history);
* ``host_tier_bytes`` (B), ``gpu_kv_tokens`` (1) ← the gauges ``acceptance_host_tier_bytes``
  and ``acceptance_gpu_kv_tokens`` of the last scrape (printed by the kv_tier_sizing probe);
  ``kv_bytes_per_token`` (B) ← the model's ``config.json`` the probe prints as comment lines
  ``# acceptance-config-json: …`` with ``# acceptance-kv-cache-dtype: …``
  (:func:`runners.parsers.kv_bytes.kv_bytes_per_token`; a config it cannot size is a
  ParseError naming the field) and ``working_set_bytes`` (B) = the gauge
  ``acceptance_workload_tokens`` × that; older outputs' gauges ``acceptance_kv_bytes_per_token``
  and ``acceptance_working_set_bytes`` are read where no config.json is printed;
  ``prefix_cache_reset`` (1) ← the gauge ``acceptance_prefix_cache_reset`` of any scrape (the
  flush prints 1 when it reset vLLM's GPU prefix cache, 0 when not).

No labels of its own: the plan step adds arm, round and phase. A text with neither a vLLM /
LMCache family nor the sizing gauges is not an engine's /metrics: ParseError.
"""

from __future__ import annotations

import json
import math
import re

from runners.parsers.base import MeasurementData, ParseError, decode_text
from runners.parsers.kv_bytes import KVSizeError, kv_bytes_per_token

TOOL = "vllm_metrics"
PARSER_VERSION = "2"  # 2: the window label, storage-tier hits, RDMA bytes, reset and sizing

# metric → (unit, families tried in order; the first one present in any scrape is used)
COUNTERS: dict[str, tuple[str, tuple[tuple[str, dict[str, str]], ...]]] = {
    "prefix_cache_hit_tokens": ("1", (
        ("vllm:prefix_cache_hits", {}),
        ("vllm:gpu_prefix_cache_hits", {}),
    )),
    "external_prefix_cache_hit_tokens": ("1", (
        ("vllm:external_prefix_cache_hits", {}),
        ("vllm:prompt_tokens_by_source", {"source": "external_kv_transfer"}),
        ("lmcache_mp_lookup_hit_tokens", {}),
        ("lmcache:num_hit_tokens", {}),
    )),
    "external_tier_read_bytes": ("B", (
        ("lmcache:num_remote_read_bytes", {}),
    )),
    "storage_tier_hit_tokens": ("1", (
        ("lmcache_mp_lookup_hit_l2_tokens", {}),
    )),
    "rdma_read_bytes": ("B", (
        ("acceptance_rdma_port_rcv_data", {}),
    )),
}
# counters read in 4-byte words (RDMA port_rcv_data), and counters that must be in the first
# scrape too (counting them from 0 would count the port's whole history)
WORDS = {"acceptance_rdma_port_rcv_data": 4.0}
GAUGES = {"working_set_bytes": ("acceptance_working_set_bytes", "B"),
          "workload_tokens": ("acceptance_workload_tokens", "1"),
          "host_tier_bytes": ("acceptance_host_tier_bytes", "B"),
          "kv_bytes_per_token": ("acceptance_kv_bytes_per_token", "B"),
          "gpu_kv_tokens": ("acceptance_gpu_kv_tokens", "1")}
# gauges read from whichever scrape has them (the flush's record that it reset the cache)
MARKS = {"prefix_cache_reset": ("acceptance_prefix_cache_reset", "1")}

_HEADER = re.compile(r"#\s*acceptance-scrape:\s*(.*)")
_SAMPLE = re.compile(
    r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"(?:\{(?P<labels>(?:[^\"}]++|\"(?:[^\"\\]++|\\.)*+\")*+)\})?"
    r"[ \t]+(?P<value>\S+)(?:[ \t]+-?\d+)?[ \t]*"
)
# One label ``name="value"``, tried only where a run of name characters starts (its leading
# digits skipped): a name run is read once, not once from each of its characters (100 KB of
# letters took seconds). findall gives the same labels as the unanchored pattern did; a value
# whose quote never closes fails once, and no later attempt starts inside it (a value opens
# right after ``=``, never after a backslash).
_LABEL = re.compile(r'(?<![A-Za-z0-9_])[0-9]*+([A-Za-z_][A-Za-z0-9_]*+)\s*+=\s*+'
                    r'"((?:[^"\\]|\\.)*+)"')


class _Scrape:
    def __init__(self, name: str, line: int) -> None:
        self.name, self.line = name, line
        self.samples: list[tuple[str, dict[str, str], float]] = []


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    scrapes = _scrapes(text)
    families = {_family(name) for scrape in scrapes for name, _, _ in scrape.samples}
    known = ({f for _, (_, options) in COUNTERS.items() for f, _ in options}
             | {family for family, _ in [*GAUGES.values(), *MARKS.values()]})
    if not families & known and not any(f.startswith(("vllm:", "lmcache")) for f in families):
        raise ParseError(TOOL, 1, "a vLLM / LMCache /metrics text (vllm:… or lmcache:… "
                                  "families) or the G3 tier sizing gauges",
                         text.strip().splitlines()[0] if text.strip() else "")
    measurements: list[MeasurementData] = []
    if len(scrapes) >= 2:
        first, last = scrapes[0], scrapes[-1]
        window = {"window": f"{first.name}→{last.name}"}
        for metric, (unit, options) in COUNTERS.items():
            for family, wanted in options:
                if family not in families:
                    continue
                before = _total(first, family, wanted)
                after = _total(last, family, wanted)
                if after is None:
                    raise ParseError(TOOL, last.line, f"{family} in the last scrape "
                                                      f"({last.name}) as in the first")
                if before is None and family in WORDS:
                    raise ParseError(TOOL, first.line, f"{family} in the first scrape "
                                                       f"({first.name}) as in the last")
                if after < (before or 0.0):
                    raise ParseError(TOOL, last.line, f"{family} not lower than in the first "
                                                      f"scrape (the engine restarted?)",
                                     f"{before:g} → {after:g}")
                delta = (after - (before or 0.0)) * WORDS.get(family, 1.0)
                measurements.append(MeasurementData(metric, delta, unit, dict(window)))
                break
    sized = _sizing(text, scrapes[-1])
    measurements += sized
    for metric, (family, unit) in GAUGES.items():
        value = _total(scrapes[-1], family, {})
        if value is not None and all(m.metric != metric for m in sized):
            measurements.append(MeasurementData(metric, value, unit))
    for metric, (family, unit) in MARKS.items():
        found = [v for v in (_total(s, family, {}) for s in scrapes) if v is not None]
        if found:
            measurements.append(MeasurementData(metric, found[0], unit))
    return measurements


_CONFIG_LINE = "# acceptance-config-json: "
_DTYPE_LINE = "# acceptance-kv-cache-dtype: "


def _sizing(text: str, last: _Scrape) -> list[MeasurementData]:
    """KV bytes per token from the printed config.json and dtype, and the working set."""
    lines = text.splitlines()
    config = [line[len(_CONFIG_LINE):] for line in lines if line.startswith(_CONFIG_LINE)]
    if not config:
        return []
    first = next(n for n, line in enumerate(lines, start=1) if line.startswith(_CONFIG_LINE))
    dtype = next((line[len(_DTYPE_LINE):].strip() for line in lines
                  if line.startswith(_DTYPE_LINE)), "auto")
    try:
        per_token = kv_bytes_per_token(json.loads("\n".join(config)), dtype)
    except RecursionError:
        raise ParseError(TOOL, first, "the model's config.json as JSON",
                         "nesting too deep") from None
    except ValueError as error:  # json.JSONDecodeError and KVSizeError alike
        what = ("KV bytes per token from the model's config.json"
                if isinstance(error, KVSizeError) else "the model's config.json as JSON")
        raise ParseError(TOOL, first, what, str(error)) from None
    found = [MeasurementData("kv_bytes_per_token", float(per_token), "B",
                             {"kv_cache_dtype": dtype})]
    tokens = _total(last, "acceptance_workload_tokens", {})
    if tokens is not None:
        found.append(MeasurementData("working_set_bytes", tokens * per_token, "B"))
    return found


def _scrapes(text: str) -> list[_Scrape]:
    scrapes: list[_Scrape] = []
    current: _Scrape | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = _HEADER.match(stripped)
        if header:
            fields = dict(item.split("=", 1) for item in header.group(1).split() if "=" in item)
            current = _Scrape(fields.get("name", str(len(scrapes))), number)
            scrapes.append(current)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(stripped)
        if match is None:
            raise ParseError(TOOL, number, "a Prometheus sample 'name{labels} value'", stripped)
        try:
            value = float(match.group("value"))
        except ValueError:
            raise ParseError(TOOL, number, "a number as the sample's value",
                             match.group("value")) from None
        if current is None:
            current = _Scrape("scrape", number)
            scrapes.append(current)
        labels = dict(_LABEL.findall(match.group("labels") or ""))
        if not math.isnan(value):
            current.samples.append((match.group("name"), labels, value))
    if not scrapes:
        raise ParseError(TOOL, 1, "at least one /metrics scrape", "no sample")
    return scrapes


def _family(name: str) -> str:
    for suffix in ("_total", "_created", "_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _total(scrape: _Scrape, family: str, wanted: dict[str, str]) -> float | None:
    """Sum of the family's samples (``_total`` or bare) whose labels include ``wanted``."""
    values = [value for name, labels, value in scrape.samples
              if name in (family, family + "_total")
              and all(labels.get(k) == v for k, v in wanted.items())]
    if not values:
        return None
    total = math.fsum(values)
    return total if math.isfinite(total) else None
