"""Issue 16, reference profile: the profile is data per engagement (R1, R2 c8/c16/c32, R3
TP4×2); G2's baseline and G3's gain range take their values from the chosen one, a profile
lacking a figure is refused naming both, criteria never mix profiles. The bench boundary cases
run the vLLM stand-in, its parser and the engagement's stored criterion; one lab run takes G2
through SSH, evaluation and the signed report with a non-default profile."""

from __future__ import annotations

import io
import subprocess

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from acceptance.models import AuditEntry, Engagement
from acceptance_core.profiles import PROFILES
from acceptance_core.redecide import redecide
from gates.evaluation import evaluate_criterion
from gates.models import Criterion, Gate
from gates.reference import ProfileRefused, engagement_profile_set
from gates.services import GateRefused, criterion_spec, engagement_create, gate_check_runnable
from reports.basis import decision_basis
from runners.models import GateRun, ProbeRun
from runners.outputs import output_bytes
from tests.decide.standins import StandinNode


def crit(engagement, code, key) -> Criterion:
    return Criterion.objects.get(gate__engagement=engagement, gate__code=code, key=key)


@pytest.fixture
def engagement(db):
    return engagement_create(name="prof-1", customer="C", start_date="2026-12-01")


def test_every_profile_names_report_platform_model_parallelism_and_workload():
    assert set(PROFILES) == {"R1-c16", "R2-c8", "R2-c16", "R2-c32", "R3-tp4x2"}
    for profile in PROFILES.values():
        assert profile.report in ("R1", "R2", "R3")
        assert profile.platform and profile.model and profile.parallelism and profile.workload
    assert PROFILES["R2-c8"].figures["local_nvme_ttft_p50"] == 10.17
    assert PROFILES["R2-c32"].figures["local_nvme_output_throughput"] == 53.9
    assert PROFILES["R1-c16"].figures == {"local_nvme_ttft_p50": 37.97}


def test_a_new_engagement_holds_the_default_r2_c16_figures_and_names_them(engagement):
    assert engagement.reference_profile == "R2-c16"
    ttft = crit(engagement, "G2", "baseline-ttft")
    assert (ttft.reference_value, ttft.label_filter, ttft.reference_profile) == (
        17.31, {"concurrency": "16"}, "R2-c16")
    assert ttft.source.startswith("R2: Qwen3-Coder-480B-FP8, TP=8, concurrency 16")
    gain = crit(engagement, "G3", "throughput-gain")
    assert (gain.threshold, gain.threshold_high, gain.reference_profile) == (0.29, 0.40, "R2-c16")
    assert not Criterion.objects.filter(gate__engagement=engagement,
                                        source__contains="DOMAIN.md").exists()
    assert not Criterion.objects.filter(gate__engagement=engagement,
                                        source__contains="RUNBOOK").exists()


def test_choosing_r2_c8_moves_figures_concurrency_and_records_old_and_new(engagement):
    engagement_profile_set(engagement=engagement, profile="R2-c8", actor="pm", reason="site c8")
    engagement.refresh_from_db()
    assert engagement.reference_profile == "R2-c8"
    ttft = crit(engagement, "G2", "baseline-ttft")
    put = crit(engagement, "G2", "baseline-throughput")
    assert (ttft.reference_value, put.reference_value) == (10.17, 43.9)
    assert ttft.label_filter == put.label_filter == {"concurrency": "8"}
    assert "concurrency 8" in ttft.source and "10.17 s" in ttft.source
    g2 = Gate.objects.get(engagement=engagement, code="G2")
    bench = next(s for s in g2.probe_plan if s["probe"] == "vllm_bench_serve")
    assert bench["params"]["concurrency"] == 8
    entry = AuditEntry.objects.get(engagement=engagement, action="reference profile changed")
    assert (entry.details["old"], entry.details["new"], entry.reason) == (
        "R2-c16", "R2-c8", "site c8")
    assert entry.details["criteria"]["G2 baseline-ttft"]["old"]["reference_value"] == 17.31
    assert entry.details["criteria"]["G2 baseline-ttft"]["new"]["reference_value"] == 10.17


@pytest.mark.parametrize(("profile", "message"), [
    ("R1-c16", "reference profile R1-c16 (R1) has no local-NVMe output throughput "
               "(local_nvme_output_throughput), which criterion G2 baseline-throughput needs"),
    ("R3-tp4x2", "reference profile R3-tp4x2 (R3) has no local-NVMe TTFT p50 "
                 "(local_nvme_ttft_p50), which criterion G2 baseline-ttft needs"),
    ("R9-ascend", "reference profile 'R9-ascend' is unknown; known: R1-c16, R2-c8, R2-c16, "
                  "R2-c32, R3-tp4x2"),
])
def test_a_profile_lacking_a_figure_is_refused_by_name_and_nothing_changes(engagement, profile,
                                                                            message):
    before = list(Criterion.objects.filter(gate__engagement=engagement)
                  .values_list("reference_value", "threshold", "threshold_high", "source"))
    with pytest.raises(ProfileRefused) as refused:
        engagement_profile_set(engagement=engagement, profile=profile, actor="pm", reason="r")
    assert str(refused.value) == message
    engagement.refresh_from_db()
    assert engagement.reference_profile == "R2-c16"
    assert before == list(Criterion.objects.filter(gate__engagement=engagement).values_list(
        "reference_value", "threshold", "threshold_high", "source"))
    assert not AuditEntry.objects.filter(action="reference profile changed").exists()


