"""Notices reach people by e-mail (a real SMTP server) and the engagement's webhook (a real
HTTP receiver), signed; a failing receiver is retried with back-off and recorded, and the
decision stands whatever happens to the notice."""

from __future__ import annotations

import hashlib
import hmac
import logging

from acceptance.models import Engagement
from gates.models import Decision, Gate
from notifications import services
from notifications.kinds import KINDS
from notifications.models import Delivery, Webhook
from notifications.queries import notification_failures_count
from tests.notifications.conftest import WEBHOOK_SECRET, body_of, stop_g1


def _hook(engagement, receiver, kinds=None):
    return services.webhook_save(engagement=engagement, url=receiver.url, secret=WEBHOOK_SECRET,
                                 kinds=list(kinds or KINDS), actor="pat-pm")


def test_it_mails_a_stopped_gate_through_a_real_smtp_server(
        smtp_server, acme, pm, engineer, customer, other_customer,
        django_capture_on_commit_callbacks):
    stop_g1(acme, django_capture_on_commit_callbacks)

    by_address = {m["to"][0]: m["message"] for m in smtp_server}
    assert sorted(by_address) == ["carla-acme@example.com", "erin-engineer@example.com",
                                  "pat-pm@example.com"]  # not Globex's customer
    mail = by_address["pat-pm@example.com"]
    assert mail["Subject"] == "[acme-prod] G1 stopped: Arrival acceptance"
    assert mail["From"] == "acceptance@vendor.example"
    text = mail.get_payload(decode=True).decode()
    assert "G1 arrival acceptance stopped: drive_count >= 24 measured 23." in text
    assert "https://acceptance.vendor.example/runs/" in text
    rows = Delivery.objects.filter(channel="email")
    assert {(d.event, d.status, d.attempts) for d in rows} == {("gate_decided", "sent", 1)}


def test_it_posts_a_webhook_signed_with_hmac_sha256_and_a_delivery_id(
        webhook_receiver, acme, django_capture_on_commit_callbacks):
    _hook(acme, webhook_receiver)
    decision = stop_g1(acme, django_capture_on_commit_callbacks)

    [post] = webhook_receiver.posts
    expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), post["body"],
                                    hashlib.sha256).hexdigest()
    assert post["headers"]["X-Acceptance-Signature"] == expected
    assert post["headers"]["Content-Type"] == "application/json"
    body = body_of(post)
    delivery = Delivery.objects.get(channel="webhook")
    assert post["headers"]["X-Acceptance-Delivery"] == str(delivery.uuid) == body["delivery"]
    assert body["event"] == "gate_decided"
    assert body["engagement"] == "acme-prod"
    assert body["data"]["gate"] == "G1"
    assert body["data"]["outcome"] == "stopped"
    assert body["data"]["decision"] == decision.id
    assert (delivery.status, delivery.status_code, delivery.attempts) == ("sent", 200, 1)
    assert delivery.recipient == webhook_receiver.url


def test_a_receiver_answering_500_is_retried_recorded_and_the_decision_stands(
        webhook_receiver, acme, django_capture_on_commit_callbacks, caplog, settings):
    webhook_receiver.status = 500
    _hook(acme, webhook_receiver)
    with caplog.at_level(logging.DEBUG):
        decision = stop_g1(acme, django_capture_on_commit_callbacks)

    assert len(webhook_receiver.posts) == settings.NOTIFY_MAX_ATTEMPTS == 5
    ids = {p["headers"]["X-Acceptance-Delivery"] for p in webhook_receiver.posts}
    bodies = {p["body"] for p in webhook_receiver.posts}
    assert len(ids) == 1 and len(bodies) == 1  # the same delivery, retried as it was
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("failed", 5, 500)
    assert delivery.error == "the receiver answered HTTP 500"
    assert notification_failures_count() == 1
    # the decision is as recorded: nothing about the notice touched it
    assert Decision.objects.get(pk=decision.pk).outcome == "stopped"
    assert Gate.objects.get(pk=decision.gate_id).state == "stopped"
    assert Engagement.objects.get(pk=acme.pk).state == "stopped"
    assert WEBHOOK_SECRET not in caplog.text


def test_a_receiver_that_recovers_gets_the_delivery_on_a_later_attempt(
        webhook_receiver, acme, django_capture_on_commit_callbacks):
    webhook_receiver.answers, webhook_receiver.status = [503, 500], 204
    _hook(acme, webhook_receiver, kinds=["gate_decided"])
    stop_g1(acme, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts, delivery.status_code, delivery.error) == (
        "sent", 3, 204, "")


def test_an_unreachable_receiver_is_recorded_with_the_connection_error(
        acme, django_capture_on_commit_callbacks, settings):
    settings.NOTIFY_MAX_ATTEMPTS = 2
    services.webhook_save(engagement=acme, url="http://127.0.0.1:9/hook", secret=WEBHOOK_SECRET,
                          kinds=["gate_decided"], actor="pat-pm")
    stop_g1(acme, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts, delivery.status_code) == ("failed", 2, None)
    assert delivery.error.startswith("ConnectionError: ")


def test_the_webhook_takes_only_the_kinds_chosen(
        webhook_receiver, acme, django_capture_on_commit_callbacks):
    _hook(acme, webhook_receiver, kinds=["run_failed"])
    stop_g1(acme, django_capture_on_commit_callbacks)
    assert webhook_receiver.posts == []


def test_the_webhook_secret_is_stored_encrypted(acme, webhook_receiver):
    hook = _hook(acme, webhook_receiver)
    stored = bytes(Webhook.objects.get(pk=hook.pk).secret_encrypted)
    assert WEBHOOK_SECRET.encode() not in stored
    assert WEBHOOK_SECRET not in repr(hook) and WEBHOOK_SECRET not in str(hook)
    assert Webhook.objects.get(pk=hook.pk).secret() == WEBHOOK_SECRET


def test_saving_the_webhook_without_a_secret_keeps_the_stored_one(acme, webhook_receiver):
    _hook(acme, webhook_receiver)
    services.webhook_save(engagement=acme, url=webhook_receiver.url + "2", secret="",
                          kinds=["gate_decided"], actor="pat-pm")
    hook = Webhook.objects.get(engagement=acme)
    assert (hook.url, hook.kinds, hook.secret()) == (
        webhook_receiver.url + "2", ["gate_decided"], WEBHOOK_SECRET)


def test_a_new_webhook_without_a_secret_is_refused_naming_the_field(acme):
    try:
        services.webhook_save(engagement=acme, url="https://hooks.example/x", secret="",
                              kinds=[], actor="pat-pm")
    except services.SettingsRefused as error:
        assert str(error).startswith("secret: ")
    else:
        raise AssertionError("accepted")
    assert not Webhook.objects.exists()
