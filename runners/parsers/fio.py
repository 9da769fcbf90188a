"""fio JSON output → bandwidth, IOPS, completion-latency percentiles and job errors.

Reads what ``fio --output-format=json`` (or ``json+``) prints, the probe of G2 line efficiency
(RUNBOOK §3.2; pitfalls §6). Both schemas are accepted:

* fio 2.x: latency blocks ``clat``/``slat``/``lat`` in **microseconds**; no ``bw_bytes``.
* fio 3.x: ``clat_ns``/``slat_ns``/``lat_ns`` in **nanoseconds**; ``bw_bytes`` (B/s) from 3.2 on.

Emits, with the canonical units of METRICS.md:

* ``read_bandwidth``, ``write_bandwidth`` (B/s): sum over ``jobs[]`` of ``bw_bytes``, or of
  ``bw`` × 1024 where ``bw_bytes`` is absent (``bw`` is KiB/s in every fio version).
* ``read_iops``, ``write_iops`` (1/s): sum of ``iops``.
* ``read_clat_p50``, ``read_clat_p99``, ``write_clat_p99`` (s): from the ``percentile`` block of
  ``clat_ns`` (÷1e9) or ``clat`` (÷1e6). Emitted only when such a block exists and the value is
  non-zero: ``gtod_reduce=1`` and directions without I/O print zeros, and a latency of 0 would pass
  any latency gate. Across several job entries (``numjobs`` without ``group_reporting``) a
  percentile cannot be averaged: with ``json+`` the ``bins`` histograms are merged and the
  percentile taken the way fio does it (first bin whose cumulative count reaches p % of all
  samples); without bins the largest per-job value is reported, an upper bound of the merged
  percentile (so a latency gate errs towards failing).
* ``job_errors`` (1): number of job entries whose ``error`` is non-zero. A failed run is still
  interpreted (fio prints zeros and the error code, e.g. 22 = EINVAL); the gate fails on this.
  It is at least the number of distinct ``fio: pid=N, err=E/...`` lines with E ≠ 0 printed
  before or after the document (axboe/fio#731, fio-3.12: one such line per failing job while
  the job's ``"error"`` is 0): such a line means the run failed, even when the JSON is clean.
  The benign preamble lines (``exceeds 32-bit tausworthe random generator`` / ``Switching to
  tausworthe64``, redhat-cip/hardware#201; Windows ``CPU mask`` lines, ezfio#38) count nothing.
* ``run_interrupted`` (1, vocabulary extension): 1 when fio printed ``fio: terminating on
  signal N`` (Ctrl-C, timeout kill), whose JSON otherwise looks clean with ``error`` 0.
* ``steadystate_not_attained`` (1, vocabulary extension): emitted only when some job entry has
  a ``steadystate`` block (``ss=`` set): the number of such entries whose ``attained`` is not 1
  (axboe/fio#1134; every job, also in group reporting, must have attained it). The block's
  ``data.bw*`` are B/s, unlike the job's KiB/s ``bw``; they are not read as bandwidth.

Rules from the public bug reports (BUGS.md):

* #1 (axboe/fio#731, #1685): the stream is preamble + one JSON object + optional trailer; the
  document starts at the first line that is exactly ``{`` (a ``{`` inside a preamble line is
  not taken), else at the first ``{``. Zero bytes or no ``{`` is a failure, never "0 IOPS".
* #2 (axboe/fio#511): duplicate keys read last-wins; ``"0.00"`` padding slots are never matched;
  percentile keys are matched as numbers; values are in the parent key's unit.
* #3 (axboe/fio#378, #422, PR #487): bandwidth is ``bw_bytes`` or ``bw`` × 1024 (``kb_base``
  ignored); ``*_ns`` in ns, 2.x ``clat`` in µs.
* #5 (axboe/fio#448): ``iops``/``bw_bytes`` are the run figures; ``iops_min/_max/_mean`` and
  ``bw_min/_mean/_agg`` (per-log-sample statistics, ``bw_agg`` a percent) are never read.
* An impossible figure (a negative bandwidth, IOPS or latency) raises ParseError naming it.

Labels: ``{"job": <jobname>}`` when every entry has the same name (one job, a
``group_reporting`` group, or ``numjobs`` copies of one job), else ``{"job": "all"}``.

Quirks handled: warning/error lines printed before the JSON (RUNBOOK §0, §3.2) and text after
it (``--output-format=json,normal``) are skipped, but a *second* JSON document (e.g. the
snapshots of ``--status-interval``) raises ParseError "several JSON documents" rather than
reading an early snapshot (base.decode_json); a UTF-8 BOM; bare ``nan``/``-nan`` that fio's
``%f`` prints read as null, so a required figure printed that way is refused by name;
duplicate JSON keys (fio < 3.x repeats ``"0.00"`` in percentile blocks, some versions repeat
``"filename"``: the last one wins, as in ``json.loads``); percentile keys in any numeric
spelling (``"99.000000"``, ``"99.00"``); bin counts as numeric strings; sums that overflow to
infinity are refused. ``fio: terminating on signal`` counts only outside the JSON document.
Empty output, output without JSON (fio's error lines only) and the ``normal`` text format raise
ParseError naming the first error line fio printed.

Cost: one decode, each percentile key read as a number once per direction, and json+ ``bins``
merged once per direction (counts summed per key string, each distinct latency converted once).
A 50 MB capture (~1 500 job entries, ~1.5 M bins) takes ~1.3–1.4× the CPU time of
``json.loads``, the merge being nearly all the difference, with a peak of ~2.1–2.5× its size
(benchmarks/parse_fio.py; wall-clock ratios swing with the machine's load).
"""

