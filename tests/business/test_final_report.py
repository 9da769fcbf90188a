"""The final acceptance report carries the business case: the figures the page shows, every
input listed; a G3 that stopped says "not established" and why (real WeasyPrint PDF, pdftotext)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from business.services import parameters_save
from gates.models import Decision
from reports.services import final_report_issue
from reports.signing import verify_pdf
from tests.business.test_services_api import PARAMS, g3_decide
from tests.reports.conftest import pdftotext
from tests.web.conftest import decide, report_for


def _decide_all(engagement, g3_outcome, sentence):
    for code in ("G1", "G2"):
        gate = engagement.gates.get(code=code)
        decide(gate, {c.key: ("pass", 0.0) for c in gate.criteria.all()}, "passed")
    g3_decide(engagement, outcome=g3_outcome, sentence=sentence,
              rounds=((53.6, 74.9),) if g3_outcome == "passed" else ((53.6, 60.0),))
    if g3_outcome == "passed":
        gate = engagement.gates.get(code="G4")
        decide(gate, {c.key: ("fail", 1.0) for c in gate.criteria.all()}, "stopped")
    # A decision counts once its signed report is in (issue 15): a stand-in report row each.
    directory = Path(os.environ.get("TMPDIR", "/tmp")) / f"business-{engagement.pk}"
    directory.mkdir(parents=True, exist_ok=True)
    for decision in Decision.objects.filter(gate__engagement=engagement):
        report_for(decision, directory)


def _text(report) -> str:
    path = Path(report.path)
    if os.environ.get("REPORTS_LOOK_DIR"):  # copy the PDF there to look at it
        shutil.copy(path, Path(os.environ["REPORTS_LOOK_DIR"]) / path.name)
    assert verify_pdf(path.read_bytes()).valid
    return " ".join(pdftotext(path).split())


def test_the_final_report_carries_the_business_case_as_on_the_page(client, engagement_a, pm):
    _decide_all(engagement_a, "passed", "G3 passed")
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    text = _text(final_report_issue(engagement=engagement_a, issued_by="pat-pm"))
    assert "Business case" in text
    assert "A model computed from measured figures and the customer's parameters." in text
    client.force_login(pm)
    page = client.get("/engagements/acme-1/business-case/").content.decode()
    for figure in ("176 → 128", "621.89 → 451.82", "+39.7 %", "1.4 months", "1.5 %"):
        assert figure in page and figure in text, figure
    assert "expected output tokens per day" in text and "100,000,000" in text  # inputs listed
    assert "vendor figure: FX100 platform ¥160,000 + 24 × ¥8,800" in text
    assert "Cost per million output tokens" in text and "Cumulative saving" in text


def test_a_stopped_g3_gives_not_established_in_the_final_report(engagement_a):
    _decide_all(engagement_a, "stopped", "throughput gain +11.9 % is below +29 %")
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    text = _text(final_report_issue(engagement=engagement_a, issued_by="pat-pm"))
    assert ("Not established: G3 stopped: throughput gain +11.9 % is below +29 %" in text)
    assert "176 → 128" not in text


def test_the_section_reads_in_the_report_language(engagement_a):
    engagement_a.report_language = "zh-hans"
    engagement_a.save(update_fields=["report_language"])
    _decide_all(engagement_a, "passed", "G3 passed")
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    text = _text(final_report_issue(engagement=engagement_a, issued_by="pat-pm"))
    assert "业务价值测算" in text and "依据实测数据与客户参数计算的模型。" in text
    assert "厂商数据：FX100 平台 ¥160,000 + 24 × ¥8,800" in text
    assert "176 → 128" in text
