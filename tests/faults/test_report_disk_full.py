"""Fault: the reports directory is full. Before: the decision committed ``passed`` with no report
(G3 could then run on an unsigned pass), a truncated PDF stayed on disk, and a sign-off was
committed while its version 2 could not be written — every retry then said "already signed
off". Now: a failed write leaves no file and no row, the gate does not count, recovery issues the
report later; a sign-off is committed only with its version, so it can be retried.

The full disk is a file-size limit (RLIMIT_FSIZE) in a subprocess — the write itself fails
half-way, as on a full disk — or ``ENOSPC`` raised by ``fsync`` at the exact step (no tmpfs
here)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gates.models import Gate
from reports import storage
from reports.models import Report, SignOff
from reports.services import ReportRefused, report_issue, signoff_record
from reports.signing import verify_pdf
from runners import tasks
from runners.launch import runs_recover
from runners.models import GateRun
from tests.faults.conftest import G1_HEALTHY, evaluating_decision, files_in
from tests.web.conftest import make_user

ROOT = Path(__file__).resolve().parents[2]

LIMITED_WRITE = """
import json, os, resource, signal, sys
import django
django.setup()
from reports.storage import report_file_write
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG, as a full disk does
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    report_file_write("acme-faults", "acme-faults-G1-run1-v1.pdf", b"%PDF-1.7\\n" + b"x" * 300000)
except OSError as error:
    print(json.dumps({"type": type(error).__name__, "errno": error.errno, "text": str(error)}))
    sys.exit(3)
print(json.dumps({"written": True}))
"""


def test_a_write_cut_short_by_the_file_size_limit_leaves_no_file(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update(DJANGO_SETTINGS_MODULE="acceptance.settings", ACCEPTANCE_VAR_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", LIMITED_WRITE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert (said["type"], said["errno"]) == ("ReportNotWritten", errno.EFBIG)
    assert "could not be written (File too large); nothing was kept" in said["text"]
    assert files_in(tmp_path / "reports") == []  # no truncated PDF, no temporary file


def enospc_on_fsync(monkeypatch):
    real = os.fsync

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(storage.os, "fsync", fsync)
    return real


def test_a_full_disk_leaves_no_report_no_file_and_an_uncounted_gate(acme, settings,
                                                                     monkeypatch):
    g1 = acme.gates.get(code="G1")
    decision = evaluating_decision(g1, G1_HEALTHY, "passed")
    with monkeypatch.context() as patch:
        enospc_on_fsync(patch)
        tasks._report_issue(decision)
    run = GateRun.objects.get(id=decision.gate_run_id)
    g1.refresh_from_db()
    assert (run.state, g1.state) == (GateRun.State.FAILED, Gate.State.PENDING)
    assert "ReportNotWritten: [Errno 28] the report file acme-faults-G1-run1-v1-" in run.error
    assert "(No space left on device); nothing was kept" in run.error
    assert "The gate does not count as passed until it is" in run.error
    assert Report.objects.count() == 0
    assert files_in(settings.REPORTS_DIR) == []

    # A later sweep fails the same way: still no file, the run still says why.
    with monkeypatch.context() as patch:
        enospc_on_fsync(patch)
        runs_recover()
    assert files_in(settings.REPORTS_DIR) == [] and Report.objects.count() == 0

    # Room again: the next sweep issues it; the gate counts.
    assert runs_recover()[0].endswith("has no signed report: issued")
    run.refresh_from_db()
    g1.refresh_from_db()
    assert (run.state, g1.state) == (GateRun.State.DONE, Gate.State.PASSED)
    report = Report.objects.get()
    assert verify_pdf(Path(report.path).read_bytes()).valid
    assert files_in(settings.REPORTS_DIR) == [f"acme-faults/{Path(report.path).name}"]


@pytest.fixture
def signers(acme):
    from acceptance.models import Membership

    pm = make_user("pat-pm", Membership.Role.PROJECT_MANAGER)
    customer = make_user("carla-acme", Membership.Role.CUSTOMER, acme.customer)
    return pm, customer


def test_a_sign_off_whose_version_cannot_be_written_is_not_recorded_and_can_be_retried(
        acme, settings, monkeypatch, signers):
    pm, customer = signers
    decision = evaluating_decision(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    first = report_issue(decision=decision)
    signoff_record(report=first, user=pm, comment="vendor approves")
    with monkeypatch.context() as patch:
        enospc_on_fsync(patch)
        with pytest.raises(ReportRefused) as refusal:
            signoff_record(report=first, user=customer, comment="customer approves")
    text = str(refusal.value)
    assert text.startswith("the report file acme-faults-G1-run1-v2-")
    assert text.endswith(" could not be written (No space left on device); nothing was kept; "
                         "try again once the reports directory has room (the sign-off was not "
                         "recorded)")
    assert list(SignOff.objects.values_list("party", flat=True)) == ["vendor"]
    assert list(Report.objects.values_list("version", flat=True)) == [1]
    assert files_in(settings.REPORTS_DIR) == [f"acme-faults/{Path(first.path).name}"]

    signoff, second = signoff_record(report=first, user=customer, comment="customer approves")
    assert signoff.party == "customer" and second is not None
    assert (second.version, second.signoff_complete, second.replaces_id) == (2, True, first.id)
    assert verify_pdf(Path(second.path).read_bytes()).valid


def test_a_sign_off_left_without_its_version_by_an_older_release_issues_it_on_retry(
        acme, monkeypatch, signers):
    """What the old code left: both sign-offs committed, version 2 never written. The retry
    of either party issues the missing version instead of "already signed off"."""
    pm, customer = signers
    decision = evaluating_decision(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    first = report_issue(decision=decision)
    signoff_record(report=first, user=pm)
    SignOff.objects.create(report=first, party="customer", user=customer, name="carla-acme",
                           role="customer representative (ACME)", at=first.signed_at)
    signoff, second = signoff_record(report=first, user=customer)
    assert signoff.party == "customer"
    assert (second.version, second.signoff_complete) == (2, True)
    with pytest.raises(ReportRefused, match="the customer has already signed off"):
        signoff_record(report=first, user=customer)
    assert Report.objects.count() == 2
