"""G4 re-decided from the signed PDF alone: every figure the soak was decided on (error rate,
completion gaps, TTFT p99 and throughput against their baselines, correctness mismatches in
each span, the soak's duration, missed fault windows) is derived again from the embedded raw
outputs of the soak (``acceptance_core.soak`` → ``gates.soak_derivations``), for every G4 lab
scenario, passed and stopped; a summary.json claiming another span figure than its raw outputs
give is named (exit 1)."""

from __future__ import annotations

import pytest

from acceptance_core.pdf import embedded
from gates.models import Decision, Gate
from runners.lab.services import lab_up
from runners.soak.models import Soak
from tests.reports.test_redecide import forged, managed, offline, report_of, table_row
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow


def soak_report(scenario: str, **soak) -> tuple[int, Decision]:
    engagement, _ = lab_up(scenario_name=scenario, overrides={"soak": {"seconds": 30, **soak}})
    Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
        state=Gate.State.PASSED)
    status, out, err = run_gate(engagement.name, "G4")
    assert status in (0, 1), out + err
    return status, Decision.objects.get(gate__engagement=engagement, gate__code="G4")


@pytest.mark.parametrize(("scenario", "soak", "failing"), [
    ("soak-clean", {}, None),
    ("soak-drive-impact", {}, "error-rate"),
    ("soak-link-impact", {}, "error-rate"),
    ("soak-clean", {"drive_out_impact": "corrupt"}, "correctness"),
])
def test_every_g4_lab_scenario_re_decides_from_its_raw_outputs(transactional_db, scenario,
                                                                soak, failing):
    status, decision = soak_report(scenario, **soak)
    # soak-clean passes (tests/soak); on a loaded machine one of its fault windows can be
    # missed, which stops G4 too: either way its report must re-decide the same
    if failing:
        assert (status, decision.outcome) == (1, "stopped")
        assert decision.verdicts.get(criterion__key=failing).verdict == "fail"
    path = report_of(decision.gate.engagement, "G4")
    code, out = offline(path)
    assert code == 0, out
    assert f"decision G4: recorded {decision.outcome}, recomputed {decision.outcome}" in out
    assert "judged as recorded" not in out
    summary, _ = embedded(path.read_bytes())
    basis = summary["gates"][0]["redecide"]
    derived = basis["derived"]
    assert f"note: G4: {len(derived)} soak figures derived again from " in out
    spans = {(m["labels"].get("fault", ""), m["labels"].get("phase"))
             for m in derived if m["metric"] == "completion_gap_max"}
    assert {("", "steady"), ("drive-out", "during"), ("link-down", "after")} <= spans, spans
    for verdict in decision.verdicts.all():
        row = table_row(out, "G4", verdict.criterion.key)
        assert row[-1] == "yes" and row[-2] == verdict.verdict, row
    if failing:
        value = f"{decision.verdicts.get(criterion__key=failing).measured_value:.6g}"
        assert table_row(out, "G4", failing)[-5:] == [value, "fail", value, "fail", "yes"]
    assert basis["soak"]["faults"][0]["state"] in ("healed", "missed", "refused", "failed")
    assert managed(path)[0] == 0


