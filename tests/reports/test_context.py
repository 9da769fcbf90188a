from datetime import date, datetime

import pytest

from gates.presentation import VerdictRow
from reports.context import GateReportContext
from tests.reports.samples import g1_stopped


def test_it_rejects_an_unknown_outcome():
    with pytest.raises(ValueError, match="decision_outcome"):
        g1_stopped(decision_outcome="maybe")


def test_it_rejects_a_naive_decision_time():
    with pytest.raises(ValueError, match="aware"):
        GateReportContext(
            engagement_name="e",
            customer="c",
            gate_code="G1",
            gate_name="Arrival acceptance",
            due_date=date(2026, 3, 13),
            engagement_start=date(2026, 2, 27),
            decision_outcome="passed",
            decision_sentence="G1 is met.",
            decided_at=datetime(2026, 3, 13, 9, 0),  # noqa: DTZ001 - the point of the test
            decided_by="pm",
        )


def test_it_rejects_an_unknown_verdict():
    with pytest.raises(ValueError, match="verdict"):
        VerdictRow(metric="m", description="d", requirement=">= 1", measured_text="0",
                   reference_source="DOMAIN.md G1", verdict="maybe", explanation="")


def test_it_defaults_the_vendor_and_language():
    ctx = g1_stopped()
    assert ctx.vendor == "FX storage vendor"
    assert ctx.html_lang == "en"


@pytest.mark.parametrize("language", ["zh-hans", "zh-Hans", "zh-cn"])
def test_it_maps_simplified_chinese_to_zh_cn(language):
    assert g1_stopped(language=language).html_lang == "zh-CN"
