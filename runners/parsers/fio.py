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
* ``run_interrupted`` (1, vocabulary extension): 1 when fio printed ``fio: terminating on
  signal N`` (Ctrl-C, timeout kill), whose JSON otherwise looks clean with ``error`` 0.

Labels: ``{"job": <jobname>}`` when every entry has the same name (one job, a
``group_reporting`` group, or ``numjobs`` copies of one job), else ``{"job": "all"}``.

Quirks handled: warning/error lines printed before the JSON (RUNBOOK §0, §3.2: extract_json);
a UTF-8 BOM; duplicate JSON keys (fio < 3.x repeats ``"0.00"`` in percentile blocks, some
versions repeat ``"filename"``: the last one wins, as in ``json.loads``). Empty output, output
without JSON (fio's error lines only) and the ``normal`` text format raise ParseError naming the
first error line fio printed.
"""

from __future__ import annotations

import re

from runners.parsers.base import (
    MeasurementData,
    ParseError,
    as_number,
    decode_text,
    extract_json,
    line_of,
)

TOOL = "fio"
PARSER_VERSION = "1"

# Percentiles read per direction: (percent, metric name).
_CLAT_METRICS = {
    "read": ((50.0, "read_clat_p50"), (99.0, "read_clat_p99")),
    "write": ((99.0, "write_clat_p99"),),
}
_INTERRUPTED = re.compile(r"^\s*fio: terminating on signal", re.MULTILINE)
_ERROR_LINE = re.compile(r"^(fio|verify):|err=|error", re.IGNORECASE)


def parse(raw: bytes) -> list[MeasurementData]:
    text = decode_text(TOOL, raw)
    if "{" not in text:
        raise _no_json(text)
    document, _prefix = extract_json(TOOL, text)
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        raise ParseError(TOOL, line_of(text, '"jobs"') or 1, "a non-empty 'jobs' list of objects")

    names = {str(job.get("jobname", "")) for job in jobs}
    labels = {"job": names.pop() if len(names) == 1 else "all"}

    measurements: list[MeasurementData] = []
    for direction in ("read", "write"):
        sections = [job[direction] for job in jobs if isinstance(job.get(direction), dict)]
        if not sections:
            continue
        bandwidth = sum(_bandwidth(section, text) for section in sections)
        iops = sum(_required(section, "iops", text) for section in sections)
        measurements += [
            MeasurementData(f"{direction}_bandwidth", bandwidth, "B/s", dict(labels)),
            MeasurementData(f"{direction}_iops", iops, "1/s", dict(labels)),
        ]
        for percent, metric in _CLAT_METRICS[direction]:
            seconds = _clat_percentile(sections, percent, text)
            if seconds is not None:
                measurements.append(MeasurementData(metric, seconds, "s", dict(labels)))
    if not measurements:
        raise ParseError(TOOL, line_of(text, '"jobname"'), "a 'read' or 'write' section per job")

    failed = sum(1 for job in jobs if (as_number(TOOL, "error", job.get("error", 0), text) or 0))
    interrupted = 1.0 if _INTERRUPTED.search(text) else 0.0
    measurements.append(MeasurementData("job_errors", float(failed), "1", dict(labels)))
    measurements.append(MeasurementData("run_interrupted", interrupted, "1", dict(labels)))
    return measurements


def _no_json(text: str) -> ParseError:
    """No JSON at all: surface the first line that looks like fio's own error report."""
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if _ERROR_LINE.search(line.strip()):
            return ParseError(TOOL, number, "fio JSON output (--output-format=json)", line.strip())
    first = next(((n, line) for n, line in enumerate(lines, start=1) if line.strip()), (1, ""))
    return ParseError(TOOL, first[0], "fio JSON output (--output-format=json)", first[1].strip())


def _required(section: dict, key: str, text: str) -> float:
    if key not in section:
        raise ParseError(TOOL, line_of(text, '"jobname"'), f"{key!r} in every read/write section")
    value = as_number(TOOL, key, section[key], text)
    if value is None:
        raise ParseError(TOOL, line_of(text, f'"{key}"'), f"a finite number for {key!r}",
                         repr(section[key]))
    return value


def _bandwidth(section: dict, text: str) -> float:
    if "bw_bytes" in section:
        return _required(section, "bw_bytes", text)
    return _required(section, "bw", text) * 1024  # KiB/s in fio 2.x and 3.x alike


def _clat_percentile(sections: list[dict], percent: float, text: str) -> float | None:
    """The ``percent`` completion-latency percentile in seconds over all job entries, or None."""
    found: list[tuple[float, dict | None, float]] = []  # (seconds, bins, bin units per second)
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
        value = _at_percent(percentiles, percent, text)
        if value:  # None (absent) or 0 (no samples, gtod_reduce): no figure
            bins = block.get("bins")
            found.append((value / per_second, bins if isinstance(bins, dict) and bins else None,
                          per_second))
    if not found:
        return None
    if len(found) == 1:
        return found[0][0]
    if all(bins is not None for _, bins, _ in found):
        merged: dict[float, float] = {}
        for _, bins, per_second in found:
            for key, count in (bins or {}).items():
                at = (as_number(TOOL, "bins", key, text) or 0.0) / per_second
                merged[at] = merged.get(at, 0.0) + (as_number(TOOL, "bins", count, text) or 0.0)
        return _percentile_of_bins(merged, percent)
    return max(seconds for seconds, _, _ in found)


def _at_percent(percentiles: dict, percent: float, text: str) -> float | None:
    for key, value in percentiles.items():
        try:
            at = float(key)
        except ValueError:
            continue
        if abs(at - percent) < 1e-9:
            return as_number(TOOL, key, value, text)
    return None


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
