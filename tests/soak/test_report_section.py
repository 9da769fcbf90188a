"""The G4 report's soak section: built from a recorded soak, rendered by WeasyPrint into a real
PDF (a minimal A4 wrapper like the report's), and read back with pdftotext."""

import shutil
import subprocess
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.utils import timezone, translation

from gates.models import Decision
from runners.soak.report import SoakReportSection, soak_report_section

from .pages_fixtures import recorded_soak

SHOTS = Path(__file__).resolve().parents[2] / "var" / "screens"
needs_poppler = pytest.mark.skipif(not shutil.which("pdftotext"), reason="poppler not installed")


def decide(soak, outcome="stopped", sentence="G4 stopped: error-rate failed during drive-out."):
    return Decision.objects.create(gate=soak.gate_run.gate, gate_run=soak.gate_run,
                                   outcome=outcome, sentence=sentence, decided_by="service",
                                   decided_at=timezone.now())


def pdf_of(section: SoakReportSection, lang: str = "en") -> bytes:
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    language = "zh-hans" if lang == "zh" else "en"
    with translation.override(language):
        body = render_to_string("reports/_soak_section.html", {"soak_section": section})
    html = (f'<!DOCTYPE html><html lang="{"zh-CN" if lang == "zh" else "en"}"><head>'
            '<meta charset="utf-8"><style>@page { size: A4; margin: 16mm } html { font-family: '
            '"Noto Sans", "DejaVu Sans", "Noto Sans CJK SC", sans-serif; font-size: 9pt }'
            f"</style></head><body>{body}</body></html>")
    return HTML(string=html, url_fetcher=URLFetcher(allowed_protocols={"data"})).write_pdf()


def text_of(pdf: bytes, tmp_path: Path) -> str:
    path = tmp_path / "section.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


def test_it_is_none_for_a_decision_that_is_not_a_soak(db):
    from gates.services import engagement_create
    from runners.models import GateRun

    engagement = engagement_create(name="plain-g2", customer="ACME",
                                   start_date=timezone.now().date())
    gate = engagement.gates.get(code="G2")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="x", state="done")
    decision = Decision.objects.create(gate=gate, gate_run=run, outcome="passed", sentence="ok",
                                       decided_by="x", decided_at=timezone.now())
    assert soak_report_section(decision) is None


def test_it_carries_the_plan_hash_the_per_fault_checks_and_the_gap(db):
    soak = recorded_soak(drive_impact=True)
    section = soak_report_section(decide(soak))
    assert section.plan_sha256 == soak.plan_sha256 and len(section.plan_sha256) == 64
    assert section.simulated and section.compression == pytest.approx(8640)
    assert section.planned_text == "72 h" and section.held_text == "43 h 12 min"  # 18 of 30 s
    drive = next(f for f in section.faults if f.name == "drive-out")
    assert drive.verdict == "fail" and drive.length_s == pytest.approx(4.5)
    during = {c.check: c for c in drive.during}
    assert during["error-rate"].verdict == "fail" and during["error-rate"].value_text == "18.75 %"
    assert {c.check: c.verdict for c in drive.before}["error-rate"] == "pass"
    assert {c.check: c.verdict for c in drive.after}["error-rate"] == "pass"
    assert "timer" in drive.heal and "setsid" in drive.heal
    link = next(f for f in section.faults if f.name == "link-down")
    assert link.verdict == "not yet" and link.during == ()
    assert [g.seconds for g in section.gaps] == [pytest.approx(1.7)]
    assert [c.metric for c in section.charts] == ["ttft_p99", "output_throughput",
                                                  "request_error_rate", "completion_gap_max"]
    errors = next(c for c in section.charts if c.metric == "request_error_rate")
    assert errors.svg.startswith("<svg") and 'data-fault="drive-out"' in errors.svg
    assert 'class="collection-gap"' in errors.svg and errors.points == 18


@needs_poppler
def test_it_renders_into_a_pdf_in_english_with_the_table_and_the_charts(db, tmp_path):
    soak = recorded_soak(drive_impact=True)
    section = soak_report_section(decide(soak))
    pdf = pdf_of(section)
    assert pdf.startswith(b"%PDF")
    if shutil.which("pdftoppm"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "g4-soak-section.pdf").write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-r", "70", str(SHOTS / "g4-soak-section.pdf"),
                        str(SHOTS / "g4-soak-section")], check=True)
    text = " ".join(text_of(pdf, tmp_path).split())  # cells wrap: compare word runs
    for expected in ["G4 soak: load, faults and steady state", soak.plan_sha256,
                     "SIMULATED EVIDENCE", "drive-out", "link-down", "18.75 %", "not yet",
                     "error rate",
                     "Per fault: checks before, during and after", "TTFT p99",
                     "Longest gap between completions", "Collection gaps",
                     "the worker driving the soak stopped", "Time compressed ×8640"]:
        assert expected in text, expected


@needs_poppler
def test_it_renders_in_chinese_with_cjk_glyphs(db, tmp_path):
    soak = recorded_soak()
    decision = decide(soak, outcome="passed", sentence="G4 passed.")
    with translation.override("zh-hans"):
        section = soak_report_section(decision)
    pdf = pdf_of(section, lang="zh")
    if shutil.which("pdftoppm"):
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "g4-soak-section-zh.pdf").write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-r", "70", "-f", "1", "-l", "1",
                        str(SHOTS / "g4-soak-section-zh.pdf"), str(SHOTS / "g4-soak-section-zh")],
                       check=True)
    text = text_of(pdf, tmp_path)
    assert "G4 浸泡测试" in text  # the translated heading, real glyphs (not empty boxes)
    assert soak.plan_sha256 in text and "drive-out" in text
    assert "时间压缩 ×8640" in " ".join(text.split())  # texts built in the report's language
