"""Retention of raw outputs: off by default; on, only the stdout of an accepted engagement's
runs that a verified signed report embeds (matched by sha256) is pruned, after N days, audited;
a dry run changes nothing; a later report version still embeds the pruned evidence."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from acceptance.models import AuditEntry, Engagement
from gates import evaluation
from gates.models import Decision
from gates.services import decision_record, decision_settle
from reports.evidence import embedded_files
from reports.services import report_issue, report_reissue
from reports.signing import verify_pdf
from runners import outputs
from runners.models import GateRun, ProbeRun
from runners.pages import probe_row
from runners.retention import raw_outputs_prune

INVENTORY = b'{"Devices": [' + b'{"DevicePath": "/dev/nvme0n1"},' * 24 + b"{}]}\n"
SMART = b'{"smart_status": {"passed": true}}\n'


def decide(ledger, code: str):
    gate = ledger.engagement.gates.get(code=code)
    run = ledger.run(GateRun.State.DONE, code=code)
    criteria = list(gate.criteria.all())
    verdicts = [evaluation.Verdict(c.key, "pass", 1.0, f"{c.key}: pass") for c in criteria]
    decision = decision_record(gate_run=run, verdicts=verdicts, criteria=criteria,
                               outcome="passed")
    decision_settle(decision=decision)  # as the service does once the signed report is in
    return run, decision


def stored(ledger, run, probe, stdout):
    return ledger.probe_run(run, probe, 2.0, stdout=stdout,
                            stdout_sha256=hashlib.sha256(stdout).hexdigest(),
                            state=ProbeRun.State.PARSED, stderr=b"warning on stderr\n")


@pytest.fixture
def accepted(ledger):
    """An accepted engagement: G1's runs embedded in its signed report; G2's run (no report)
    and one G1 run changed after signing are not embedded."""
    g1_run, g1 = decide(ledger, "G1")
    inventory = stored(ledger, g1_run, "nvme_inventory", INVENTORY)
    smart = stored(ledger, g1_run, "smart_log", SMART)
    changed = stored(ledger, g1_run, "smart_log", b'{"smart_status": {"passed": false}}\n')
    report = report_issue(decision=g1)
    changed_bytes = b'{"smart_status": {"passed": true}} (changed after signing)\n'
    ProbeRun.objects.filter(id=changed.id).update(
        stdout=changed_bytes, stdout_sha256=hashlib.sha256(changed_bytes).hexdigest())
    g2_run, _ = decide(ledger, "G2")
    fio = stored(ledger, g2_run, "fio_seq_read", b'{"jobs": [{"read": {"bw": 1}}]}\n')
    for code in ("G3", "G4"):
        decide(ledger, code)
    ledger.engagement.refresh_from_db()
    assert ledger.engagement.state == Engagement.State.ACCEPTED
    Decision.objects.filter(gate__engagement=ledger.engagement).update(
        decided_at=timezone.now() - timedelta(days=40))
    return {"report": report, "embedded": [inventory, smart], "kept": [changed, fio]}


def snapshot():
    return list(ProbeRun.objects.order_by("id").values_list("id", "stdout", "stdout_pruned_at"))


def test_it_is_off_by_default(accepted, settings, capsys):
    assert settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS is None
    before = snapshot()
    assert raw_outputs_prune().enabled is False
    call_command("raw_outputs_prune")
    assert "retention is off" in capsys.readouterr().out
    assert snapshot() == before
    assert not AuditEntry.objects.filter(action="raw_outputs_pruned").exists()


def test_it_prunes_only_what_a_signed_report_embeds_and_audits_it(accepted, settings, capsys):
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 30
    call_command("raw_outputs_prune")
    out = capsys.readouterr().out
    size = len(INVENTORY) + len(SMART)
    assert f"ops-1: pruned 2 raw outputs ({size} bytes) embedded in reports " \
           f"{accepted['report'].id}; kept 2 not embedded" in out
    for run in accepted["embedded"]:
        run.refresh_from_db()
        assert bytes(run.stdout) == b"" and run.stdout_pruned_at is not None
        assert run.stdout_size > 0 and len(run.stdout_sha256) == 64
        assert bytes(run.stderr) == b"warning on stderr\n"  # never embedded: kept
    for run in accepted["kept"]:
        run.refresh_from_db()
        assert bytes(run.stdout) != b"" and run.stdout_pruned_at is None
    audit = AuditEntry.objects.get(action="raw_outputs_pruned")
    assert audit.engagement.name == "ops-1" and audit.actor == "retention"
    assert audit.details["probe_runs"] == 2 and audit.details["bytes"] == size
    assert audit.details["sha256"] == [hashlib.sha256(INVENTORY).hexdigest(),
                                       hashlib.sha256(SMART).hexdigest()]
    assert audit.details["reports"] == [accepted["report"].id]
    # Once pruned, a second pass has nothing left to do and audits nothing more.
    assert raw_outputs_prune().probe_runs == 0
    assert AuditEntry.objects.filter(action="raw_outputs_pruned").count() == 1

    # A later version of the report still embeds the pruned evidence, read back from the first.
    again = report_reissue(report=accepted["report"], reason="sign-off page",
                           issued_by="pat-pm")
    data = Path(again.path).read_bytes()
    assert verify_pdf(data).valid
    embedded = {hashlib.sha256(c).hexdigest() for n, c in embedded_files(data).items()
                if n.startswith("evidence/")}
    assert {hashlib.sha256(INVENTORY).hexdigest(), hashlib.sha256(SMART).hexdigest()} <= embedded


def test_a_dry_run_changes_nothing(accepted, settings, capsys):
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 30
    before = snapshot()
    call_command("raw_outputs_prune", "--dry-run")
    assert "ops-1: would prune 2 raw outputs" in capsys.readouterr().out
    assert snapshot() == before
    assert not AuditEntry.objects.filter(action="raw_outputs_pruned").exists()


def test_it_waits_n_days_after_acceptance(accepted, settings):
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 60
    assert raw_outputs_prune().engagements == []
    assert raw_outputs_prune(now=timezone.now() + timedelta(days=21)).probe_runs == 2


def test_it_never_prunes_an_engagement_that_is_not_accepted(accepted, settings):
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 0
    Engagement.objects.filter(pk=accepted["report"].engagement_id).update(
        state=Engagement.State.ACTIVE)
    before = snapshot()
    assert raw_outputs_prune().engagements == []
    assert snapshot() == before


def test_it_keeps_what_a_report_that_no_longer_verifies_embeds(accepted, settings, capsys):
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 30
    path = Path(accepted["report"].path)
    path.chmod(0o600)
    path.write_bytes(path.read_bytes() + b"\n% appended\n")
    before = snapshot()
    call_command("raw_outputs_prune")
    captured = capsys.readouterr()
    assert "pruned 0 raw outputs" in captured.out
    assert "file does not hash to its sha256" in captured.err
    assert snapshot() == before


def test_it_refuses_negative_days(db):
    with pytest.raises(Exception, match="must be 0 or more days"):
        call_command("raw_outputs_prune", "--days", "-1")


def test_it_removes_the_files_of_pruned_outputs_and_says_when(accepted, settings):
    """Runs recorded since outputs are files: pruning removes the file (no other run shares
    it), the row keeps sha256 and size, and its pages say when it was pruned."""
    settings.ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS = 30
    paths = []
    for run in accepted["embedded"]:
        stored = outputs.output_store(bytes(run.stdout))
        ProbeRun.objects.filter(id=run.id).update(stdout=b"", stdout_file=stored.name)
        paths.append(outputs.file_path(stored.name))
        assert paths[-1].exists() and stored.sha256 == run.stdout_sha256
    assert raw_outputs_prune().probe_runs == 2
    for run, path in zip(accepted["embedded"], paths, strict=True):
        run.refresh_from_db()
        assert not path.exists() and run.raw() == b"" and run.stdout_size > 0
        assert probe_row(run, run.gate_run_id).pruned_text.startswith(
            f"stdout pruned on {run.stdout_pruned_at:%Y-%m-%d}")