from __future__ import annotations

import re
from typing import Any

from runners.parsers.base import (
    MeasurementData,
    ParseError,
    as_number,
    decode_json,
    decode_text,
    finite,
    impossible,
    line_of,
)

TOOL = "fio"
PARSER_VERSION = "2"  # 2: err=N preamble lines, steadystate, impossible figures, line-start '{'


# Percentiles read per direction: (percent, metric name).
_CLAT_METRICS = {
    "read": ((50.0, "read_clat_p50"), (99.0, "read_clat_p99")),
    "write": ((99.0, "write_clat_p99"),),
}
# Indentation on the line only: ``^\s*`` also ran over newlines, so every line start of a run of
# blank lines re-read the whole run (same matches: a hit after blank lines is a hit on its line).
_INTERRUPTED = re.compile(r"^[^\S\n]*fio: terminating on signal", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(fio|verify):|err=|error", re.IGNORECASE)
# fio's td_verror() line (backend/ioengines, fio-3.12 … 3.x): "fio: pid=4896, err=5/file:…".
_JOB_ERROR_LINE = re.compile(r"\bpid=(\d+),\s*err=\s*(-?\d+)")
_DOCUMENT_LINE = re.compile(r"^[ \t]*\{[ \t]*\r?$", re.MULTILINE)


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    if "{" not in text:
        raise _no_json(text)
    first_line = _DOCUMENT_LINE.search(text)
    at = first_line.start() + first_line.group(0).index("{") if first_line else None
    document, text, start, end = decode_json(TOOL, text, at=at)
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        raise ParseError(TOOL, line_of(text, '"jobs"') or 1, "a non-empty 'jobs' list of objects")

    names = {str(job.get("jobname", "")) for job in jobs}
    labels = {"job": names.pop() if len(names) == 1 else "all"}

    measurements: list[MeasurementData] = []

    def add(metric: str, value: float, unit: str, key: str) -> None:
        value = finite(TOOL, metric, value, text, key)
        if value < 0:
            raise impossible(TOOL, key, value, f"{metric} cannot be negative", text)
        measurements.append(MeasurementData(metric, value, unit, dict(labels)))

    for direction in ("read", "write"):
        sections = [job[direction] for job in jobs if isinstance(job.get(direction), dict)]
        if not sections:
            continue
        bandwidth = sum(_bandwidth(section, text) for section in sections)
        iops = sum(_required(section, "iops", text) for section in sections)
        add(f"{direction}_bandwidth", bandwidth, "B/s", "bw")
        add(f"{direction}_iops", iops, "1/s", "iops")
        wanted = _CLAT_METRICS[direction]
        latencies = _clat_percentiles(sections, [percent for percent, _ in wanted], text)
        for percent, metric in wanted:
            latency = latencies[percent]
            if latency is not None:
                add(metric, latency, "s", "clat_ns")
    if not measurements:
        raise ParseError(TOOL, line_of(text, '"jobname"'), "a 'read' or 'write' section per job")

    failed = sum(1 for job in jobs if (as_number(TOOL, "error", job.get("error", 0), text) or 0))
    # fio prints "terminating on signal" and td_verror's "pid=N, err=E" lines on the same
    # destination as the JSON, around (never inside) the document.
    outside = (text[:start], text[end:])
    failing_pids = {match.group(1) for part in outside for match in _JOB_ERROR_LINE.finditer(part)
                    if int(match.group(2)) != 0}
    failed = max(failed, len(failing_pids))
    interrupted = any(_INTERRUPTED.search(part) for part in outside)
    measurements.append(MeasurementData("job_errors", float(failed), "1", dict(labels)))
    measurements.append(MeasurementData("run_interrupted", 1.0 if interrupted else 0.0, "1",
                                        dict(labels)))
    steady = [job["steadystate"] for job in jobs if isinstance(job.get("steadystate"), dict)]
    if steady:
        missed = sum(1 for block in steady
                     if as_number(TOOL, "attained", block.get("attained"), text) != 1)
        measurements.append(MeasurementData("steadystate_not_attained", float(missed), "1",
                                            dict(labels)))
    return measurements


def _no_json(text: str) -> ParseError:
    """No JSON at all: surface the first line that looks like fio's own error report."""
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if _ERROR_LINE.search(line.strip()):
            return ParseError(TOOL, number, "fio JSON output (--output-format=json)", line.strip())
    first = next(((n, line) for n, line in enumerate(lines, start=1) if line.strip()), (1, ""))
    return ParseError(TOOL, first[0], "fio JSON output (--output-format=json)", first[1].strip())


def _required(section: dict[str, Any], key: str, text: str) -> float:
    if key not in section:
        raise ParseError(TOOL, line_of(text, '"jobname"'), f"{key!r} in every read/write section")
    value = as_number(TOOL, key, section[key], text)
    if value is None:
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a finite number for {key!r}",
                         repr(section[key]))
    return value


