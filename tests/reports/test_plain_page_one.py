"""Page 1 of a real G3 report in plain words: the lab's G3 run on one node (real sshd, stand-in
engines), its signed PDF read back with pdftotext; the sentences carry the figures the decision
stored (both arms in seconds and tokens per second beside each ratio), the sources name the
vendor's published reports and no internal document."""

from __future__ import annotations

import os
import shutil
import statistics
from pathlib import Path

import pytest

from acceptance.models import Engagement, Membership
from runners.models import Measurement
from tests.g3.test_run_g3 import g3_lab, g3_run, run_gate
from tests.reports.conftest import pdftotext
from tests.web.conftest import make_user

pytestmark = pytest.mark.slow

NBSP = "\u00a0"


def _arm_mean(run, metric: str, arm: str) -> float:
    values = Measurement.objects.filter(
        gate_run=run, metric=metric, derived=False, labels__phase="compare",
        labels__pass="measured", labels__arm=arm, node__name="lab-inference-1",
    ).values_list("value", flat=True)
    assert len(values) == 2  # two rounds
    return statistics.fmean(values)


def _judged(run, key: str) -> float:
    return run.decision.verdicts.get(criterion__key=key).measured_value


def _page(path: str, page: int) -> str:
    return " ".join(pdftotext(Path(path), page).replace(NBSP, " ").split())


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_page_one_of_a_g3_report_says_what_was_measured_against_what(transactional_db, client,
                                                                     language):
    engagement = g3_lab("kv-gain", nodes=1)
    Engagement.objects.filter(pk=engagement.pk).update(report_language=language)
    code, out, err = run_gate(engagement.name, "G3")
    assert code == 0, out + err
    run = g3_run(engagement)
    report = run.decision.report
    if os.environ.get("REPORTS_LOOK_DIR"):  # copy the PDF there to look at it
        shutil.copy(report.path, Path(os.environ["REPORTS_LOOK_DIR"]) / f"G3-{language}.pdf")
    page1 = _page(report.path, 1)
    whole = " ".join(pdftotext(Path(report.path)).split())

    array_ttft, local_ttft = (_arm_mean(run, "ttft_p50", arm) for arm in ("array", "local"))
    array_tok, local_tok = (_arm_mean(run, "output_throughput", arm)
                            for arm in ("array", "local"))
    reduction, gain = _judged(run, "ttft-reduction"), _judged(run, "throughput-gain")
    share = _judged(run, "readback-efficiency")
    if language == "en":
        assert (f"TTFT p50 {array_ttft:.1f} s with the array vs {local_ttft:.1f} s on local "
                f"NVMe (−{reduction * 100:.0f} %); required: at least −25 % (mean of 2 "
                f"rounds)") in page1
        assert (f"Output throughput {array_tok:.1f} tok/s with the array vs {local_tok:.1f} "
                f"tok/s on local NVMe (+{gain * 100:.0f} %); required: +29 % … +40 %") in page1
        assert (f"One node read {share * 12.5:.2f} GB/s from array") in page1
        assert f"line rate of 12.50 GB/s ({share * 100:.0f} %); required: at least 83 %" in page1
        assert "Reference figures are from the vendor's published test reports:" in page1
        assert "R2: FX100 KV Cache performance test report, 480B TP8" in page1
        assert "Simulated evidence: every figure above comes from lab stand-in tools" in page1
    else:
        # Chinese lines break between any two characters: compared without white space
        dense = "".join(page1.split())
        for sentence in (
                f"首字时延 (TTFT) p50：使用存储阵列 {array_ttft:.1f} s，本地 NVMe "
                f"{local_ttft:.1f} s（−{reduction * 100:.0f} %）；要求：至少 −25 %（2 轮的平均值）",
                f"输出吞吐量：使用存储阵列 {array_tok:.1f} tok/s，本地 NVMe {local_tok:.1f} "
                f"tok/s（+{gain * 100:.0f} %）；要求：+29 % … +40 %（2 轮的平均值）",
                "R2：FX100 KV Cache 性能测试报告，480B TP8，2026-07-05"):
            assert "".join(sentence.split()) in dense, sentence
    for internal in ("DOMAIN.md", "RUNBOOK", "METRICS.md"):
        assert internal not in whole
    assert "GB/ s" not in whole and "tok/ s" not in whole  # no unit broken mid-word

    # The engagement page says the same under G3's decision, in the page's language.
    client.force_login(make_user("pat-pm", Membership.Role.PROJECT_MANAGER))
    html = client.get(f"/engagements/{engagement.name}/",
                      HTTP_ACCEPT_LANGUAGE=language).content.decode()
    assert run.decision.verdicts.count() == 5
    if language == "en":
        assert (f"TTFT p50 {array_ttft:.1f}{NBSP}s with the array vs {local_ttft:.1f}{NBSP}s on "
                f"local NVMe") in html
    else:
        assert f"输出吞吐量：使用存储阵列 {array_tok:.1f}{NBSP}tok/s" in html
