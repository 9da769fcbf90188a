"""A compressed 72 h soak in the lab, end to end through ``run_gate ENG G4`` (embedded default:
eager Celery): real stand-in processes, a real network namespace whose link is really taken
down, a drive fault on the stand-in array (simulated evidence)."""

import subprocess
from collections import Counter

import pytest

from gates.models import Decision
from reports.services import report_context
from runners.models import Measurement, ProbeRun
from runners.soak import queries
from runners.soak.models import FaultWindow, Soak

from .conftest import run_gate

pytestmark = pytest.mark.slow


def report_text(decision) -> str:
    """The text of ``decision``'s signed report (pdftotext)."""
    done = subprocess.run(["pdftotext", "-layout", decision.report.path, "-"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def windows_of(soak, metric):
    return {int(m.labels["soak_window"]): m.value for m in Measurement.objects.filter(
        gate_run=soak.gate_run, metric=metric, derived=False)}


def test_it_passes_a_compressed_soak_with_both_faults_and_the_samples_to_show_it(soak_lab):
    engagement = soak_lab("soak-clean", seconds=30)
    code, out, err = run_gate(engagement.name, "G4")
    assert code == 0, out + err
    assert "decision: PASSED" in out and "report: " in out
    soak = Soak.objects.get(gate_run__gate__engagement=engagement)
    assert soak.state == Soak.State.DONE and soak.time_compression == pytest.approx(8640)
    # Every window collected, in order, none missing: a continuous record.
    completed = windows_of(soak, "completed_requests")
    assert sorted(completed) == list(range(1, len(completed) + 1)) and len(completed) >= 18
    assert sum(windows_of(soak, "failed_requests").values()) == 0
    # 16 req/s for ~1 s windows: every window carried load.
    assert min(completed.values()) >= 10
    faults = {f.name: f for f in soak.faults.all()}
    assert set(faults) == {"drive-out", "link-down"}
    for fault in faults.values():
        assert fault.state == FaultWindow.State.HEALED and fault.heal_how == "timer"
        assert fault.heal_method == "setsid"  # no systemd here: the fallback timer
        assert fault.heal_armed_at < fault.heal_verified_at < fault.injected_at < fault.healed_at
        assert all(check["ok"] for check in fault.safety)
        length = (fault.healed_at - fault.injected_at).total_seconds()
        assert 2.0 < length < 5.5  # 15 % of 30 s, armed on the node
    assert faults["link-down"].inject_command.startswith("ip -n acs-")
    # Samples during each fault window show load going on without failures.
    rows = {r["name"]: r for r in queries.soak_fault_rows(soak)}
    for name in faults:
        assert rows[name]["verdict"] == "pass"
        during = {c["check"]: c for c in rows[name]["checks"]["during"]}
        assert during["error-rate"]["value"] == 0
        assert set(during) >= {"error-rate", "no-interruption", "ttft-p99", "throughput"}
    decision = Decision.objects.get(gate_run=soak.gate_run)
    assert decision.outcome == "passed"
    # Correctness probes: answers compared with the known-good ones, all exact.
    answers = Measurement.objects.filter(gate_run=soak.gate_run, metric="probe_mismatches",
                                         derived=False)
    assert answers.count() >= 9 and {a.labels["result"] for a in answers} == {"exact"}
    # Provenance: every sample comes from a stored collection with its hash and tool version.
    runs = ProbeRun.objects.filter(gate_run=soak.gate_run)
    assert Counter(r.probe for r in runs)["soak_golden"] == 1
    for run in runs:
        assert len(run.stdout_sha256) == 64 and run.simulated and "vllm 0.20.1" in run.tool_version
    sample = Measurement.objects.filter(gate_run=soak.gate_run, metric="ttft_p99").first()
    assert sample.unit == "s" and sample.node.name == "lab-inference-1"
    assert sample.probe_run.command.startswith("tail -c +")
    series = queries.soak_series(soak, "ttft_p99")
    assert len(series["points"]) == len(completed) and series["unit"] == "s"
    assert 0.25 < min(p["value"] for p in series["points"])  # the engine's 250 ms prefill
    progress = queries.soak_progress(soak)
    assert progress["percent"] == pytest.approx(100, abs=5)
    # The signed G4 report carries the soak: its charts and the per-fault table.
    text = report_text(decision)
    assert "G4 soak: load, faults and steady state" in text
    assert report_context(decision).charts == []  # no per-window bars under a G2 caption
    assert "drive-out" in text and "link-down" in text
    assert soak.plan_sha256[:12] in text.replace("\n", "")


@pytest.mark.parametrize(("scenario", "fault", "other"), [
    ("soak-drive-impact", "drive-out", "link-down"),
    ("soak-link-impact", "link-down", "drive-out"),
])
def test_an_impact_stops_g4_naming_the_fault_window_and_the_failed_check(soak_lab, scenario,
                                                                         fault, other):
    engagement = soak_lab(scenario, seconds=30)
    code, out, err = run_gate(engagement.name, "G4")
    assert code == 1, out + err
    decision = Decision.objects.get(gate__engagement=engagement, gate__code="G4")
    assert decision.outcome == "stopped"
    assert f"in fault window {fault}" in decision.sentence
    assert "request_error_rate <= 0 measured" in decision.sentence
    assert f"fault window {other}" not in decision.sentence
    error_rate = decision.verdicts.get(criterion__key="error-rate")
    assert error_rate.verdict == "fail" and error_rate.measured_value > 0.2
    assert f"fault {fault}" in error_rate.explanation and "phase during" in error_rate.explanation
    soak = Soak.objects.get(gate_run=decision.gate_run)
    assert f"fault window {fault}" in soak.stop_reason and "error-rate" in soak.stop_reason
    rows = {r["name"]: r for r in queries.soak_fault_rows(soak)}
    assert rows[fault]["verdict"] == "fail" and rows[other]["verdict"] == "pass"
    # Before the fault all was well; the failures sit inside its window, and it healed.
    before = {c["check"]: c for c in rows[fault]["checks"]["before"]}
    assert before["error-rate"]["value"] == 0
    injected = soak.faults.get(name=fault)
    assert injected.state == FaultWindow.State.HEALED
    failed = Measurement.objects.filter(gate_run=soak.gate_run, metric="failed_requests",
                                        derived=False, value__gt=0)
    assert failed.exists()
    for m in failed:
        assert injected.injected_at.timestamp() - 1.5 < m.sampled_at.timestamp() \
            < injected.healed_at.timestamp() + 2.5
    assert "stopped on:" in out and f"fault window {fault}" in out
    assert "G4 soak: load, faults and steady state" in report_text(decision)


def test_answers_from_a_corrupt_tier_stop_g4_although_no_request_fails(soak_lab):
    """Uptime alone proves nothing: while the drive is out the stand-in array serves wrong KV
    blocks; every request succeeds, the correctness probe sees the answers change."""
    engagement = soak_lab("soak-clean", seconds=30, drive_out_impact="corrupt")
    code, out, err = run_gate(engagement.name, "G4")
    assert code == 1, out + err
    decision = Decision.objects.get(gate__engagement=engagement, gate__code="G4")
    assert "probe_mismatches <= 0 measured" in decision.sentence
    assert "in fault window drive-out" in decision.sentence
    assert "request_error_rate" not in decision.sentence
    soak = Soak.objects.get(gate_run=decision.gate_run)
    assert sum(windows_of(soak, "failed_requests").values()) == 0
    wrong = Measurement.objects.filter(gate_run=soak.gate_run, metric="probe_mismatches",
                                       derived=False, value=1)
    assert wrong.exists()
    assert all(m.labels["result"].startswith("diverges at token ") for m in wrong)
    fault = soak.faults.get(name="drive-out")
    for m in wrong:  # the wrong answers came while the drive was out
        assert fault.injected_at.timestamp() - 0.5 < m.sampled_at.timestamp() \
            < fault.healed_at.timestamp() + 1.5
