"""The main job end to end: ``run_gate`` over a real SSH server with stand-in tools.

Each test starts a real OpenSSH server on 127.0.0.1 (``lab`` fixture), runs the gate through
Celery (in-process here; the Redis path is in test_worker_paths.py) and reads the decision, the
stored evidence and the signed PDF.
"""

import io
import socket
from pathlib import Path

import pytest
from django.core.management import call_command

from acceptance.models import AuditEntry, Engagement
from gates.models import Gate
from reports.signing import verify_pdf
from runners.models import GateRun, Measurement, ProbeRun

pytestmark = pytest.mark.slow


def run_gate(engagement, gate):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement, gate, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()


def criterion_line(output, metric):
    return next(line.split() for line in output.splitlines() if line.startswith(metric + " "))


def test_it_passes_g1_and_g2_on_a_healthy_lab_with_signed_reports(lab):
    engagement, _ = lab("healthy")
    code, out, err = run_gate(engagement.name, "G1")
    assert code == 0, out + err
    assert criterion_line(out, "drive_count")[:5] == ["drive_count", ">=", "24", "24", "PASS"]
    assert "decision: PASSED" in out
    report = Path(next(line[len("report: "):] for line in out.splitlines()
                       if line.startswith("report: ")))
    check = verify_pdf(report.read_bytes())
    assert check.valid, check.summary

    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    # inventory + 24 self-tests + 24 SMART logs over SSH, and the BOM snapshot.
    assert run.probe_runs.filter(node__isnull=False).count() == 49
    assert run.probe_runs.filter(simulated=True).count() == 49
    inventory = run.probe_runs.get(probe="nvme_inventory")
    assert "nvme list -o json" in inventory.command and inventory.command.endswith("nvme-list")
    assert inventory.tool_version == "nvme version 2.11 (git 2.11)"
    import hashlib
    assert inventory.stdout_sha256 == hashlib.sha256(inventory.raw()).hexdigest()
    listed = Measurement.objects.get(gate_run=run, metric="drive_count", derived=False)
    assert listed.value == 24
    # G1 judges the drives of the array's drive model, derived from the inventory.
    drive_count = Measurement.objects.get(gate_run=run, metric="drive_count", derived=True)
    assert (drive_count.value, drive_count.unit, drive_count.node.name) == (
        24, "1", "lab-array-controller")
    assert drive_count.labels["scope"] == "array" and drive_count.labels["expected"] == "24"
    assert drive_count.inputs.count() == 24
    assert drive_count.verdicts.get().verdict == "pass"
    # Each self-test run names the controller it tested.
    assert run.probe_runs.get(probe="nvme_self_test", labels__controller="/dev/nvme7")

    code, out, err = run_gate(engagement.name, "G2")
    assert code == 0, out + err
    assert criterion_line(out, "line_efficiency")[2:5] == ["0.83", "0.880", "(88.0"]
    g2 = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    efficiency = Measurement.objects.get(gate_run=g2, metric="line_efficiency")
    assert efficiency.value == pytest.approx(11.0e9 / 12.5e9)
    assert sorted(efficiency.inputs.values_list("metric", flat=True)) == [
        "link_speed", "read_bandwidth"]
    deviation = Measurement.objects.get(gate_run=g2, metric="baseline_deviation",
                                        labels__figure="ttft_p50")
    assert deviation.value == pytest.approx(17.5 / 17.31 - 1)
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.ACTIVE
    assert list(engagement.gates.values_list("state", flat=True)) == [
        "passed", "passed", "pending", "pending"]


def test_it_stops_g1_on_a_missing_drive_and_refuses_g2_until_reopened(lab):
    engagement, _ = lab("missing-drive")
    code, out, _ = run_gate(engagement.name, "G1")
    assert code == 1
    assert criterion_line(out, "drive_count")[:5] == ["drive_count", ">=", "24", "23", "FAIL"]
    assert "decision: STOPPED" in out
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.STOPPED
    assert "drive_count >= 24 measured 23" in engagement.stopped_reason

    code, out, err = run_gate(engagement.name, "G2")
    assert code == 2
    assert "refused" in err and "stopped" in err and "drive_count >= 24 measured 23" in err
    assert not GateRun.objects.filter(gate__engagement=engagement, gate__code="G2").exists()

    call_command("reopen_engagement", engagement.name, "--reason", "drive 24 replaced on site",
                 "--actor", "pm-alice", stdout=io.StringIO())
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.ACTIVE
    entry = AuditEntry.objects.get(engagement=engagement, action="engagement re-opened")
    assert (entry.actor, entry.reason) == ("pm-alice", "drive 24 replaced on site")
    assert engagement.gates.get(code="G1").state == Gate.State.PENDING
    # Gates still run in order: G2 waits for G1 to pass.
    code, _, err = run_gate(engagement.name, "G2")
    assert code == 2 and "G1" in err and "has not passed" in err


def test_it_stops_g1_when_a_drive_fails_its_self_test(lab):
    engagement, _ = lab("failed-self-test")
    code, out, _ = run_gate(engagement.name, "G1")
    assert code == 1
    assert criterion_line(out, "self_test_failures")[:5] == [
        "self_test_failures", "<=", "0", "1", "FAIL"]
    assert criterion_line(out, "drive_count")[4] == "PASS"


def test_it_stops_g2_on_a_slow_link(lab):
    engagement, _ = lab("slow-link")
    assert run_gate(engagement.name, "G1")[0] == 0
    code, out, _ = run_gate(engagement.name, "G2")
    assert code == 1
    assert criterion_line(out, "line_efficiency")[2:6] == ["0.83", "0.760", "(76.0", "%)"]
    assert "FAIL" in criterion_line(out, "line_efficiency")
    assert "PASS" in criterion_line(out, "ttft_p50")


