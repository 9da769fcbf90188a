"""Retention of raw outputs: off unless ``ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS`` is set.

A probe run's stdout (its raw output: its file under ``ACCEPTANCE_OUTPUTS_DIR``, or the bytes an
older row holds in the database) may be pruned only when all of this holds:

- its engagement is accepted (every gate passed: ``gates.services.decision_settle`` sets the
  state), and the last decision was recorded at least N days ago;
- the run is over (not running or parsing) and its stdout is still stored;
- a signed report of the engagement embeds it: the report file still hashes to its row's
  sha256, its signature verifies (``reports.signing.verify_pdf``: intact, trusted, embedded
  evidence matching its summary), and one of its attachments hashes to the sha256 of the very
  bytes to be pruned (``reports.render`` embeds each run's stdout as ``evidence/NNN-….out``).

Stderr is never embedded in a report, so it is kept. What is kept of a pruned run: its sha256,
its size, and ``stdout_pruned_at`` (the run and log pages say "pruned on DATE"); the file goes
once no unpruned run shares it; ``reports.evidence.embedded_output`` reads the bytes back
from the report that embeds them (so a later report version still carries the evidence).
Every pruning is audited on the engagement (``AuditEntry`` ``raw_outputs_pruned``: counts,
bytes, the sha256 list, the reports that embed them). ``dry_run`` says what would go and
changes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from acceptance.models import AuditEntry, Engagement
from gates.models import Decision
from reports.evidence import embedded_digests
from reports.models import Report
from reports.signing import verify_pdf
from runners import outputs
from runners.models import ProbeRun

ACTION = "raw_outputs_pruned"


@dataclass
class EngagementPrune:
    engagement: str
    probe_runs: int = 0
    bytes: int = 0
    sha256: list[str] = field(default_factory=list)
    reports: list[int] = field(default_factory=list)
    kept_not_embedded: int = 0  # old enough, but no verified report embeds them


@dataclass
class PruneSummary:
    enabled: bool
    days: int | None
    dry_run: bool
    engagements: list[EngagementPrune] = field(default_factory=list)
    unverified_reports: list[str] = field(default_factory=list)

    @property
    def probe_runs(self) -> int:
        return sum(e.probe_runs for e in self.engagements)

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.engagements)


def _embedded_by_sha256(engagement: Engagement, problems: list[str]) -> dict[str, int]:
    """sha256 of each attachment of the engagement's verified reports → a report id."""
    found: dict[str, int] = {}
    for report in Report.objects.filter(engagement=engagement).order_by("id"):
        try:
            data = Path(report.path).read_bytes()
        except OSError as e:
            problems.append(f"report {report.id}: {report.path}: {e.strerror}")
            continue
        if hashlib.sha256(data).hexdigest() != report.sha256:
            problems.append(f"report {report.id}: file does not hash to its sha256")
            continue
        check = verify_pdf(data)
        if not check.valid:
            problems.append(f"report {report.id}: {check.summary}")
            continue
        for name, (digest, _size) in embedded_digests(data).items():
            if name.startswith("evidence/"):
                found.setdefault(digest, report.id)
    return found


def _accepted_at(engagement: Engagement) -> datetime | None:
    return Decision.objects.filter(gate__engagement=engagement).aggregate(
        at=Max("decided_at"))["at"]


def _candidates(engagement: Engagement):
    return (ProbeRun.objects.filter(gate_run__gate__engagement=engagement,
                                    stdout_pruned_at__isnull=True, stdout_size__gt=0)
            .exclude(state__in=[ProbeRun.State.RUNNING, ProbeRun.State.PARSING])
            .only("id", "stdout_file", "stdout_sha256", "stdout_size", "stdout_pruned_at")
            .order_by("id"))


def _stored_digest(run: ProbeRun) -> tuple[str, int]:
    """sha256 and size of the stdout stored now, read in blocks (file or older row)."""
    handle = outputs.output_open(run, "stdout")
    if handle is None:
        return "", 0
    digest, size = hashlib.sha256(), 0
    with handle:
        while block := handle.read(outputs.READ_BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _engagement_prune(engagement: Engagement, *, dry_run: bool, now: datetime,
                      days: int, problems: list[str]) -> EngagementPrune:
    result = EngagementPrune(engagement.name)
    embedded = _embedded_by_sha256(engagement, problems)
    pruned_ids, files = [], set()
    for run in _candidates(engagement).iterator(chunk_size=200):
        digest, size = _stored_digest(run)
        # A run whose stored sha256 is not that of its bytes is kept: it cannot be read back.
        if not size or digest not in embedded or run.stdout_sha256 != digest:
            result.kept_not_embedded += 1
            continue
        pruned_ids.append(run.id)
        files.add(run.stdout_file)
        result.probe_runs += 1
        result.bytes += size
        result.sha256.append(digest)
        if embedded[digest] not in result.reports:
            result.reports.append(embedded[digest])
    if dry_run or not pruned_ids:
        return result
    with transaction.atomic():
        # Only rows still unpruned (a concurrent prune does nothing twice).
        ProbeRun.objects.filter(id__in=pruned_ids, stdout_pruned_at__isnull=True).update(
            stdout=b"", stdout_pruned_at=now)
        AuditEntry.objects.create(
            engagement=engagement, actor="retention", action=ACTION,
            reason=(f"raw outputs of the accepted engagement older than {days} days, each "
                    f"embedded in a signed report, pruned from the database"),
            details={"probe_runs": result.probe_runs, "bytes": result.bytes,
                     "sha256": result.sha256, "probe_run_ids": pruned_ids,
                     "reports": result.reports, "retention_days": days})
    _files_remove(files - {""})
    return result


def _files_remove(names: set[str]) -> None:
    """Remove the stored files of pruned outputs that no unpruned run still uses (files are
    content-addressed: two runs with the same bytes share one)."""
    still = set(ProbeRun.objects.filter(stdout_file__in=names, stdout_pruned_at__isnull=True)
                .values_list("stdout_file", flat=True))
    still |= set(ProbeRun.objects.filter(stderr_file__in=names)
                 .values_list("stderr_file", flat=True))
    for name in names - still:
        outputs.file_path(name).unlink(missing_ok=True)


def raw_outputs_prune(*, dry_run: bool = False, days: int | None = None,
                      now: datetime | None = None) -> PruneSummary:
    """Prune what the retention rule allows (see the module docstring). ``days`` defaults to
    ``ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS``; unset means off: nothing is looked at."""
    if days is None:
        days = getattr(settings, "ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS", None)
    if days is None:
        return PruneSummary(enabled=False, days=None, dry_run=dry_run)
    if days < 0:
        raise ValueError("ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS must be 0 or more days")
    now = now or timezone.now()
    summary = PruneSummary(enabled=True, days=days, dry_run=dry_run)
    for engagement in Engagement.objects.filter(state=Engagement.State.ACCEPTED).order_by("id"):
        accepted_at = _accepted_at(engagement)
        if accepted_at is None or now - accepted_at < timedelta(days=days):
            continue
        summary.engagements.append(_engagement_prune(
            engagement, dry_run=dry_run, now=now, days=days,
            problems=summary.unverified_reports))
    return summary
