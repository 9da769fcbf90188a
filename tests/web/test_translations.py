"""Pages in Simplified Chinese show the service's refusals and the texts that arrive as data
(gate, criterion and lab scenario descriptions, the lab's bill of materials) in Chinese."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation
from django.utils.html import escape

from acceptance.data_texts import data_text
from gates.defaults import DEFAULT_GATES
from runners.lab.scenarios import SCENARIOS
from runners.lab.services import LAB_ACTOR, LAB_BOM
from runners.models import GateRun, NodeJob
from tests.web.conftest import G1_HEALTHY, decide

# English refusals of gates.services / runners.services, as they read in English.
ENGLISH_REFUSALS = ("is stopped", "No gate runs", "gates run in order", "has not passed",
                    "already in progress", "re-running one node needs a reason",
                    "has no node of role", "Not started, nothing was created")


def zh_client(user) -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(user)
    return client


def test_every_default_text_that_pages_show_has_a_chinese_translation():
    texts = [g["description"] for g in DEFAULT_GATES]
    texts += [c["description"] for g in DEFAULT_GATES for c in g["criteria"]]
    texts += [s["description"] for s in SCENARIOS.values() if s.get("description")]
    texts += [d for d, _quantity in LAB_BOM] + [LAB_ACTOR]
    with translation.override("zh-hans"):
        untranslated = [t for t in texts if data_text(t) == t]
    assert untranslated == [], (
        "add these to acceptance/data_texts.py, then makemessages and translate them")
    with translation.override("zh-hans"):
        assert data_text("All drives of each array recognised") == "每台阵列的全部硬盘均被识别"
        assert data_text("a customer's own wording") == "a customer's own wording"
        assert data_text("") == ""


def test_a_stopped_engagements_refusal_reads_in_chinese_on_the_launch_page(stopped_a,
                                                                          engineer):
    engagement, _decision, _report = stopped_a
    page = zh_client(engineer).get(
        reverse("gate-run-start", args=[engagement.name, "G2"])).content.decode()
    assert "验收项目 acme-1 已停止" in page
    assert "任何验收关口（包括已停止的那个）都不能运行" in page
    for english in ENGLISH_REFUSALS:
        assert english not in page, english
    # The gate's and its criteria's descriptions, which come from data, too.
    assert "单节点 8 加速卡推理基线" in page
    assert "顺序读达到阵列端口线速的 83 %" in page
    assert "Sequential read reaches" not in page


def test_a_refused_node_re_run_reads_in_chinese(engagement_a, engineer):
    from acceptance.models import Credential, Node
    from runners.lab import server

    credential = Credential.from_secret("acme-1-gpu-01", server.keypair()[0])
    credential.save()
    node = Node.objects.create(
        engagement=engagement_a, name="gpu-01", role=Node.Role.INFERENCE, address="127.0.0.1",
        port=server.free_port(), ssh_user="acctest", host_key=server.keypair()[1],
        credential=credential, interface="ens1f0", fio_target="/dev/nvme1n1")
    run = GateRun.objects.create(gate=engagement_a.gates.get(code="G2"), attempt=1,
                                 started_by="erin-engineer", state="failed")
    NodeJob.objects.create(gate_run=run, node=node, state="failed", error_kind="unreachable")
    client = zh_client(engineer)
    url = reverse("run-rerun", args=[run.id])
    no_reason = client.post(url, {"node": "gpu-01"}).content.decode()
    assert "请填写原因：它会记入审计记录。" in no_reason
    refused = client.post(url, {"node": "gpu-01", "reason": "节点已恢复"}).content.decode()
    assert "未启动，未创建任何内容" in refused
    assert "验收关口须按顺序运行，而 G1（到货验收）尚未通过（其状态：待进行）" in refused
    for english in ENGLISH_REFUSALS:
        assert english not in refused, english
    assert GateRun.objects.count() == 1
    run_page = client.get(reverse("run-detail", args=[run.id])).content.decode()
    assert "推理节点" in run_page and "inference node" not in run_page


def test_the_engagement_page_shows_criteria_and_the_lab_bom_in_chinese(engagement_a, pm):
    engagement_a.bom_items.create(position=1, description=LAB_BOM[0][0], quantity=1)
    decide(engagement_a.gates.get(code="G1"), G1_HEALTHY, "passed")
    page = zh_client(pm).get(reverse("engagement-detail", args=["acme-1"])).content.decode()
    assert "每台阵列的全部硬盘均被识别" in page
    assert "FX100 全闪存 NVMe-oF 阵列" in page
    assert "All drives of each array recognised" not in page
    assert "Every BOM item delivered and checked" not in page
    assert "通过 SSH 采集" in page and "collected over SSH" not in page  # the evidence origin


@pytest.mark.parametrize("lang, expected", [("zh-hans", "有一块硬盘未被识别"),
                                            ("en", "One drive is not recognised")])
def test_the_lab_page_describes_scenarios_in_the_pages_language(engineer, lang, expected):
    client = Client(HTTP_ACCEPT_LANGUAGE=lang)
    client.force_login(engineer)
    assert expected in client.get(reverse("lab")).content.decode()


def test_stored_decision_sentences_and_stop_reasons_read_in_the_pages_language(stopped_a, pm):
    from acceptance.data_texts import decision_sentence_text, stopped_reason_text

    engagement, decision, _report = stopped_a
    stored_reason, stored_sentence = engagement.stopped_reason, decision.sentence
    assert stored_sentence.startswith("G1 arrival acceptance stopped: drive_count >= 24")
    # English pages show them exactly as stored.
    assert stopped_reason_text(stored_reason) == stored_reason
    assert decision_sentence_text(stored_sentence) == stored_sentence
    with translation.override("zh-hans"):
        reason = stopped_reason_text(stored_reason)
        sentence = decision_sentence_text(stored_sentence)
        assert reason.startswith("G1 停止于 ") and "drive_count >= 24，实测 23" in reason
        assert sentence.startswith("G1 到货验收停止：drive_count >= 24，实测 23")
        assert "The engagement stops here" not in sentence
        assert stopped_reason_text("stopped by hand: see the call") == (
            "stopped by hand: see the call")  # not the service's shape: as stored
    page = zh_client(pm).get(reverse("engagement-detail", args=["acme-1"])).content.decode()
    dashboard = zh_client(pm).get(reverse("dashboard")).content.decode()
    for html in (page, dashboard):
        assert escape(reason) in html
        assert "measured 23" not in html and "The engagement stops here" not in html
    assert escape(sentence) in page


def test_stored_explanations_and_sources_read_in_the_pages_language(stopped_a, pm):
    from acceptance.data_texts import explanation_text

    for stored in ("measured on lab-array-controller: 23; required >= 24",
                   "sum of 23: 0; required <= 0",
                   "measured (concurrency 16): 17.5 s; required 17.31 s ± 10 %; deviation +1.1 %",
                   "mean of 2: 0.3; required >= 0.25; 95 % CI 0.2 … 0.4 over 2 rounds"):
        assert explanation_text(stored) == stored  # English: exactly as stored
    with translation.override("zh-hans"):
        assert explanation_text("measured on lab-array-controller: 23; required >= 24") == (
            "实测（lab-array-controller）：23；要求 >= 24")
        assert explanation_text("sum of 23: 0; required <= 0") == "23 个之和：0；要求 <= 0"
        assert explanation_text(
            "measured (concurrency 16): 17.5 s; required 17.31 s ± 10 %; deviation +1.1 %") == (
            "实测 (concurrency 16)：17.5 s；要求 17.31 s ± 10 %；偏差 +1.1 %")
        odd = "mean of 2: 0.3; required >= 0.25; 95 % CI 0.2 … 0.4 over 2 rounds"
        assert explanation_text(odd) == odd  # a shape it does not know: as stored
    page = zh_client(pm).get(reverse("engagement-detail", args=["acme-1"])).content.decode()
    assert "G1 闸门条款：每台阵列的全部 24 块硬盘" in page
    assert "DOMAIN.md" not in page  # no internal names
    assert "验收服务（自动评估）" in page
    assert "required &gt;=" not in page and "acceptance service (automatic" not in page