def test_it_stops_g2_when_the_baseline_is_off_by_more_than_ten_percent(lab):
    engagement, _ = lab("baseline-off")
    assert run_gate(engagement.name, "G1")[0] == 0
    code, out, _ = run_gate(engagement.name, "G2")
    assert code == 1
    assert "FAIL" in criterion_line(out, "output_throughput")
    assert "FAIL" in criterion_line(out, "ttft_p50")
    assert "PASS" in criterion_line(out, "line_efficiency")
    g2 = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    deviation = Measurement.objects.get(gate_run=g2, metric="baseline_deviation",
                                        labels__figure="output_throughput")
    assert deviation.value == pytest.approx(45.56 / 53.6 - 1)  # −15 %


def test_it_refuses_a_node_whose_host_key_differs_from_the_pinned_one(lab):
    engagement, _ = lab("healthy")
    other_engagement, other = lab("slow-link")
    node = engagement.nodes.get(role="array")
    node.host_key = other.host_key  # a real key, but not this server's
    node.save()
    code, out, err = run_gate(engagement.name, "G1")
    assert code == 2
    assert "host_key" in err and "not the pinned key" in err
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    assert run.state == GateRun.State.FAILED
    assert not run.probe_runs.filter(node=node).exists()  # nothing ran on the impostor
    assert engagement.gates.get(code="G1").state == Gate.State.PENDING  # no decision


def test_it_records_an_unreachable_node_as_an_error_not_a_stop(lab):
    engagement, _ = lab("healthy")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    engagement.nodes.filter(role="array").update(port=closed_port)
    code, _, err = run_gate(engagement.name, "G1")
    assert code == 2
    assert "unreachable" in err
    engagement.refresh_from_db()
    assert engagement.state == Engagement.State.ACTIVE


def test_it_refuses_an_unknown_engagement_or_gate(transactional_db):
    code, _, err = run_gate("no-such-engagement", "G1")
    assert (code, err.strip()) == (2, "error: no engagement named 'no-such-engagement'")


def test_it_refuses_a_gate_without_probes_yet(lab):
    engagement, _ = lab("healthy")
    Gate.objects.filter(engagement=engagement).exclude(code="G4").update(
        state=Gate.State.PASSED)
    code, _, err = run_gate(engagement.name, "G4")
    # past G3 now, but G2 was never decided: no request rate can be derived from its capacity
    assert code == 2 and "refused: no default request rate" in err
    g4 = engagement.gates.get(code="G4")
    g4.probe_plan[0]["soak"]["load"]["request_rate"] = 0.2  # the rate entered by hand
    g4.save(update_fields=["probe_plan"])
    code, _, err = run_gate(engagement.name, "G4")
    # G4's soak refuses until the array vendor's drive command is in its plan
    assert code == 2 and "refused:" in err and "command is not set" in err
    code, _, err = run_gate(engagement.name, "G9")
    assert code == 2 and "has no gate 'G9'" in err


def test_it_runs_real_fio_on_a_scratch_file_over_the_same_ssh_path(lab, tmp_path):
    """Real fio, real SSH, real parser: the figure stored equals fio's own bw_bytes."""
    import json

    from runners.execution import _JobContext, probe_run_execute
    from runners.probes import probe
    from runners.transport import SSHConnection

    engagement, _ = lab("healthy")
    scratch = tmp_path / "scratch.bin"
    scratch.write_bytes(b"\0" * (64 << 20))
    node = engagement.nodes.get(role="inference")
    gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                      started_by="test")
    from runners.models import NodeJob

    job = NodeJob.objects.create(gate_run=gate_run, node=node, state="running", lease="t1")
    with SSHConnection(node.ssh_target()) as connection:
        run = probe_run_execute(
            ctx=_JobContext(job, connection, {}), spec=probe("fio_seqread"),
            values={"filename": str(scratch), "runtime": 1, "ramp_time": 0, "numjobs": 2,
                    "iodepth": 1, "ioengine": "psync", "direct": False},
        )
    assert run.state == ProbeRun.State.PARSED, run.error
    assert not run.simulated  # the stand-in passed this through to the real fio
    assert run.tool_version.startswith("fio-")
    document = json.loads(run.raw())
    expected = sum(job["read"]["bw_bytes"] for job in document["jobs"])
    stored = Measurement.objects.get(probe_run=run, metric="read_bandwidth")
    assert expected > 0
    assert (stored.value, stored.unit) == (expected, "B/s")


def test_it_refuses_probe_timeouts_that_are_malformed_or_not_in_the_gate(lab):
    engagement, _ = lab("healthy")
    for value, message in [
        ("nvme_inventory", "expected PROBE=SECONDS"),
        ("nvme_inventory=abc", "seconds must be 1 … 604800"),
        ("nosuch=10", "unknown probe 'nosuch'"),
        ("fio_seqread=120", "G1 does not run fio_seqread"),
    ]:
        err = io.StringIO()
        with pytest.raises(SystemExit) as exit_info:
            call_command("run_gate", engagement.name, "G1", "--probe-timeout", value,
                         stdout=io.StringIO(), stderr=err)
        assert exit_info.value.code == 2 and message in err.getvalue(), err.getvalue()
    assert not GateRun.objects.filter(gate__engagement=engagement).exists()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G1", "--probe-timeout", "nvme_inventory=30",
                     stdout=io.StringIO())
    assert exit_info.value.code == 0
    assert GateRun.objects.get(gate__engagement=engagement).probe_timeouts == {
        "nvme_inventory": 30}
