"""Re-deciding signed lab reports from the PDF alone (``python -m acceptance_core redecide``
and ``manage.py redecide``): every lab scenario's report gives its recorded decision again; a
summary.json that claims another figure than its raw output is named; a report issued before
schema 2 is refused. G4's soak reports: ``test_redecide_soak.py``."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from weasyprint import Attachment

from acceptance.models import Membership
from acceptance_core.__main__ import main, redecide_file
from acceptance_core.pdf import embedded, load_roots
from acceptance_core.redecide import CannotCheck, redecide
from gates.models import Gate
from reports.evidence import SUMMARY_NAME
from reports.models import Report
from reports.render import render_html_pdf
from reports.signing import ensure_dev_signer, load_signer, sign_pdf
from runners.lab.services import lab_up
from runners.models import GateRun
from tests.runners.test_run_gate import run_gate
from tests.web.conftest import make_user

pytestmark = pytest.mark.slow


def ca_path() -> str:
    return str(Path(settings.SIGNING_DIR) / "ca.pem")


def report_of(engagement, code: str) -> Path:
    run = GateRun.objects.filter(gate__engagement=engagement, gate__code=code).latest("id")
    return Path(run.decision.report.path)


def offline(path: Path, *trust: str) -> tuple[int, str]:
    out = io.StringIO()
    roots = load_roots(list(trust or [ca_path()]))
    return redecide_file(path.read_bytes(), roots, out), out.getvalue()


def managed(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("redecide", str(path), stdout=out)
    return exit_info.value.code, out.getvalue()


def table_row(output: str, gate: str, key: str) -> list[str]:
    return next(line.split() for line in output.splitlines()
                if line.startswith(f"{gate} ") and line.split()[1] == key)


@pytest.mark.parametrize(("scenario", "gate", "code", "outcome"), [
    ("healthy", "G1", 0, "passed"),
    ("missing-drive", "G1", 1, "stopped"),
    ("failed-self-test", "G1", 1, "stopped"),
    ("slow-link", "G2", 1, "stopped"),
    ("baseline-off", "G2", 1, "stopped"),
])
def test_g1_and_g2_reports_give_their_decision_again(lab, client, scenario, gate, code,
                                                     outcome):
    engagement, _ = lab(scenario)
    if gate == "G2":
        engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    status, out, err = run_gate(engagement.name, gate)
    assert status == code, out + err
    path = report_of(engagement, gate)
    status, out = offline(path)
    assert status == 0, out
    assert f"decision {gate}: recorded {outcome}, recomputed {outcome}" in out
    assert "vendor signature by" in out and "trusted" in out
    if scenario == "missing-drive":
        assert table_row(out, "G1", "drive-count")[-5:] == ["23", "fail", "23", "fail", "yes"]
    if scenario == "slow-link":
        row = table_row(out, "G2", "line-efficiency")
        assert row[-5:] == ["0.76", "fail", "0.76", "fail", "yes"], out
    status, out = managed(path)
    assert status == 0, out
    assert f"decision {gate}: recorded {outcome}, recomputed {outcome}" in out
    if scenario == "missing-drive":
        _pages_show_the_table(client, path)


def _pages_show_the_table(client, path: Path) -> None:
    """The portal's "Re-decide from the evidence" and the verify page give the same table."""
    report = Report.objects.get(path=str(path))
    client.force_login(make_user("pat-pm", Membership.Role.PROJECT_MANAGER))
    reports_page = client.get(reverse("engagement-reports", args=[report.engagement.name]))
    link = reverse("report-redecide", args=[report.id])
    assert link in reports_page.content.decode()
    for response in (client.get(link), client.post(reverse("report-verify"), {
            "pdf": SimpleUploadedFile("r.pdf", path.read_bytes(), "application/pdf"),
            "redecide": "1"})):
        assert response.status_code == 200
        text = " ".join(response.content.decode().split())
        assert "The evidence gives the recorded decision." in text
        # the metric, as on every other page (the criterion's key in its title)
        assert '<td>G1</td><td title="drive-count">drive_count</td><td>&gt;= 24</td> ' \
               "<td>23.0 · fail</td> <td>23.0 · fail</td>" in text
        assert "G1 decision: recorded stopped, recomputed stopped" in text
    assert client.post(reverse("report-verify"), {
        "pdf": SimpleUploadedFile("r.pdf", path.read_bytes(), "application/pdf")
    }).context["redecision"] is None  # only when asked for


def test_g3_reports_give_their_decision_again(transactional_db):
    # one node each: without workers several nodes read back one after another (no overlap)
    for scenario, nodes, code, outcome in (("kv-gain", 1, 0, "passed"),
                                           ("kv-no-gain", 1, 1, "stopped")):
        engagement, _ = lab_up(scenario_name=scenario, nodes=nodes)
        engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
        status, out, err = run_gate(engagement.name, "G3")
        assert status == code, out + err
        status, out = offline(report_of(engagement, "G3"))
        assert status == 0, out
        assert f"decision G3: recorded {outcome}, recomputed {outcome}" in out
        row = table_row(out, "G3", "ttft-reduction")
        assert row[-1] == "yes" and row[-2] == ("pass" if code == 0 else "fail")
        if scenario == "kv-gain":
            # the shared read-back re-derived from the embedded counter series and clock
            # reading: the overlap window's bytes ÷ its length ÷ the array port's line rate
            assert table_row(out, "G3", "readback-efficiency")[-2:] == ["pass", "yes"]
            assert table_row(out, "G3", "round-deviation")[-2:] == ["pass", "yes"]