def test_a_span_figure_its_raw_outputs_do_not_give_is_named(transactional_db, tmp_path):
    _, decision = soak_report("soak-drive-impact")
    data = report_of(decision.gate.engagement, "G4").read_bytes()
    soak = Soak.objects.get(gate_run=decision.gate_run)
    node = soak.agents.get().node.name  # the inference node under load

    summary, _ = embedded(data)
    rates = [m for m in summary["gates"][0]["redecide"]["derived"]
             if m["metric"] == "request_error_rate"]
    # the drive-out window's span; on a loaded machine the fault window can be missed (G4
    # then stops on the missed fault): the forgery is then on the steady span instead
    span = next((m for m in rates if m["labels"].get("fault") == "drive-out"
                 and m["labels"].get("phase") == "during"), None)
    chosen = span or next(m for m in rates if m["labels"].get("phase") == "steady")
    labels = ", ".join(f"{k}={v}" for k, v in sorted(chosen["labels"].items()))

    def no_errors_during_the_drive_fault(summary, files):
        basis = summary["gates"][0]["redecide"]
        forged_span = next(m for m in basis["derived"] if m["metric"] == "request_error_rate"
                           and m["labels"] == chosen["labels"] and m["node"] == chosen["node"])
        if span is not None:
            assert (forged_span["node"], forged_span["value"] > 0.2) == (node, True)
            forged_span["value"] = 0.0  # the span a passing G4 would need
        else:
            forged_span["value"] = 0.5  # a figure its raw outputs do not give
        for criterion in basis["criteria"]:
            if criterion["key"] == "error-rate" and span is not None:
                criterion["recorded"] = {"measured": 0.0, "verdict": "pass"}
        basis["outcome"] = "passed"

    path = tmp_path / "claims.pdf"
    path.write_bytes(forged(data, no_errors_during_the_drive_fault))
    code, out = offline(path)
    assert code == 1, out
    said = "0" if span is not None else "0.5"
    assert (f"DIFFERS: G4 derived: request_error_rate on {chosen['node']} ({labels}): "
            f"the report says {said} ratio, the evidence gives ") in out
    if span is not None:
        assert ("DIFFERS: G4 error-rate (request_error_rate): recorded 0 pass, the evidence "
                "gives") in out
    assert "DIFFERS: G4 decision: recorded passed, the evidence gives stopped" in out
    assert managed(path)[0] == 1

    def a_shorter_gap(summary, files):
        basis = summary["gates"][0]["redecide"]
        gap = next(m for m in basis["derived"] if m["metric"] == "completion_gap_max"
                   and m["labels"].get("phase") == "steady")
        gap["value"] = gap["value"] / 2

    path = tmp_path / "gap.pdf"
    path.write_bytes(forged(data, a_shorter_gap))
    code, out = offline(path)
    assert code == 1, out
    assert "DIFFERS: G4 derived: completion_gap_max on " in out
    assert "(phase=steady, scope=steady): the report says" in out

    def one_window_fewer_failures(summary, files):
        basis = summary["gates"][0]["redecide"]
        run = next(r for r in basis["runs"] if r["probe"] == "soak_windows"
                   and any(m["metric"] == "failed_requests" and m["value"] > 0
                           for m in r["measurements"]))
        failed = next(m for m in run["measurements"]
                      if m["metric"] == "failed_requests" and m["value"] > 0)
        failed["value"] = 0.0

    path = tmp_path / "window.pdf"
    path.write_bytes(forged(data, one_window_fewer_failures))
    code, out = offline(path)
    assert code == 1, out
    assert "(soak_windows on " in out and "failed_requests on " in out
    assert "the report says 0 1, the evidence gives" in out


def test_a_soak_report_without_its_derivation_inputs_is_refused(transactional_db, tmp_path):
    _, decision = soak_report("soak-clean")
    data = report_of(decision.gate.engagement, "G4").read_bytes()

    def as_before(summary, files):
        del summary["gates"][0]["redecide"]["soak"]

    path = tmp_path / "old.pdf"
    path.write_bytes(forged(data, as_before))
    code, out = offline(path)
    assert code == 2, out
    assert ("cannot check: G4: the report records the soak's figures but not the plan numbers "
            "and fault windows they were derived with") in out

    def golden_gone(summary, files):
        golden = next(r for r in summary["runs"] if r["probe"] == "soak_golden")
        del files[golden["attachment"]]
        golden["attachment"] = None

    path = tmp_path / "no-golden.pdf"
    path.write_bytes(forged(data, golden_gone))
    code, out = offline(path)
    assert code == 2, out
    assert "the known-good answers of lab-inference-1" in out and "are not embedded" in out