def test_creating_an_engagement_with_r1_is_refused_naming_the_figure(db):
    with pytest.raises(ValidationError) as refused:
        engagement_create(name="prof-r1", customer="C", start_date="2026-12-01",
                          reference_profile="R1-c16")
    assert refused.value.message_dict["reference_profile"] == [
        "reference profile R1-c16 (R1) has no local-NVMe output throughput "
        "(local_nvme_output_throughput), which criterion G2 baseline-throughput needs"]
    assert not Engagement.objects.filter(name="prof-r1").exists()


def test_the_create_command_takes_the_profile(db):
    call_command("engagement_create", "prof-cmd", "--customer", "C", "--start-date",
                 "2026-12-01", "--reference-profile", "R2-c32", stdout=io.StringIO())
    engagement = Engagement.objects.get(name="prof-cmd")
    assert crit(engagement, "G2", "baseline-throughput").reference_value == 53.9
    assert crit(engagement, "G2", "baseline-ttft").label_filter == {"concurrency": "32"}


def test_a_gate_whose_criteria_hold_another_profile_does_not_run(engagement):
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    Engagement.objects.filter(pk=engagement.pk).update(reference_profile="R2-c8")
    g2 = Gate.objects.get(engagement=engagement, code="G2")
    with pytest.raises(GateRefused, match="G2 baseline-ttft holds reference profile R2-c16's "
                                          "figure but the engagement's profile is R2-c8"):
        gate_check_runnable(gate=g2)


def test_an_edited_bound_leaves_the_profile_and_a_new_profile_keeps_it(engagement):
    from gates.services import criterion_threshold_edit

    criterion_threshold_edit(criterion=crit(engagement, "G3", "throughput-gain"), actor="pm",
                             reason="customer's own range",
                             values={"threshold": 0.25, "threshold_high": 0.45})
    gain = crit(engagement, "G3", "throughput-gain")
    assert (gain.reference_figure, gain.reference_profile) == ("", "")
    assert gain.source.startswith("set for this engagement (customer's own range); was R2:")
    engagement_profile_set(engagement=engagement, profile="R2-c32", actor="pm", reason="c32")
    gain.refresh_from_db()
    assert (gain.threshold, gain.threshold_high) == (0.25, 0.45)


def bench_samples(tmp_path, concurrency, ttft_ms, tok_s):
    node = StandinNode(tmp_path, "healthy", {"bench": {"median_ttft_ms": ttft_ms,
                                                       "output_throughput": tok_s}})
    result = tmp_path / "r"
    done = node.run(
        "vllm", "bench", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:8000",
        "--model", "m", "--num-prompts", "256", "--max-concurrency", str(concurrency),
        "--save-result", "--result-dir", str(result), "--result-filename", "b.json")
    assert done.returncode == 0, done.stderr
    return node.parsed_file("vllm_bench", result / "b.json")


@pytest.mark.parametrize(("ttft_ms", "tok_s", "ttft_verdict", "tok_verdict"), [
    (11187.0, 39.51, "pass", "pass"),    # 10.17 × 1.10 and 43.9 × 0.90: exactly on the bound
    (9153.0, 48.29, "pass", "pass"),     # 10.17 × 0.90 and 43.9 × 1.10: on the other bound
    (11188.0, 39.50, "fail", "fail"),    # just outside on the slow side
    (9152.0, 48.30, "fail", "fail"),     # just outside on the fast side
    (17310.0, 53.6, "fail", "fail"),     # R2 c16's figures: no pass against R2 c8
])
def test_g2_against_r2_c8_on_both_sides_of_ten_percent(tmp_path, engagement, ttft_ms, tok_s,
                                                       ttft_verdict, tok_verdict):
    engagement_profile_set(engagement=engagement, profile="R2-c8", actor="pm", reason="c8")
    samples = bench_samples(tmp_path, 8, ttft_ms, tok_s)
    ttft = evaluate_criterion(criterion_spec(crit(engagement, "G2", "baseline-ttft")), samples)
    put = evaluate_criterion(criterion_spec(crit(engagement, "G2", "baseline-throughput")),
                             samples)
    assert (ttft.verdict, put.verdict) == (ttft_verdict, tok_verdict), (
        ttft.explanation, put.explanation)


def test_a_c16_benchmark_is_not_judged_against_a_c8_profile(tmp_path, engagement):
    engagement_profile_set(engagement=engagement, profile="R2-c8", actor="pm", reason="c8")
    samples = bench_samples(tmp_path, 16, 10170.0, 43.9)
    judged = evaluate_criterion(criterion_spec(crit(engagement, "G2", "baseline-ttft")), samples)
    assert judged.verdict == "insufficient"


