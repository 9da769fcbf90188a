"""Notices speak the engagement's report language: a Chinese engagement's mail has a Chinese
subject, while its webhook keeps English words and stable keys for the machines reading it;
the "who gets what" page follows the reader's language."""

from __future__ import annotations

from email.header import decode_header, make_header

from django.test import Client

from acceptance.models import Engagement
from notifications import services
from notifications.kinds import KINDS
from tests.notifications.conftest import WEBHOOK_SECRET, body_of, stop_g1


def test_a_stopped_gate_is_mailed_in_the_engagements_chinese_and_hooked_in_english(
        smtp_server, webhook_receiver, acme, pm, django_capture_on_commit_callbacks):
    Engagement.objects.filter(pk=acme.pk).update(report_language="zh-hans")
    services.webhook_save(engagement=acme, url=webhook_receiver.url, secret=WEBHOOK_SECRET,
                          kinds=list(KINDS), actor="pat-pm")
    stop_g1(Engagement.objects.get(pk=acme.pk), django_capture_on_commit_callbacks)

    mail = {m["to"][0]: m["message"] for m in smtp_server}["pat-pm@example.com"]
    assert str(make_header(decode_header(mail["Subject"]))) == \
        "[acme-prod] 验收关口 G1 已停止：Arrival acceptance"
    [post] = webhook_receiver.posts
    body = body_of(post)
    assert body["subject"] == "[acme-prod] G1 stopped: Arrival acceptance"
    assert (body["event"], body["data"]["outcome"]) == ("gate_decided", "stopped")


def test_the_who_gets_what_page_speaks_the_readers_chinese(acme, pm):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(pm)
    page = client.get("/engagements/acme-prod/notifications/").content.decode()
    assert "谁收到哪些通知（电子邮件）" in page
    assert "验收关口已判定（通过、停止、待复核）" in page  # a kind's words
    assert "<th>项目经理</th>" in page
    assert "Who gets what" not in page