def _bandwidth(section: dict[str, Any], text: str) -> float:
    if "bw_bytes" in section:
        return _required(section, "bw_bytes", text)
    return _required(section, "bw", text) * 1024  # KiB/s in fio 2.x and 3.x alike


def _clat_percentiles(sections: list[dict[str, Any]], percents: list[float],
                      text: str) -> dict[float, float | None]:
    """The completion-latency percentiles (s) over all job entries, by percent; None where no
    entry has a non-zero figure."""
    # per section: (its percentile figures by percent, bins or None, bin units per second)
    blocks: list[tuple[dict[float, float | None], dict[str, Any] | None, float]] = []
    matches: dict[str, float | None] = {}  # percentile key → the percent it is, read once
    for section in sections:
        if isinstance(section.get("clat_ns"), dict):
            block, per_second = section["clat_ns"], 1e9
        elif isinstance(section.get("clat"), dict):
            block, per_second = section["clat"], 1e6
        else:
            continue
        percentiles = block.get("percentile")
        if not isinstance(percentiles, dict):
            continue
        bins = block.get("bins")
        blocks.append((_at_percents(percentiles, percents, matches, text),
                       bins if isinstance(bins, dict) and bins else None, per_second))

    result: dict[float, float | None] = {}
    merged_cache: dict[tuple[int, ...], dict[float, float]] = {}
    for percent in percents:
        # None (absent) or 0 (no samples, gtod_reduce): no figure from that entry
        found = {index: figure for index, (figures, _, _) in enumerate(blocks)
                 if (figure := figures[percent])}
        if not found:
            result[percent] = None
        elif len(found) == 1:
            [(index, figure)] = found.items()
            result[percent] = figure / blocks[index][2]
        elif all(blocks[index][1] is not None for index in found):
            key = tuple(found)
            if key not in merged_cache:  # merged once, read for every percent
                merged_cache[key] = _merge_bins([blocks[index][1:] for index in found], text)
            merged = merged_cache[key]
            result[percent] = _percentile_of_bins(merged, percent) if merged else None
        else:
            result[percent] = max(figure / blocks[index][2] for index, figure in found.items())
    return result