def report_text(decision) -> str:
    done = subprocess.run(["pdftotext", "-layout", decision.report.path, "-"],
                          capture_output=True, text=True, check=True)
    return done.stdout


def summary(basis, gate_run) -> dict:
    """summary.json's shape for one gate, its raw outputs attached by run id."""
    runs = [{"number": run.id, "attachment": f"run-{run.id}", "sha256": run.stdout_sha256}
            for run in gate_run.probe_runs.all()]
    return {"schema_version": 2, "runs": runs, "gates": [{"gate": "G2", "redecide": basis}]}


def files(gate_run) -> dict:
    return {f"run-{run.id}": output_bytes(run, "stdout") for run in gate_run.probe_runs.all()}


@pytest.mark.slow
def test_a_lab_g2_against_r2_c8_runs_at_c8_and_names_the_profile(lab):
    # the c8 row's figures, exactly on the ±10 % bounds: 10.17 × 1.10 s and 43.9 × 0.90 tok/s
    engagement, _ = lab("healthy", bench={"median_ttft_ms": 11187.0, "output_throughput": 39.51})
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    engagement_profile_set(engagement=engagement, profile="R2-c8", actor="pm", reason="c8 row")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=out, stderr=err)
    assert exit_info.value.code == 0, out.getvalue() + err.getvalue()
    gate_run = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    bench = ProbeRun.objects.get(gate_run=gate_run, probe="vllm_bench_serve")
    assert "--max-concurrency 8" in bench.command
    verdicts = {v.criterion.key: v for v in gate_run.decision.verdicts.all()}
    assert verdicts["baseline-ttft"].verdict == "pass"
    assert verdicts["baseline-ttft"].measured_value == pytest.approx(11.187)
    assert verdicts["baseline-ttft"].criterion_snapshot["reference_profile"] == "R2-c8"
    assert verdicts["baseline-throughput"].verdict == "pass"
    text = " ".join(report_text(gate_run.decision).split())
    assert ("Reference profile: R2-c8 — R2: Qwen3-Coder-480B-FP8, TP=8, concurrency 8, 8 × "
            "AMD Instinct MI308X") in text
    basis = decision_basis(gate_run.decision)
    assert basis["reference_profile"]["key"] == "R2-c8"
    assert {c["key"]: c["reference_profile"] for c in basis["criteria"]
            if c["reference_profile"]} == {"baseline-ttft": "R2-c8",
                                           "baseline-throughput": "R2-c8"}
    checked = redecide(summary(basis, gate_run), files(gate_run))
    assert any(note.startswith("G2: reference profile R2-c8 — R2:") for note in checked.notes)
    mixed = {**basis, "criteria": [{**c, "reference_profile": "R2-c16"}
                                   if c["key"] == "baseline-ttft" else c
                                   for c in basis["criteria"]]}
    checked = redecide(summary(mixed, gate_run), files(gate_run))
    assert ("G2 baseline-ttft: holds reference profile R2-c16's figure, the gate's is R2-c8"
            in checked.differences)


def test_the_profile_page_lists_the_rows_and_a_project_manager_chooses_one(db):
    from django.test import Client

    from acceptance.models import Membership
    from tests.web.conftest import make_user

    engagement = engagement_create(name="prof-web", customer="C", start_date="2026-12-01")
    url = f"/engagements/{engagement.name}/reference-profile/"
    engineer = Client()
    engineer.force_login(make_user("eve-eng", Membership.Role.ENGINEER))
    assert engineer.get(url).status_code == 403
    assert engineer.post(url, {"profile": "R2-c8", "reason": "x"}).status_code == 403
    pm = Client()
    pm.force_login(make_user("pat-pm", Membership.Role.PROJECT_MANAGER))
    page = pm.get(url).content.decode()
    assert 'id="profile-R1-c16"' in page and "local-NVMe TTFT p50: 37.97 s" in page
    assert "array-tier output-throughput gain range: +35 % … +36 %" in page
    refused = pm.post(url, {"profile": "R1-c16", "reason": "vendor text says R1"})
    assert refused.status_code == 400
    assert ("reference profile R1-c16 (R1) has no local-NVMe output throughput "
            "(local_nvme_output_throughput), which criterion G2 baseline-throughput needs"
            in refused.content.decode())
    assert pm.post(url, {"profile": "R2-c8", "reason": ""}).status_code == 400
    done = pm.post(url, {"profile": "R2-c8", "reason": "the site runs c8"})
    assert done.status_code == 302
    engagement.refresh_from_db()
    assert engagement.reference_profile == "R2-c8"
    detail = pm.get(f"/engagements/{engagement.name}/").content.decode()
    assert "R2-c8 — R2: Qwen3-Coder-480B-FP8, TP=8, concurrency 8" in detail
    assert "local-NVMe TTFT p50 10.17 s" in detail
