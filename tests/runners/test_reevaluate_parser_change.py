"""``manage.py reevaluate`` after a parser change (issue 21): a stored G1 run whose raw output the
old parser refused — nvme-cli 1.3's empty device list ``{`` newline newline ``}``, BUGS.md #7 —
is read by nvme_list 2 as zero drives, and the command shows the parser change, the new figure
and the verdict the new parser would give, leaving the signed record as it was."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from acceptance.models import Array, Credential, Node
from gates.services import engagement_create
from runners.models import Measurement, ProbeRun
from runners.reevaluation import gate_run_reevaluate
from tests.web.conftest import decide

# What the old decision recorded: nvme_list 1 refused the capture, so drive-count had no figure.
G1_REFUSED_INVENTORY = {"bom-complete": ("pass", 0.0), "drive-count": ("insufficient", None),
                        "self-test": ("pass", 0.0), "critical-warning": ("pass", 0.0)}


@pytest.fixture
def stored_run(db):
    engagement = engagement_create(name="acme-1", customer="ACME",
                                   start_date=timezone.localdate() - timedelta(weeks=3))
    # G1 counts per array, on the array's controller (issue 16): the inventory ran there.
    array = Array.objects.create(engagement=engagement, serial="A1", expected_drive_count=24)
    credential = Credential.from_secret("acme-1-key", "not a real key")
    credential.save()
    node = Node.objects.create(engagement=engagement, name="array-ctl", role=Node.Role.ARRAY,
                               address="10.0.0.1", ssh_user="acctest", array=array,
                               host_key="ssh-ed25519 " + "QUNNRS1ob3N0LWtleQ==",
                               credential=credential)
    decision = decide(engagement.gates.get(code="G1"), G1_REFUSED_INVENTORY, "stopped")
    ProbeRun.objects.create(
        gate_run=decision.gate_run, node=node, probe="nvme_inventory", parser="nvme_list",
        parser_version="1", command="nvme list -o json", exit_code=0,
        stdout=b"{\n\n}\n",  # nvme-cli 1.3 without NVMe (linux-nvme/nvme-cli#173)
        started_at=timezone.now(), state=ProbeRun.State.FAILED)
    return decision


def test_the_new_parser_reads_zero_drives_where_the_old_one_refused(stored_run):
    result = gate_run_reevaluate(gate_run=stored_run.gate_run)
    assert result.parser_changes == [
        f"array-ctl nvme_inventory (run {stored_run.gate_run.probe_runs.get().id}): "
        "parser nvme_list 1 → 2"]
    assert any(line.endswith('new drive_count {} = 0 1') for line in result.measurement_changes)
    # drive_count >= 24 judged on 0 drives: a FAIL where the record says insufficient (the other
    # criteria have no stored run here, so they now read insufficient)
    assert "drive_count: insufficient (—) → fail (0)" in result.verdict_changes
    assert result.differs


def test_the_command_shows_it_and_changes_nothing(stored_run):
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("reevaluate", str(stored_run.gate_run.id), stdout=out)
    text = out.getvalue()
    assert exit_info.value.code == 1
    assert "  parser: array-ctl nvme_inventory" in text and "parser nvme_list 1 → 2" in text
    assert "  verdict: drive_count: insufficient (—) → fail (0)" in text
    assert "DIFFERENT" in text
    assert not Measurement.objects.filter(gate_run=stored_run.gate_run).exists()  # untouched
    verdict = stored_run.verdicts.get(criterion_snapshot__key="drive-count")
    assert verdict.verdict == "insufficient" and verdict.measured_value is None