def forged(data: bytes, change, signer=None) -> bytes:
    """The report's evidence with ``change(summary, files)`` applied, rendered again and
    signed by ``signer`` (the vendor's own signer by default)."""
    summary, files = embedded(data)
    change(summary, files)
    files[SUMMARY_NAME] = json.dumps(summary).encode()
    pdf = render_html_pdf("<html><body><p>report</p></body></html>", attachments=[
        Attachment(file_obj=io.BytesIO(content), name=name, relationship="Data")
        for name, content in files.items()])
    return sign_pdf(pdf, signer=signer or load_signer(), timestamper=None)


def test_a_figure_the_raw_output_does_not_give_is_named_and_tampering_fails_the_signature(
        lab, tmp_path):
    engagement, _ = lab("slow-link")
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    assert run_gate(engagement.name, "G2")[0] == 1
    data = report_of(engagement, "G2").read_bytes()

    def claim_more_bandwidth(summary, files):
        basis = summary["gates"][0]["redecide"]
        fio = next(r for r in basis["runs"] if r["parser"] == "fio")
        bandwidth = next(m for m in fio["measurements"] if m["metric"] == "read_bandwidth")
        assert bandwidth["value"] == 9.5e9
        bandwidth["value"] = 11.0e9  # what a passing G2 would have needed (0.88 ≥ 0.83)

    path = tmp_path / "claims.pdf"
    path.write_bytes(forged(data, claim_more_bandwidth))
    status, out = offline(path)
    assert status == 1, out
    assert ("DIFFERS: G2 run 2 (fio_seqread on lab-inference-1): read_bandwidth on "
            "lab-inference-1 (job=seqread): " in out), out
    assert "the report says 1.1e+10 B/s, the evidence gives 9.5e+09 B/s" in out
    assert managed(path)[0] == 1

    def faster_raw_output(summary, files):
        fio = next(r for r in summary["runs"] if r["probe"].startswith("fio"))
        # any change to the raw output; its sha256 in the summary follows it
        files[fio["attachment"]] = files[fio["attachment"]].replace(b"9500000000",
                                                                    b"11000000000") + b"\n"
        fio["sha256"] = hashlib.sha256(files[fio["attachment"]]).hexdigest()

    ensure_dev_signer(tmp_path / "mallory")
    mallory = load_signer(signing_dir=tmp_path / "mallory")
    path = tmp_path / "resigned.pdf"
    path.write_bytes(forged(data, faster_raw_output, signer=mallory))
    status, out = offline(path)
    assert status == 2, out
    assert "cannot check: signature: vendor signature: signer" in out
    assert "is not trusted by the given roots" in out
    status, out = managed(path)
    assert status == 2 and "cannot check: signature:" in out, out


def test_a_report_without_the_criteria_snapshot_is_refused(lab, tmp_path):
    engagement, _ = lab("healthy")
    assert run_gate(engagement.name, "G1")[0] == 0
    data = report_of(engagement, "G1").read_bytes()

    def as_before_schema_2(summary, files):
        del summary["schema_version"]
        for gate in summary["gates"]:
            del gate["redecide"]

    path = tmp_path / "old.pdf"
    path.write_bytes(forged(data, as_before_schema_2))
    status, out = offline(path)
    assert status == 2
    assert ("cannot check: summary.json schema version 1: this report was issued before "
            "reports carried their criteria snapshot and derivation inputs") in out
    assert main(["redecide", str(path), "--trust", ca_path()]) == 2
    assert main(["redecide", str(tmp_path / "absent.pdf"), "--trust", ca_path()]) == 2
    report = str(report_of(engagement, "G1"))
    assert main(["redecide", report, "--trust", str(tmp_path / "no-root.pem")]) == 2
    assert main(["redecide", report]) == 2  # no trust root given
    assert main(["redecide", report, "--trust", ca_path()]) == 0
    with pytest.raises(CannotCheck, match="summary.json lists no gate"):
        redecide({"schema_version": 2, "gates": []}, {})

    # G1 is derived per array with the array's drive model and expected count, as recorded
    summary, _ = embedded(data)
    plan = summary["gates"][0]["redecide"]["drives"]["lab-array-controller"]
    assert (plan["array"], plan["expected"]) == ("LAB-HEALTHY", 24), plan

    def without_drive_plans(summary, files):
        del summary["gates"][0]["redecide"]["drives"]

    path = tmp_path / "no-drives.pdf"
    path.write_bytes(forged(data, without_drive_plans))
    status, out = offline(path)
    assert status == 2, out
    assert ("cannot check: G1: the report records per-array drive figures but not the arrays' "
            "drive model and expected drive count") in out
