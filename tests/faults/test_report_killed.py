"""Fault: the worker is killed while the PDF is rendered — the decision is committed, its signed
report is not. Before: the run stayed ``evaluating`` for good, the gate counted as passed with
no signed report, recovery found nothing, every new run was "already in progress" and a waiting
``run_gate`` never answered. Now: the gate does not count until its report exists; recovery
(``runners.launch.runs_recover``) issues the report, the run is done, ``run_gate`` answers.
The kill is an exception injected at the exact step (rendering), which no ``except Exception``
of the service sees; rendering and signing are otherwise real."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from django.core.management.base import OutputWrapper
from django.utils import timezone

from acceptance.models import AuditEntry, Engagement
from acceptance.pages.sentences import gate_sentence
from gates.models import Gate
from gates.services import GateRefused, gate_check_runnable
from reports import services
from reports.models import Report
from reports.signing import verify_pdf
from reports.storage import ORPHANS_DIR, TEMP_PREFIX, report_file_write
from runners import tasks
from runners.launch import runs_recover
from runners.management.commands.run_gate import Command as RunGate
from runners.models import GateRun
from tests.faults.conftest import (
    G1_HEALTHY,
    G1_MISSING_DRIVE,
    Killed,
    evaluating_decision,
    files_in,
)


def killed_while_rendering(monkeypatch, decision):
    def render(context):
        raise Killed("SIGKILL while WeasyPrint renders")

    with monkeypatch.context() as patch:
        patch.setattr(services, "render_gate_report_pdf", render)
        with pytest.raises(Killed):
            tasks._report_issue(decision)


def test_a_decision_without_its_report_does_not_count_and_recovery_issues_it(
        acme, settings, monkeypatch):
    g1, g2 = acme.gates.get(code="G1"), acme.gates.get(code="G2")
    decision = evaluating_decision(g1, G1_HEALTHY, "passed")
    killed_while_rendering(monkeypatch, decision)

    # What the kill leaves: the decision, no report, no file — and the gate does not count.
    run = GateRun.objects.get(id=decision.gate_run_id)
    g1.refresh_from_db()
    assert (run.state, g1.state) == (GateRun.State.EVALUATING, Gate.State.PENDING)
    assert Report.objects.count() == 0 and files_in(settings.REPORTS_DIR) == []
    with pytest.raises(GateRefused, match="G1"):  # G2 needs G1 passed: it is not, yet
        gate_check_runnable(gate=g2)
    sentence = gate_sentence(g1, decision, acme.start_date)
    assert "its signed report is not issued yet: it does not count" in sentence

    lines = runs_recover()
    assert len(lines) == 1, lines
    assert lines[0].endswith("decision passed of " + f"{decision.decided_at:%Y-%m-%d %H:%M:%S}"
                             " UTC has no signed report: issued")
    run.refresh_from_db()
    g1.refresh_from_db()
    acme.refresh_from_db()
    assert (run.state, run.error, g1.state) == (GateRun.State.DONE, "", Gate.State.PASSED)
    report = Report.objects.get()
    assert (report.decision_id, report.version, report.kind) == (decision.id, 1, "gate")
    data = Path(report.path).read_bytes()
    assert len(data) == report.size_bytes > 10_000
    check = verify_pdf(data)
    assert check.valid, check.summary
    assert files_in(settings.REPORTS_DIR) == [f"acme-faults/{Path(report.path).name}"]
    gate_check_runnable(gate=g2)  # G1 counts now: G2 may run
    assert runs_recover() == []  # the next sweep finds nothing; nothing issued twice
    assert Report.objects.count() == 1


def test_a_stop_without_its_report_does_not_stop_the_engagement_until_issued(
        acme, monkeypatch):
    decision = evaluating_decision(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    killed_while_rendering(monkeypatch, decision)
    acme.refresh_from_db()
    assert acme.state == Engagement.State.ACTIVE
    runs_recover()
    acme.refresh_from_db()
    assert acme.state == Engagement.State.STOPPED
    assert acme.stopped_reason.startswith("G1 stopped on ")
    assert "drive-count" in acme.stopped_reason or "drive_count" in acme.stopped_reason


def test_a_waiting_run_gate_answers_once_recovery_issues_the_report(acme, settings,
                                                                    monkeypatch):
    settings.RUNS_LOST_AFTER_SECONDS = 1
    decision = evaluating_decision(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    killed_while_rendering(monkeypatch, decision)
    monkeypatch.setattr(RunGate, "RECOVERY_EVERY_S", 0.2)
    out, err = io.StringIO(), io.StringIO()
    command = RunGate(stdout=OutputWrapper(out), stderr=OutputWrapper(err))
    run = GateRun.objects.get(id=decision.gate_run_id)
    started = time.monotonic()
    command.wait(run, timeout=60)
    with pytest.raises(SystemExit) as exit_info:
        command.finish(run)
    assert exit_info.value.code == 1, out.getvalue() + err.getvalue()
    assert time.monotonic() - started < 30
    assert "decision: STOPPED" in out.getvalue()
    path = next(x[len("report: "):] for x in out.getvalue().splitlines()
                if x.startswith("report: "))
    assert verify_pdf(Path(path).read_bytes()).valid


def test_a_superseded_decision_is_not_issued_and_moves_nothing(acme, settings, monkeypatch):
    g1 = acme.gates.get(code="G1")
    old = evaluating_decision(g1, G1_HEALTHY, "passed", age_s=900)
    killed_while_rendering(monkeypatch, old)
    GateRun.objects.filter(id=old.gate_run_id).update(state=GateRun.State.FAILED,
                                                      error="report missing")
    newer = evaluating_decision(g1, G1_MISSING_DRIVE, "stopped", age_s=300)
    lines = runs_recover()
    assert len(lines) == 1 and f"run #{newer.gate_run.attempt}" in lines[0], lines
    g1.refresh_from_db()
    assert g1.state == Gate.State.STOPPED
    assert list(Report.objects.values_list("decision_id", flat=True)) == [newer.id]


def test_a_report_issued_late_clears_the_error_and_says_so_in_the_audit_trail(acme,
                                                                               monkeypatch):
    decision = evaluating_decision(acme.gates.get(code="G1"), G1_HEALTHY, "passed")

    def render(context):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(services, "render_gate_report_pdf", render)
        tasks._report_issue(decision)
    run = GateRun.objects.get(id=decision.gate_run_id)
    assert run.state == GateRun.State.FAILED
    assert run.error.startswith("decision recorded (passed) but the signed report could not "
                                "be issued: OSError: [Errno 28] No space left on device.")
    assert "recovery (every 30 s, or manage.py recover_runs) issues it" in run.error
    runs_recover()
    run.refresh_from_db()
    assert (run.state, run.error) == (GateRun.State.DONE, "")
    entry = AuditEntry.objects.get(action="report_recovered")
    assert "No space left on device" in entry.reason


def test_killed_writers_leave_nothing_the_sweep_does_not_settle(acme, settings):
    """A writer killed after its temporary file, or between publishing the file and committing
    its row, leaves a file no row names: recovery's sweep removes the first and moves the
    second aside (never served, kept for a person); a file with its row stays."""
    kept = report_file_write("acme-faults", "kept.pdf", b"%PDF-1.7\n% kept\n")
    Report.objects.create(engagement=acme, path=str(kept), sha256="0" * 64, size_bytes=16,
                          signer="test", signed_at=timezone.now())
    directory = Path(settings.REPORTS_DIR) / "acme-faults"
    partial = directory / f"{TEMP_PREFIX}123-1-acme-faults-G1-v1.pdf"
    partial.write_bytes(b"%PDF-1.7\n% trunc")
    orphan = directory / "acme-faults-G1-run1-v1-x.pdf"
    orphan.write_bytes(b"%PDF-1.7\n% no row\n")
    old = time.time() - 3600
    for path in (kept, partial, orphan):
        os.utime(path, (old, old))
    lines = tasks.recover_all()
    assert sorted(line.split(":")[0] for line in lines) == sorted([str(partial), str(orphan)])
    assert files_in(settings.REPORTS_DIR) == [
        f"{ORPHANS_DIR}/acme-faults/{orphan.name}", "acme-faults/kept.pdf"]


def test_recover_runs_issues_a_missing_report_at_once(acme, monkeypatch):
    from django.core.management import call_command

    decision = evaluating_decision(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    killed_while_rendering(monkeypatch, decision)
    out = io.StringIO()
    call_command("recover_runs", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("has no signed report: issued"), lines
    assert lines[-1] == "recovered 1 lost node job(s), soak(s), report(s) or report file(s)"
    assert Report.objects.filter(decision=decision).exists()
