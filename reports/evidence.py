"""The evidence a report carries inside itself, and its check.

A report embeds (PDF/A-3 associated files) the raw output of every run it lists, named
``evidence/NNN-node-probe.out``, and ``summary.json``: the machine-readable report — decision(s),
criteria with measured values, units, thresholds and sources, and every run with the sha256 of
its raw output and the name of its attachment. ``evidence_check`` reads a PDF's attachments with
pypdf and says whether each run's attachment is there and hashes to the sha256 the summary (and
the printed appendix) gives.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass, field

SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "acceptance-report/1"
#: ``schema_version`` of the summary: 2 adds each gate's ``redecide`` (``reports.basis``).
SUMMARY_SCHEMA_VERSION = 2


def attachment_name(number: int, node: str, probe: str) -> str:
    """``evidence/003-lab-array-controller-nvme_inventory.out`` (safe characters only)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{node}-{probe}")[:80]
    return f"evidence/{number:03d}-{safe}.out"


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


def embedded_files(data: bytes) -> dict[str, bytes]:
    """The PDF's embedded files by name (the newest revision's). Raises ValueError when the PDF
    cannot be read."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        found = {}
        for name, contents in reader.attachments.items():
            # a name given twice is a defect in itself: keep the last and compare all below
            found[name] = contents[-1]
            if len(contents) > 1 and any(c != contents[-1] for c in contents):
                found[name + " (duplicate name, differing contents)"] = contents[0]
        return found
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"cannot read the PDF's embedded files: {e}") from e


def embedded_output(paths, sha256: str) -> bytes | None:
    """The raw output with ``sha256`` embedded in the first of the report files ``paths`` that
    holds it (a run whose stdout retention pruned, ``runners.retention``); None when none does."""
    for path in paths:
        try:
            with open(path, "rb") as handle:
                files = embedded_files(handle.read())
        except (OSError, ValueError):
            continue
        for name, content in files.items():
            if name.startswith("evidence/") and hashlib.sha256(content).hexdigest() == sha256:
                return content
    return None


def evidence_check(data: bytes) -> EvidenceCheck:
    """Compare every run the embedded summary lists with its embedded raw output. Never raises."""
    try:
        files = embedded_files(data)
    except ValueError as e:
        return EvidenceCheck(False, str(e))
    raw = files.get(SUMMARY_NAME)
    if raw is None:
        # Reports issued before evidence was embedded carry none: nothing to contradict. A
        # summary removed from a signed report breaks its signature, which is reported there.
        return EvidenceCheck(True, f"no embedded evidence ({SUMMARY_NAME} absent): only the "
                                   f"signature can be checked", files=len(files), present=False)
    try:
        summary = json.loads(raw)
        runs = [r for r in summary["runs"] if r.get("attachment")]
    except (ValueError, KeyError, TypeError) as e:
        return EvidenceCheck(False, f"embedded {SUMMARY_NAME} is not a report summary: {e}",
                             files=len(files))
    problems, matched = [], 0
    listed = {SUMMARY_NAME}
    for run in runs:
        name = run["attachment"]
        listed.add(name)
        content = files.get(name)
        if content is None:
            problems.append(f"run {run.get('number')}: attachment {name} is missing")
            continue
        digest = hashlib.sha256(content).hexdigest()
        if digest != run.get("sha256"):
            problems.append(f"run {run.get('number')}: {name} hashes to {digest[:16]}…, "
                            f"the summary says {str(run.get('sha256'))[:16]}…")
            continue
        matched += 1
    stray = sorted(set(files) - listed)
    if stray:
        problems.append("attachments the summary does not list: " + ", ".join(stray[:5]))
    if problems:
        return EvidenceCheck(False, "; ".join(problems), len(files), len(runs), matched, problems)
    return EvidenceCheck(True, f"embedded evidence matches: {matched} raw output"
                               f"{'s' if matched != 1 else ''} hash to the summary",
                         len(files), len(runs), matched)
