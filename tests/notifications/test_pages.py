"""The notification pages and who may use them: project managers set who gets what and the
webhook and see the deliveries; everyone with a role mutes for themselves and manages their
calendar URL; a customer of another organisation gets 404, staff without the role 403."""

from __future__ import annotations

import pytest

from notifications.models import Delivery, Mute, Subscription, Webhook
from tests.notifications.conftest import WEBHOOK_SECRET
from tests.web.conftest import PASSWORD, make_user


def _as(client, user):
    assert client.login(username=user.username, password=PASSWORD)
    return client


SETTINGS = "/engagements/acme-prod/notifications/"
DELIVERIES = "/engagements/acme-prod/notifications/deliveries/"


@pytest.mark.parametrize("url", [SETTINGS, DELIVERIES])
def test_it_handles_each_persona_on_the_project_manager_pages(
        client, url, acme, pm, engineer, customer, other_customer):
    assert client.get(url).status_code == 302  # to the login page
    assert _as(client, pm).get(url).status_code == 200
    assert _as(client, engineer).get(url).status_code == 403
    assert _as(client, customer).get(url).status_code == 403
    assert _as(client, other_customer).get(url).status_code == 404


def test_the_project_manager_saves_a_webhook_whose_secret_is_never_shown(client, acme, pm):
    _as(client, pm)
    response = client.post(SETTINGS, {"form": "webhook", "url": "https://hooks.acme.example/a",
                                      "secret": WEBHOOK_SECRET,
                                      "kinds": ["gate_decided", "run_failed"]})
    assert response.status_code == 302
    hook = Webhook.objects.get(engagement=acme)
    assert (hook.url, hook.kinds, hook.updated_by) == (
        "https://hooks.acme.example/a", ["gate_decided", "run_failed"], "pat-pm")
    page = client.get(SETTINGS).content.decode()
    assert "a secret is set (not shown again)" in page
    assert WEBHOOK_SECRET not in page


def test_a_bad_webhook_url_is_refused_naming_the_field(client, acme, pm):
    _as(client, pm)
    response = client.post(SETTINGS, {"form": "webhook", "url": "ftp://x", "secret":
                                      WEBHOOK_SECRET, "kinds": ["gate_decided"]})
    assert response.status_code == 400
    assert "Enter a valid URL." in response.content.decode()
    response = client.post(SETTINGS, {"form": "webhook", "url": "https://hooks.acme.example/a",
                                      "secret": "short", "kinds": []})
    assert response.status_code == 400
    assert "at least 16 characters" in response.content.decode()
    assert not Webhook.objects.exists()


def test_the_project_manager_sets_who_gets_what(client, acme, pm):
    _as(client, pm)
    response = client.post(SETTINGS, {"form": "subscriptions",
                                      "gate_decided__project_manager": "on",
                                      "run_failed__customer": "on"})
    assert response.status_code == 302
    rows = {(s.kind, s.role): s.email for s in Subscription.objects.filter(engagement=acme)}
    assert rows[("gate_decided", "engineer")] is False
    assert rows[("gate_decided", "customer")] is False
    assert rows[("run_failed", "customer")] is True
    assert ("gate_decided", "project_manager") not in rows  # the default: no row


def test_an_engineer_cannot_change_who_gets_what(client, acme, engineer):
    response = _as(client, engineer).post(SETTINGS, {"form": "subscriptions"})
    assert response.status_code == 403
    assert not Subscription.objects.exists()


def test_the_deliveries_page_lists_each_delivery_and_its_answer(client, acme, pm):
    Delivery.objects.create(engagement=acme, event="gate_decided", channel="webhook",
                            recipient="https://hooks.acme.example/a", subject="s", body="{}",
                            status="failed", attempts=5, status_code=500,
                            error="the receiver answered HTTP 500")
    page = _as(client, pm).get(DELIVERIES).content.decode()
    assert "https://hooks.acme.example/a" in page
    assert "HTTP 500 the receiver answered HTTP 500" in page


def test_a_person_mutes_an_engagement_for_themselves(client, acme, customer, other_customer):
    url = "/engagements/acme-prod/notifications/mute/"
    response = _as(client, customer).post(url, {"kind": "", "muted": "on"})
    assert response.status_code == 302
    assert list(Mute.objects.values_list("user__username", "kind")) == [("carla-acme", "")]
    assert "everything" in client.get("/notifications/").content.decode()
    client.post(url, {"kind": ""})
    assert not Mute.objects.exists()
    assert client.post(url, {"kind": "no-such-kind", "muted": "on"}).status_code == 400
    assert _as(client, other_customer).post(url, {"kind": "", "muted": "on"}).status_code == 404


def test_a_person_makes_and_revokes_their_calendar_url(client, acme, customer):
    _as(client, customer)
    page = client.post("/notifications/calendar/", {"action": "renew"}).content.decode()
    url = page.split('<code id="calendar-url">')[1].split("</code>")[0]
    path = url.removeprefix("http://testserver")
    assert client.get(path).status_code == 200
    assert "globex-prod" not in page
    client.post("/notifications/calendar/", {"action": "revoke"})
    assert client.get(path).status_code == 404
    assert client.post("/notifications/calendar/", {"action": "x"}).status_code == 400


def test_someone_without_a_role_has_no_notification_pages(client, acme):
    user = make_user("nora-norole", None)
    _as(client, user)
    assert client.get("/notifications/").status_code == 403
    assert client.post("/notifications/calendar/", {"action": "renew"}).status_code == 403
    assert client.post("/engagements/acme-prod/notifications/mute/",
                       {"kind": ""}).status_code == 404


def test_a_project_manager_finds_the_settings_from_their_notifications_page(client, acme, pm,
                                                                             customer):
    page = _as(client, pm).get("/notifications/").content.decode()
    assert 'href="/engagements/acme-prod/notifications/"' in page
    assert 'href="/notifications/"' in page  # the navigation
    page = _as(client, customer).get("/notifications/").content.decode()
    assert 'href="/engagements/acme-prod/notifications/"' not in page


def test_the_project_manager_removes_the_webhook_and_both_are_audited(client, acme, pm):
    _as(client, pm)
    client.post(SETTINGS, {"form": "webhook", "url": "https://hooks.acme.example/a/t0ken",
                           "secret": WEBHOOK_SECRET, "kinds": ["gate_decided"]})
    assert client.post(SETTINGS, {"form": "webhook_remove"}).status_code == 302
    assert not Webhook.objects.exists()
    audit = list(acme.audit.values_list("action", "actor", "details"))
    assert audit == [
        ("webhook_set", "pat-pm", {"host": "hooks.acme.example", "kinds": ["gate_decided"],
                                   "secret_changed": True}),
        ("webhook_remove", "pat-pm", {})]
    assert client.post(SETTINGS, {"form": "other"}).status_code == 400
