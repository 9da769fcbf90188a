"""The evidence a report carries inside itself, and its check.

A report embeds (PDF/A-3 associated files) the raw output of every run it lists, named
``evidence/NNN-node-probe.out``, and ``summary.json``: the machine-readable report — decision(s),
criteria with measured values, units, thresholds and sources, and every run with the sha256 of
its raw output and the name of its attachment. ``evidence_check`` reads a PDF's attachments with
pypdf and says whether each run's attachment is there and hashes to the sha256 the summary (and
the printed appendix) gives — hashing each attachment as it is inflated, block by block, so a
256 MiB raw output is verified without being decompressed whole (pypdf's own decoder stops at
75 MB) and without being parsed.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from pypdf import PdfReader
from pypdf.errors import PyPdfError

SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "acceptance-report/1"
#: ``schema_version`` of the summary: 2 adds each gate's ``redecide`` (``reports.basis``).
SUMMARY_SCHEMA_VERSION = 2


def attachment_name(number: int, node: str, probe: str) -> str:
    """``evidence/003-lab-array-controller-nvme_inventory.out`` (safe characters only)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{node}-{probe}")[:80]
    return f"evidence/{number:03d}-{safe}.out"


def bundle_name(bundle: str) -> str:
    """``evidence/gpu-007-windows.jsonl``: the one attachment holding, one after another, the
    raw outputs of the runs that name ``bundle`` (each listed in the summary with its
    ``range``, [start, length] in bytes, and the sha256 of that range)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", bundle)[:100]
    return f"evidence/{safe}"


def run_range(run: dict, content: bytes) -> bytes:
    """The bytes of ``run`` (a summary's run entry) in its attachment's ``content``: its
    ``range`` when it has one, else the whole file. Raises ValueError for a range that is not
    two non-negative whole numbers inside the file."""
    span = run.get("range")
    if span is None:
        return content
    if (not isinstance(span, list) or len(span) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in span)
            or span[0] + span[1] > len(content)):
        raise ValueError(f"run {run.get('number')}: range {span!r} is not [start, length] "
                         f"inside its attachment of {len(content)} bytes")
    return content[span[0]:span[0] + span[1]]


@dataclass(frozen=True)
class EvidenceCheck:
    """Whether the embedded raw outputs match the embedded summary."""

    ok: bool  # no embedded evidence contradicts the summary (True when none is embedded)
    summary: str  # one line for people
    present: bool = True  # the document embeds a summary (reports issued before it do not)
    files: int = 0  # attachments found
    runs: int = 0  # runs the summary lists with an attachment
    matched: int = 0  # of those, attachments present with the right sha256
    problems: list[str] = field(default_factory=list)
    # the summary marks the report simulated evidence (lab stand-in tools), or lists a run so
    simulated: bool = False


_BLOCK = 1 << 20


def _filters(stream) -> list[str]:
    found = stream.get("/Filter")
    if found is None:
        return []
    found = found.get_object()
    return [str(f) for f in found] if isinstance(found, list) else [str(found)]


def _decoded_blocks(stream) -> Iterator[bytes]:
    """The decoded bytes of an embedded file stream, block by block: Flate (what WeasyPrint
    writes) is inflated incrementally, so no block is larger than ``_BLOCK`` and no limit of a
    whole-stream decoder applies; another filter is decoded by pypdf (its limits stand)."""
    filters = _filters(stream)
    params = stream.get("/DecodeParms")
    raw = stream._data  # the stream's encoded bytes (pypdf keeps them; get_data() decodes all)
    if not filters:
        for start in range(0, len(raw), _BLOCK):
            yield raw[start:start + _BLOCK]
        return
    if filters != ["/FlateDecode"] or params:
        yield stream.get_data()
        return
    inflate = zlib.decompressobj()
    for start in range(0, len(raw), _BLOCK):
        pending = raw[start:start + _BLOCK]
        while pending:
            block = inflate.decompress(pending, _BLOCK)
            pending = inflate.unconsumed_tail
            if block:
                yield block
    if tail := inflate.flush():
        yield tail


def _embedded_streams(data: bytes) -> Iterator[tuple[str, object]]:
    """``(name, file stream)`` of every embedded file (the newest revision's), as they come."""
    reader = PdfReader(io.BytesIO(data), strict=False)
    for item in reader.attachment_list:
        yield item.name, item._embedded_file  # the stream object, not yet decoded


_READ_ERRORS = (PyPdfError, ValueError, KeyError, TypeError, AttributeError, zlib.error)


def _read_error_words(error: Exception) -> str:
    """What a reader of the verify page understands: zlib's "Error -3 while decompressing
    data: incorrect data check" is a damaged embedded file."""
    if isinstance(error, zlib.error):
        return "an embedded file is damaged (its compressed data does not inflate)"
    return str(error)


def embedded_digests(data: bytes) -> dict[str, tuple[str, int]]:
    """sha256 and size of each embedded file by name, hashed as it is inflated (never one
    file whole in memory: a 256 MiB raw output is checked in 1 MiB blocks). A name given twice
    with differing contents is reported as its own entry. Raises ValueError when the PDF
    cannot be read."""
    try:
        found: dict[str, tuple[str, int]] = {}
        for name, stream in _embedded_streams(data):
            digest, size = hashlib.sha256(), 0
            for block in _decoded_blocks(stream):
                digest.update(block)
                size += len(block)
            entry = (digest.hexdigest(), size)
            if name in found and found[name] != entry:
                found[name + " (duplicate name, differing contents)"] = found[name]
            found[name] = entry
        return found
    except _READ_ERRORS as e:
        raise ValueError(f"cannot read the PDF's embedded files: {_read_error_words(e)}") from e


def _digests_and_summary(data: bytes
                         ) -> tuple[dict[str, tuple[str, int]], bytearray | None]:
    """:func:`embedded_digests` and the summary's bytes from one read of the PDF (the summary
    is hashed as it is kept; every other file only hashed). Raises ValueError as they do."""
    try:
        found: dict[str, tuple[str, int]] = {}
        summary = None
        for name, stream in _embedded_streams(data):
            digest, size, kept = hashlib.sha256(), 0, bytearray()
            for block in _decoded_blocks(stream):
                digest.update(block)
                size += len(block)
                if name == SUMMARY_NAME:
                    kept += block  # one buffer (a G4 summary at site scale: 90 MB)
            entry = (digest.hexdigest(), size)
            if name in found and found[name] != entry:
                found[name + " (duplicate name, differing contents)"] = found[name]
            found[name] = entry
            if name == SUMMARY_NAME:
                summary = kept  # the newest revision's, as embedded_files keeps
        return found, summary
    except _READ_ERRORS as e:
        raise ValueError(f"cannot read the PDF's embedded files: {_read_error_words(e)}") from e


def embedded_files(data: bytes, only: set[str] | None = None) -> dict[str, bytes]:
    """The PDF's embedded files by name (the newest revision's), each read whole: ``only``
    those names when given (the summary). Raises ValueError when the PDF cannot be read."""
    try:
        found = {}
        for name, stream in _embedded_streams(data):
            if only is not None and name not in only:
                continue
            content = b"".join(_decoded_blocks(stream))
            # a name given twice is a defect in itself: keep the last and compare all below
            if name in found and found[name] != content:
                found[name + " (duplicate name, differing contents)"] = found[name]
            found[name] = content
        return found
    except _READ_ERRORS as e:
        raise ValueError(f"cannot read the PDF's embedded files: {_read_error_words(e)}") from e


def _range_digests(data: bytes, runs: list[dict]) -> dict[int, str | ValueError]:
    """The sha256 of each ranged run's bytes (by its position in ``runs``), or why its range
    cannot be read: each bundled attachment read whole one at a time and dropped once its
    runs are sliced (as :func:`embedded_files`, a name given twice counts as its last), so
    the check holds one bundle, not every bundle of the report. Raises ValueError when the
    PDF cannot be read."""
    by_name: dict[str, list[int]] = {}
    for number, run in enumerate(runs):
        if "range" in run:
            by_name.setdefault(run["attachment"], []).append(number)
    found: dict[int, str | ValueError] = {}
    try:
        for name, stream in _embedded_streams(data):
            if name not in by_name:
                continue
            content = b"".join(_decoded_blocks(stream))
            for number in by_name[name]:
                try:
                    found[number] = hashlib.sha256(run_range(runs[number], content)).hexdigest()
                except ValueError as e:
                    found[number] = e
            del content
        return found
    except _READ_ERRORS as e:
        raise ValueError(f"cannot read the PDF's embedded files: {_read_error_words(e)}") from e


def embedded_output(paths, sha256: str) -> bytes | None:
    """The raw output with ``sha256`` embedded in the first of the report files ``paths`` that
    holds it (a run whose stdout retention pruned, ``runners.retention``); None when none does."""
    for path in paths:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            names = [name for name, (digest, _size) in embedded_digests(data).items()
                     if name.startswith("evidence/") and digest == sha256]
            if names:
                return embedded_files(data, only={names[0]}).get(names[0])
        except (OSError, ValueError):
            continue
    return None


#: What the evidence check reads of a summary's run (the rest, its command and times, is
#: dropped as it is read: 74 k runs at 128 nodes × 72 h).
_RUN_KEYS = ("number", "attachment", "sha256", "range", "simulated")


def _without_figures(obj: dict) -> dict | None:
    """``json.loads`` hook for the evidence check: a recorded figure (``metric`` and
    ``value``: the re-decision data's measurements, 0.55 M in a G4 summary at 128 nodes ×
    72 h) is dropped as it is read, and a run keeps only what the check reads
    (``_RUN_KEYS``); the check matches runs with attachments and needs nothing else."""
    if "metric" in obj and "value" in obj:
        return None
    if "attachment" in obj and "number" in obj:
        return {key: obj[key] for key in _RUN_KEYS if key in obj}
    return obj


def evidence_check(data: bytes) -> EvidenceCheck:
    """Compare every run the embedded summary lists with its embedded raw output. Never raises."""
    try:
        files, raw = _digests_and_summary(data)
    except ValueError as e:
        return EvidenceCheck(False, str(e))
    if raw is None:
        # Reports issued before evidence was embedded carry none: nothing to contradict. A
        # summary removed from a signed report breaks its signature, which is reported there.
        return EvidenceCheck(True, f"no embedded evidence ({SUMMARY_NAME} absent): only the "
                                   f"signature can be checked", files=len(files), present=False)
    try:
        text = raw.decode("utf-8")  # decoded here, so the bytes go before the parse
        del raw
        summary = json.loads(text, object_hook=_without_figures)
        del text
        runs = [r for r in summary["runs"] if r.get("attachment")]
        simulated = bool(summary.get("simulated")) or any(r.get("simulated")
                                                           for r in summary["runs"])
    except (ValueError, KeyError, TypeError) as e:  # UnicodeDecodeError is a ValueError
        return EvidenceCheck(False, f"embedded {SUMMARY_NAME} is not a report summary: {e}",
                             files=len(files))
    problems, matched = [], 0
    listed = {SUMMARY_NAME}
    try:  # bundled attachments (a soak's collected ranges): one at a time, then sliced
        ranged = _range_digests(data, runs)
    except ValueError as e:
        return EvidenceCheck(False, str(e), files=len(files))
    for number, run in enumerate(runs):
        name = run["attachment"]
        listed.add(name)
        if name not in files:
            problems.append(f"run {run.get('number')}: attachment {name} is missing")
            continue
        digest = files[name][0]
        if "range" in run:
            found = ranged[number]
            if isinstance(found, ValueError):
                problems.append(str(found))
                continue
            digest = found
        if digest != run.get("sha256"):
            problems.append(f"run {run.get('number')}: {name} hashes to {digest[:16]}…, "
                            f"the summary says {str(run.get('sha256'))[:16]}…")
            continue
        matched += 1
    stray = sorted(set(files) - listed)
    if stray:
        problems.append("attachments the summary does not list: " + ", ".join(stray[:5]))
    if problems:
        return EvidenceCheck(False, "; ".join(problems), files=len(files), runs=len(runs),
                             matched=matched, problems=problems, simulated=simulated)
    return EvidenceCheck(True, f"embedded evidence matches: {matched} raw output"
                               f"{'s' if matched != 1 else ''} hash to the summary",
                         files=len(files), runs=len(runs), matched=matched,
                         simulated=simulated)
