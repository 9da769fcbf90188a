"""Invitations by e-mail, end to end: the project manager invites from the People page, the mail
arrives at a real SMTP server on 127.0.0.1, and its link is used with a fresh browser (Django's
test client). Expired, used and revoked links answer 410 and create nothing. Password reset by
e-mail through the same server."""

from __future__ import annotations

import hashlib
import io
import os
import re
import socket
import subprocess
import sys
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from acceptance.models import AuditEntry, Invitation, Membership
from tests.web.conftest import PASSWORD, Mailbox, make_user

NEW_PASSWORD = "quartz lantern 42 meadow"
LINK = re.compile(r"https?://testserver(/\S+)")


def pm_client(pm) -> Client:
    client = Client()
    client.force_login(pm)
    return client


def invite(client, engagement, email: str, role: str):
    return client.post(reverse("people-invite", args=[engagement.name]),
                       {"email": email, "role": role})


def link_in(mailbox: Mailbox, address: str) -> str:
    (message,) = mailbox.to(address)
    (path,) = LINK.findall(Mailbox.body(message))
    return path


def test_an_invited_customer_sets_a_password_from_the_mailed_link_and_is_logged_in(
        engagement_a, pm, smtp_server):
    response = invite(pm_client(pm), engagement_a, "Dana@Acme.example", "customer")
    assert response.status_code == 302

    (message,) = smtp_server.to("dana@acme.example")
    assert message["Subject"] == "Invitation to the acceptance service (acme-1)"
    body = Mailbox.body(message)
    assert "pat-pm invites you to the acceptance service as customer of ACME" in body
    path = link_in(smtp_server, "dana@acme.example")
    token = path.rstrip("/").rsplit("/", 1)[1]
    invitation = Invitation.objects.get()
    assert invitation.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(list(Invitation.objects.values_list()))  # only the hash is kept
    expected_expiry = timezone.now() + timedelta(days=7)
    assert abs((invitation.expires_at - expected_expiry).total_seconds()) < 60

    browser = Client()
    opened = browser.get(path)
    assert opened.status_code == 302 and opened["Location"] == reverse("invitation-accept")
    assert token not in str(dict(browser.session))  # the session keeps only the hash
    page = browser.get(opened["Location"])
    assert page.status_code == 200
    assert "Your user name is dana@acme.example" in page.content.decode()

    weak = browser.post(reverse("invitation-accept"),
                        {"new_password1": "12345678", "new_password2": "12345678"})
    assert weak.status_code == 400
    assert "This password is too short. It must contain at least 10 characters." in (
        weak.content.decode())
    assert not User.objects.filter(username="dana@acme.example").exists()

    done = browser.post(reverse("invitation-accept"),
                        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302
    assert done["Location"] == reverse("engagement-detail", args=["acme-1"])
    user = User.objects.get(username="dana@acme.example")
    assert user.email == "dana@acme.example" and user.check_password(NEW_PASSWORD)
    assert (user.membership.role, user.membership.organisation.name) == ("customer", "ACME")
    assert browser.get(done["Location"]).status_code == 200  # logged in, sees ACME's engagement
    invitation.refresh_from_db()
    assert invitation.used_by == user and invitation.used_at is not None
    actions = list(AuditEntry.objects.filter(engagement=engagement_a)
                   .values_list("actor", "action"))
    assert actions == [("pat-pm", "invitation sent"),
                       ("dana@acme.example", "invitation accepted")]
    assert Client().login(username="dana@acme.example", password=NEW_PASSWORD)


def test_a_used_link_answers_410_and_creates_nothing(engagement_a, pm, smtp_server):
    invite(pm_client(pm), engagement_a, "eli@vendor.example", "engineer")
    path = link_in(smtp_server, "eli@vendor.example")
    first, second_tab = Client(), Client()
    first.get(path)
    second_tab.get(path)
    first.post(reverse("invitation-accept"),
               {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert Membership.objects.get(user__username="eli@vendor.example").role == "engineer"

    again = Client().get(path)
    assert again.status_code == 410
    assert "This invitation has been used already" in again.content.decode()
    assert User.objects.filter(username="eli@vendor.example").count() == 1
    # A second browser that opened the link before it was used cannot use it either.
    late = second_tab.post(reverse("invitation-accept"),
                           {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert late.status_code == 410
    assert AuditEntry.objects.filter(action="invitation accepted").count() == 1


def test_an_expired_link_is_refused_even_when_it_was_opened_in_time(engagement_a, pm,
                                                                      smtp_server):
    invite(pm_client(pm), engagement_a, "fay@acme.example", "customer")
    path = link_in(smtp_server, "fay@acme.example")
    browser = Client()
    assert browser.get(path).status_code == 302  # opened while still good
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    late = browser.post(reverse("invitation-accept"),
                        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert late.status_code == 410
    assert "This invitation has expired. Ask the project manager for a new one." in (
        late.content.decode())
    reopened = Client().get(path)
    assert reopened.status_code == 410
    assert not User.objects.filter(username="fay@acme.example").exists()
    assert not Membership.objects.filter(organisation__name="ACME").exists()


def test_a_revoked_invitation_is_audited_and_its_link_refused(engagement_a, pm, smtp_server):
    client = pm_client(pm)
    invite(client, engagement_a, "gus@acme.example", "customer")
    path = link_in(smtp_server, "gus@acme.example")
    invitation = Invitation.objects.get()
    response = client.post(reverse("invitation-revoke", args=["acme-1", invitation.pk]))
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_by == "pat-pm" and invitation.revoked_at is not None
    entry = AuditEntry.objects.get(action="invitation revoked")
    assert (entry.actor, entry.details["email"]) == ("pat-pm", "gus@acme.example")

    refused = Client().get(path)
    assert refused.status_code == 410
    assert "This invitation was withdrawn." in refused.content.decode()
    assert not User.objects.filter(username="gus@acme.example").exists()
    twice = client.post(reverse("invitation-revoke", args=["acme-1", invitation.pk]))
    assert twice.status_code == 400
    assert "is revoked: there is nothing to revoke" in twice.content.decode()
    # Revoked, the address may be invited again.
    assert invite(client, engagement_a, "gus@acme.example", "customer").status_code == 302


def test_a_link_that_is_no_invitation_answers_404(db):
    response = Client().get(reverse("invitation-open", args=["not-a-token"]))
    assert response.status_code == 404
    assert "is not an invitation of this service" in response.content.decode()
    assert Client().get(reverse("invitation-accept")).status_code == 400


def test_an_existing_account_without_a_role_gets_access_at_once_and_a_notice(
        engagement_a, pm, smtp_server):
    user = User.objects.create_user("hal", email="hal@acme.example", password=PASSWORD)
    response = invite(pm_client(pm), engagement_a, "hal@acme.example", "customer")
    assert response.status_code == 302
    assert not Invitation.objects.exists()
    assert (user.membership.role, user.membership.organisation.name) == ("customer", "ACME")
    (message,) = smtp_server.to("hal@acme.example")
    assert message["Subject"] == "You have access to acme-1 in the acceptance service"
    assert "http://testserver/engagements/acme-1/" in Mailbox.body(message)
    entry = AuditEntry.objects.get(action="member added")
    assert entry.actor == "pat-pm" and entry.details["user"] == "hal"


@pytest.mark.parametrize("email,role,message", [
    ("not an address", "engineer", "E-mail address: Enter a valid email address."),
    ("ivy@acme.example", "admin", "Role: Select a valid choice."),
    ("", "engineer", "E-mail address: This field is required."),
])
def test_bad_input_is_refused_naming_the_field(engagement_a, pm, smtp_server, email, role,
                                               message):
    response = invite(pm_client(pm), engagement_a, email, role)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Invitation.objects.exists() and smtp_server.messages == []


def test_someone_who_has_a_role_or_a_pending_invitation_is_not_invited_again(
        engagement_a, pm, customer_b, smtp_server):
    client = pm_client(pm)
    customer_b.email = "bob@globex.example"
    customer_b.save()
    taken = invite(client, engagement_a, "bob@globex.example", "customer")
    assert taken.status_code == 400
    assert "bob-globex already has access as customer (Globex)" in taken.content.decode()
    assert customer_b.membership.organisation.name == "Globex"

    assert invite(client, engagement_a, "jo@acme.example", "customer").status_code == 302
    again = invite(client, engagement_a, "jo@acme.example", "engineer")
    assert again.status_code == 400
    assert "an invitation to jo@acme.example is pending (from acme-1" in again.content.decode()
    assert Invitation.objects.count() == 1 and len(smtp_server.messages) == 1


def test_a_mail_that_cannot_be_sent_creates_nothing(engagement_a, pm, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = (
        "127.0.0.1", closed_port(), 5)
    response = invite(pm_client(pm), engagement_a, "kim@acme.example", "customer")
    assert response.status_code == 400
    assert "the mail to kim@acme.example could not be sent" in response.content.decode()
    assert not Invitation.objects.exists()
    assert not AuditEntry.objects.filter(engagement=engagement_a).exists()


def closed_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _reset(address: str, mailbox: Mailbox) -> Client:
    browser = Client()
    sent = browser.post(reverse("password_reset"), {"email": address})
    assert sent.status_code == 302 and sent["Location"] == reverse("password_reset_done")
    (message,) = mailbox.to(address)
    assert message["Subject"] == "Password reset for the acceptance service"
    (path,) = LINK.findall(Mailbox.body(message))
    form = browser.get(path)
    assert form.status_code == 302  # Django moves the token out of the URL
    set_url = urlsplit(form["Location"]).path
    weak = browser.post(set_url, {"new_password1": "password", "new_password2": "password"})
    assert weak.status_code == 200 and "This password is too common." in weak.content.decode()
    done = browser.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    assert browser.get(path).status_code == 200  # used: the page says the link cannot be used
    assert "This link cannot be used" in browser.get(path, follow=True).content.decode()
    return browser


def test_a_password_is_reset_by_a_mailed_link(engagement_a, smtp_server):
    user = make_user("lee-pm", Membership.Role.PROJECT_MANAGER)
    user.email = "lee@vendor.example"
    user.save()
    _reset("lee@vendor.example", smtp_server)
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD) and not user.check_password(PASSWORD)
    assert Client().login(username="lee-pm", password=NEW_PASSWORD)


def test_an_unknown_address_gets_the_same_answer_and_no_mail(db, smtp_server):
    sent = Client().post(reverse("password_reset"), {"email": "nobody@nowhere.example"})
    assert sent.status_code == 302 and sent["Location"] == reverse("password_reset_done")
    assert smtp_server.messages == []


def test_an_account_made_by_member_add_sets_its_first_password_by_reset(engagement_a,
                                                                        smtp_server):
    call_command("member_add", "acme-1", "max@acme.example", "customer", "--create-user",
                 stdout=io.StringIO())
    user = User.objects.get(username="max@acme.example")
    assert not user.has_usable_password()
    _reset("max@acme.example", smtp_server)
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)


def test_the_login_page_offers_the_reset(db):
    page = Client().get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in page


def test_the_mail_is_in_the_engagements_report_language(engagement_a, pm, smtp_server):
    engagement_a.report_language = "zh-hans"
    engagement_a.save(update_fields=["report_language"])
    invite(pm_client(pm), engagement_a, "lu@acme.example", "customer")
    (message,) = smtp_server.to("lu@acme.example")
    assert message["Subject"] == "验收服务邀请（acme-1）"
    body = Mailbox.body(message)
    assert "pat-pm 邀请您以ACME 的客户身份使用验收服务，参与验收项目 acme-1（ACME）。" in body


@pytest.mark.parametrize("env,backend", [
    ({}, "django.core.mail.backends.console.EmailBackend"),
    ({"EMAIL_HOST": "smtp.example", "EMAIL_PORT": "587", "EMAIL_USE_TLS": "true"},
     "django.core.mail.backends.smtp.EmailBackend"),
])
def test_mail_is_printed_by_default_and_sent_by_smtp_once_a_host_is_set(tmp_path, env,
                                                                        backend):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EMAIL_", "DJANGO_"))}
    clean.update(env, ACCEPTANCE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE=(
        "acceptance.settings"))
    shown = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings as s; "
         "print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS)"],
        env=clean, capture_output=True, text=True, check=True).stdout.split()
    assert shown[0] == backend
    if env:
        assert shown[1:] == ["smtp.example", "587", "True"]
