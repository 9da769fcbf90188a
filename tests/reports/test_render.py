import json
import re
from pathlib import Path

import pytest

from reports.evidence import SUMMARY_NAME, embedded_digests, embedded_files
from reports.render import SIMULATED_MARK, render_gate_report_html, render_gate_report_pdf
from tests.reports.conftest import page_count, pdftotext
from tests.reports.samples import G1_DECISION, g1_stopped, g2_passed_zh


@pytest.fixture
def g1_file(g1_pdf: bytes, tmp_path: Path) -> Path:
    path = tmp_path / "g1.pdf"
    path.write_bytes(g1_pdf)
    return path


def test_it_renders_a_pdf(g1_pdf: bytes):
    assert g1_pdf.startswith(b"%PDF-")


def _words(text: str) -> str:
    # pdftotext joins a word broken after a hyphen ("fx-" + "array-1" -> "fxarray-1")
    return " ".join(text.replace("-", "").split())


def test_it_opens_page_one_with_the_decision_and_the_outcome_word(g1_file: Path):
    page_one = _words(pdftotext(g1_file, page=1))
    assert "STOPPED" in page_one
    assert _words(G1_DECISION) in page_one
    # the decision comes before the criteria table
    assert page_one.index("STOPPED") < page_one.index("Criteria")


def test_it_lists_every_criterion_with_its_verdict(g1_file: Path):
    text = pdftotext(g1_file)
    for metric in (
        "bom_items_checked",
        "nvme_drive_count",
        "drive_self_test_failures",
        "smart_critical_warning",
        "array_power_on_self_test",
    ):
        assert metric in text
    assert "FAIL" in text and "INSUFFICIENT DATA" in text
    assert "5 criteria: 3 pass, 1 fail, 1 insufficient data" in text


def test_it_marks_every_page_of_simulated_evidence(g1_file: Path):
    pages = page_count(g1_file)
    assert pages >= 2
    for page in range(1, pages + 1):
        text = pdftotext(g1_file, page=page)
        assert "SIMULATED EVIDENCE" in text, f"page {page} lacks the simulated mark"
        assert f"page {page} of {pages}" in text
        assert "Shenzhen inference cluster acceptance · G1 Arrival acceptance" in text


def test_it_leaves_the_mark_off_real_evidence(tmp_path: Path):
    ctx = g1_stopped(simulated=False, runs=[])
    path = tmp_path / "real.pdf"
    path.write_bytes(render_gate_report_pdf(ctx))
    assert "SIMULATED" not in pdftotext(path)


def test_it_lists_each_probe_and_node_in_the_appendix_and_each_sha256_in_the_summary(
        g1_pdf: bytes, g1_file: Path):
    # pages hold one row per probe and one line per node; each run's sha256 is in the
    # embedded summary and its attachment hashes to it (a page per run would grow per node)
    appendix = pdftotext(g1_file)
    appendix = appendix[appendix.index("Appendix A"):]
    runs = g1_stopped().runs
    for probe in {run.probe for run in runs}:
        assert probe in appendix
    node_lines = [line for line in appendix.splitlines()
                  if line.split() and line.split()[0] in {run.node for run in runs}]
    assert sorted(line.split()[0] for line in node_lines) == sorted({run.node for run in runs})
    summary = json.loads(embedded_files(g1_pdf, only={SUMMARY_NAME})[SUMMARY_NAME])
    digests = embedded_digests(g1_pdf)
    assert [entry["sha256"] for entry in summary["runs"]] == [run.sha256 for run in runs]
    for entry in summary["runs"]:
        assert digests[entry["attachment"]][0] == entry["sha256"]


def test_it_keeps_the_template_free_of_external_urls():
    html = render_gate_report_html(g1_stopped())
    assert not re.search(r"(?:src|href)\s*=|url\(|https?://", html)
    assert '<html lang="en">' in html
    assert SIMULATED_MARK in html


def test_it_escapes_text_from_the_context():
    html = render_gate_report_html(g1_stopped(customer="<script>x</script>"))
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_it_renders_chinese_glyphs(tmp_path: Path):
    ctx = g2_passed_zh()
    html = render_gate_report_html(ctx)
    assert '<html lang="zh-CN">' in html
    assert '"Noto Sans CJK SC"' in html
    path = tmp_path / "zh.pdf"
    path.write_bytes(render_gate_report_pdf(ctx))
    text = pdftotext(path)
    assert "深圳测试" in text
    assert "深圳示例云计算有限公司" in text
    assert "已通过" in text  # PASSED, in the report's language
    assert "G2 单节点基线：已通过 — 5 项判据中 5 项达标。" in " ".join(text.split())