def _merge_bins(histograms: list[tuple[dict[str, Any] | None, float]],
               text: str) -> dict[float, float]:
    """Sum json+ ``bins`` ({latency as a string: count}) of several job entries, keyed by the
    latency in seconds. Counts are summed per key string first (one dict update per bin, no
    number parsing), and each distinct key is converted once: a 50 MB capture has millions of
    bins but only hundreds of distinct latencies. The plain loop is the fastest per-bin sum
    measured (~80 ns a bin): ``Counter.update``, ``dict.update`` over ``zip``/``map``, keys
    seeded with ``dict.fromkeys`` or a list indexed per key were each slower."""
    units = {per_second for _, per_second in histograms}
    by_key: dict[str, float] = {}
    if len(units) == 1:
        get = by_key.get
        try:
            for bins, _ in histograms:
                for key, count in (bins or {}).items():
                    by_key[key] = get(key, 0) + count
        except TypeError:  # a count that is not a JSON number: read each one strictly below
            by_key = {}
    if not by_key:
        merged: dict[float, float] = {}
        for bins, per_second in histograms:
            for key, count in (bins or {}).items():
                at = (as_number(TOOL, "bins", key, text) or 0.0) / per_second
                merged[at] = merged.get(at, 0.0) + (as_number(TOOL, "bins", count, text) or 0.0)
        return merged
    per_second = units.pop()
    merged = {}
    for key, count in by_key.items():
        at = (as_number(TOOL, "bins", key, text) or 0.0) / per_second
        merged[at] = merged.get(at, 0.0) + (as_number(TOOL, "bins", count, text) or 0.0)
    return merged


def _at_percents(percentiles: dict[str, Any], percents: list[float],
                 matches: dict[str, float | None], text: str) -> dict[float, float | None]:
    """Each percent's figure in one ``percentile`` block: the value of the first key that reads
    as that number (``"99.000000"``, ``"99.00"``), None without one. ``matches`` keeps what each
    key string is, so a key seen in an earlier job entry is not read as a number again."""
    keys: dict[float, str] = {}
    for key in percentiles:
        if key in matches:
            percent = matches[key]
        else:
            percent = matches[key] = _percent_of(key, percents)
        if percent is not None and percent not in keys:
            keys[percent] = key
    return {percent: as_number(TOOL, keys[percent], percentiles[keys[percent]], text)
            if percent in keys else None for percent in percents}


def _percent_of(key: str, percents: list[float]) -> float | None:
    """The one of ``percents`` that ``key`` reads as (within 1e-9), None for any other key."""
    try:
        at = float(key)
    except ValueError:
        return None
    return next((percent for percent in percents if abs(at - percent) < 1e-9), None)


def _percentile_of_bins(bins: dict[float, float], percent: float) -> float:
    """fio's own rule (stat.c calc_clat_percentiles): the first bin whose cumulative count
    reaches ``percent`` % of all samples."""
    total = sum(bins.values())
    threshold = percent / 100.0 * total
    cumulative = 0.0
    for at in sorted(bins):
        cumulative += bins[at]
        if cumulative >= threshold:
            return at
    return max(bins)
