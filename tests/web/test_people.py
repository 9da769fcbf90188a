"""The People page of an engagement: who may see and change it, role changes and removals
(audited, the last project manager kept), and ``manage.py member_add``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import ManagementUtility
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from acceptance.models import AuditEntry, Invitation, Membership
from acceptance.tokens import api_token_create
from tests.web.conftest import make_user

Role = Membership.Role


@pytest.fixture
def world(engagement_a, engagement_b, pm, engineer, customer_a, customer_b):
    invitation = Invitation.objects.create(
        engagement=engagement_a, email="new@acme.example", role=Role.CUSTOMER,
        token_sha256="0" * 64, invited_by="pat-pm",
        expires_at=engagement_a.created_at.replace(year=2100))
    return {"engagement": engagement_a, "invitation": invitation}


def urls(world, target) -> dict[str, tuple[str, str, dict]]:
    name = world["engagement"].name
    return {
        "people": ("get", reverse("people", args=[name]), {}),
        "people-invite": ("post", reverse("people-invite", args=[name]),
                          {"email": "z@acme.example", "role": "engineer"}),
        "people-role": ("post", reverse("people-role", args=[name, target.pk]),
                        {"role": "engineer"}),
        "people-remove": ("post", reverse("people-remove", args=[name, target.pk]), {}),
        "invitation-revoke": ("post", reverse("invitation-revoke",
                                              args=[name, world["invitation"].pk]), {}),
    }


def state() -> tuple:
    return (sorted(Membership.objects.values_list("user__username", "role", "organisation")),
            list(Invitation.objects.values_list("revoked_at", "used_at")),
            AuditEntry.objects.count(), User.objects.count())


def as_user(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def send(client, method, url, data):
    return client.post(url, data) if method == "post" else client.get(url)


NAMES = ["people", "people-invite", "people-role", "people-remove", "invitation-revoke"]


def test_every_people_url_is_in_this_matrix():
    from acceptance.people import urls as people_urls

    engagement_urls = {p.name for p in people_urls.urlpatterns
                       if str(p.pattern).startswith("engagements/")}
    assert engagement_urls == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_anonymous_visitors_are_sent_to_log_in(world, customer_a, name):
    method, url, data = urls(world, customer_a)[name]
    before = state()
    response = send(as_user(None), method, url, data)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert state() == before


@pytest.mark.parametrize("name", NAMES)
def test_a_customer_of_another_organisation_gets_404_and_no_names(world, customer_a,
                                                                  customer_b, name):
    method, url, data = urls(world, customer_a)[name]
    before = state()
    response = send(as_user(customer_b), method, url, data)
    assert response.status_code == 404
    body = response.content.decode()
    assert "acme-1" not in body and "carla-acme" not in body and "ACME" not in body
    assert state() == before


@pytest.mark.parametrize("name", NAMES)
def test_the_engagements_own_customer_is_refused_403(world, customer_a, engineer, name):
    method, url, data = urls(world, engineer)[name]
    before = state()
    response = send(as_user(customer_a), method, url, data)
    assert response.status_code == 403
    assert "Only the vendor&#x27;s project managers and engineers" in response.content.decode()
    assert state() == before


@pytest.mark.parametrize("name", NAMES[1:])
def test_an_engineer_reads_the_page_but_may_not_change_it(world, engineer, customer_a, name):
    method, url, data = urls(world, customer_a)[name]
    before = state()
    response = send(as_user(engineer), method, url, data)
    assert response.status_code == 403
    assert state() == before


def test_a_person_without_a_role_sees_nothing(world, nobody):
    assert as_user(nobody).get(reverse("people", args=["acme-1"])).status_code == 404


def test_the_page_lists_staff_and_this_organisations_customers_only(world, engineer):
    page = as_user(engineer).get(reverse("people", args=["acme-1"]))
    assert page.status_code == 200
    body = page.content.decode()
    for name in ("pat-pm", "erin-engineer", "carla-acme", "new@acme.example"):
        assert name in body
    assert "bob-globex" not in body and "Globex" not in body
    assert "Change the role" not in body and "Send the invitation" not in body  # read-only


def test_the_project_manager_gets_the_forms(world, pm):
    body = as_user(pm).get(reverse("people", args=["acme-1"])).content.decode()
    assert "Change the role" in body and "Send the invitation" in body and "Revoke" in body
    assert "customer of ACME (its engagements only)" in body


def test_a_role_change_is_audited_with_the_actor(world, pm, engineer):
    response = as_user(pm).post(reverse("people-role", args=["acme-1", engineer.pk]),
                                {"role": "project_manager"})
    assert response.status_code == 302
    assert Membership.objects.get(user=engineer).role == Role.PROJECT_MANAGER
    entry = AuditEntry.objects.get(action="role changed")
    assert entry.actor == "pat-pm"
    assert entry.reason == "erin-engineer: engineer → project manager"
    assert entry.details == {"user": "erin-engineer", "old_role": "engineer",
                             "new_role": "project_manager"}


def test_a_customer_role_is_given_only_to_a_person_of_the_organisation(world, pm, engineer,
                                                                      customer_a):
    client = as_user(pm)
    refused = client.post(reverse("people-role", args=["acme-1", engineer.pk]),
                          {"role": "customer"})
    assert refused.status_code == 400
    assert ("a customer role is given only to a person of ACME, and erin-engineer is not one"
            in refused.content.decode())
    assert Membership.objects.get(user=engineer).role == Role.ENGINEER
    # A customer of ACME made engineer keeps their organisation and may be made customer again.
    client.post(reverse("people-role", args=["acme-1", customer_a.pk]), {"role": "engineer"})
    assert client.post(reverse("people-role", args=["acme-1", customer_a.pk]),
                       {"role": "customer"}).status_code == 302
    assert Membership.objects.get(user=customer_a).organisation.name == "ACME"


def test_a_bad_or_unchanged_role_is_refused_naming_the_field(world, pm, engineer):
    client = as_user(pm)
    bad = client.post(reverse("people-role", args=["acme-1", engineer.pk]), {"role": "boss"})
    assert bad.status_code == 400
    assert "Role: Select a valid choice. boss is not one of the available choices." in (
        bad.content.decode())
    same = client.post(reverse("people-role", args=["acme-1", engineer.pk]),
                       {"role": "engineer"})
    assert same.status_code == 400 and "role: erin-engineer is engineer already" in (
        same.content.decode())
    assert not AuditEntry.objects.filter(action="role changed").exists()


def test_a_customer_of_another_organisation_cannot_be_changed_from_this_page(world, pm,
                                                                            customer_b):
    response = as_user(pm).post(reverse("people-role", args=["acme-1", customer_b.pk]),
                                {"role": "engineer"})
    assert response.status_code == 404
    assert Membership.objects.get(user=customer_b).role == Role.CUSTOMER


def test_removing_access_is_audited_and_the_customer_then_sees_nothing(world, pm,
                                                                       customer_a):
    response = as_user(pm).post(reverse("people-remove", args=["acme-1", customer_a.pk]))
    assert response.status_code == 302
    assert not Membership.objects.filter(user=customer_a).exists()
    assert User.objects.filter(pk=customer_a.pk).exists()  # the account and its history stay
    entry = AuditEntry.objects.get(action="access removed")
    assert entry.actor == "pat-pm"
    assert entry.details == {"user": "carla-acme", "role": "customer", "organisation": "ACME",
                             "api_tokens_revoked": 0}
    assert as_user(customer_a).get(reverse("engagement-detail",
                                           args=["acme-1"])).status_code == 404


def test_removing_access_revokes_the_persons_api_tokens_so_a_later_role_revives_none(
        world, pm, customer_a):
    _, raw = api_token_create(user=customer_a, name="ci")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert api.get("/api/engagements/").status_code == 200
    as_user(pm).post(reverse("people-remove", args=["acme-1", customer_a.pk]))
    assert AuditEntry.objects.get(action="access removed").details["api_tokens_revoked"] == 1
    Membership.objects.create(user=customer_a, role=Role.CUSTOMER,
                              organisation=world["engagement"].customer)
    refused = api.get("/api/engagements/")
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]


def test_the_last_project_manager_is_neither_demoted_nor_removed(world, pm):
    client = as_user(pm)
    demoted = client.post(reverse("people-role", args=["acme-1", pm.pk]), {"role": "engineer"})
    assert demoted.status_code == 400
    assert ("pat-pm is the last project manager: make someone else project manager first"
            in demoted.content.decode())
    removed = client.post(reverse("people-remove", args=["acme-1", pm.pk]))
    assert removed.status_code == 400
    assert Membership.objects.get(user=pm).role == Role.PROJECT_MANAGER
    assert not AuditEntry.objects.filter(action__in=["role changed", "access removed"]).exists()
    # With a second project manager, the first may step down.
    make_user("quinn-pm", Role.PROJECT_MANAGER)
    assert client.post(reverse("people-role", args=["acme-1", pm.pk]),
                       {"role": "engineer"}).status_code == 302
    assert Membership.objects.get(user=pm).role == Role.ENGINEER


def test_an_inactive_project_manager_does_not_count(world, pm):
    other = make_user("old-pm", Role.PROJECT_MANAGER)
    other.is_active = False
    other.save()
    response = as_user(pm).post(reverse("people-remove", args=["acme-1", pm.pk]))
    assert response.status_code == 400


# --- manage.py member_add ------------------------------------------------------------------

# The command closes the database connections when it ends (as from a shell), so its tests run
# outside a test transaction.
COMMITTED = pytest.mark.django_db(transaction=True)


def member_add(*argv, capsys) -> tuple[int, str, str]:
    try:
        ManagementUtility(["manage.py", "member_add", *argv]).execute()
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


@COMMITTED
def test_member_add_gives_an_existing_account_a_role(engagement_a, capsys):
    User.objects.create_user("ola", email="ola@acme.example")
    code, out, err = member_add("acme-1", "OLA@acme.example", "customer", "--actor", "ops",
                                capsys=capsys)
    assert (code, out, err) == (0, "ola is customer of ACME (acme-1)\n", "")
    membership = Membership.objects.get(user__username="ola")
    assert (membership.role, membership.organisation.name) == ("customer", "ACME")
    entry = AuditEntry.objects.get(action="member added")
    assert entry.actor == "ops" and entry.details["role"] == "customer"


@COMMITTED
def test_member_add_creates_an_account_when_asked(engagement_a, capsys):
    code, out, _err = member_add("acme-1", "pia@vendor.example", "engineer", "--create-user",
                                 capsys=capsys)
    assert code == 0
    assert out.startswith("pia@vendor.example is engineer (acme-1) (account created without a "
                          "password")
    assert len(out.splitlines()) == 1
    assert Membership.objects.get(user__email="pia@vendor.example").role == "engineer"


@COMMITTED
@pytest.mark.parametrize("argv,message", [
    (("nope", "a@acme.example", "engineer"), "engagement: no engagement named 'nope'"),
    (("acme-1", "a@acme.example", "boss"), "role: 'boss' is not a role; use one of "
                                           "project_manager, engineer, customer"),
    (("acme-1", "not-an-address", "engineer"), "email: 'not-an-address' is not an e-mail "
                                               "address"),
    (("acme-1", "a@acme.example", "engineer"), "email: no account has the address "
                                               "a@acme.example (--create-user makes one)"),
])
def test_member_add_refuses_bad_input_with_one_line_and_status_2(engagement_a, capsys, argv,
                                                                 message):
    code, out, err = member_add(*argv, capsys=capsys)
    assert code == 2
    assert err == f"CommandError: {message}\n" and out == ""
    assert not Membership.objects.exists() and not AuditEntry.objects.exists()
    assert not User.objects.exists()


@COMMITTED
def test_member_add_refuses_someone_who_has_a_role(engagement_a, customer_b, capsys):
    customer_b.email = "bob@globex.example"
    customer_b.save()
    code, _out, err = member_add("acme-1", "bob@globex.example", "customer", capsys=capsys)
    assert code == 2
    assert err == ("CommandError: email: bob-globex already has access as customer (Globex); "
                   "change their role on the People page\n")
    assert Membership.objects.get(user=customer_b).organisation.name == "Globex"


def test_the_engagement_page_links_to_people_for_staff_only(world, pm, engineer, customer_a):
    link = f'href="{reverse("people", args=["acme-1"])}"'
    for user, shown in ((pm, True), (engineer, True), (customer_a, False)):
        page = as_user(user).get(reverse("engagement-detail", args=["acme-1"])).content.decode()
        assert (link in page) is shown, user


def test_the_people_page_reads_in_chinese(world, pm):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(pm)
    page = client.get(reverse("people", args=["acme-1"])).content.decode()
    for chinese in ("<h1>人员</h1>", "待接受", "ACME 的客户（仅其验收项目）", "发送邀请",
                    "更改角色"):
        assert chinese in page, chinese
    for english in ("Change the role", "Send the invitation", ">pending<", "Invited by"):
        assert english not in page, english


# --- the same through the REST API, with tokens ---------------------------------------------

def api_as(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='t')[1]}")
    return client


def test_the_api_lists_invites_changes_and_removes_with_the_pages_rules(world, pm, engineer,
                                                                        customer_a,
                                                                        smtp_server):
    base = "/api/engagements/acme-1"
    listed = api_as(engineer).get(f"{base}/people/").json()
    assert sorted(m["username"] for m in listed["members"]) == [
        "carla-acme", "erin-engineer", "pat-pm"]
    assert listed["invitations"][0]["status"] == "pending"
    client = api_as(pm)
    made = client.post(f"{base}/people/", {"email": "rae@acme.example", "role": "customer"},
                       format="json")
    assert made.status_code == 201
    assert made.json()["invited"] is True and made.json()["invitation"]["status"] == "pending"
    assert "token" not in str(made.json()).lower()  # the link goes by mail only
    assert len(smtp_server.to("rae@acme.example")) == 1

    changed = client.post(f"{base}/people/{engineer.pk}/role/", {"role": "project_manager"},
                          format="json")
    assert changed.status_code == 200 and changed.json()["role"] == "project_manager"
    assert client.delete(f"{base}/people/{customer_a.pk}/").status_code == 204
    revoked = client.post(f"{base}/invitations/{world['invitation'].pk}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert list(AuditEntry.objects.filter(actor="pat-pm").values_list("action", flat=True)) == [
        "invitation sent", "role changed", "access removed", "invitation revoked"]


def test_the_api_refuses_as_the_page_does(world, pm, engineer, customer_a, customer_b):
    base = "/api/engagements/acme-1"
    before = state()
    assert api_as(customer_b).get(f"{base}/people/").status_code == 404
    assert api_as(customer_a).get(f"{base}/people/").status_code == 403
    assert api_as(engineer).post(f"{base}/people/", {"email": "x@acme.example",
                                                     "role": "engineer"}).status_code == 403
    client = api_as(pm)
    bad = client.post(f"{base}/people/", {"email": "nope", "role": "engineer"}, format="json")
    assert bad.status_code == 400 and "email" in bad.json()
    wrong = client.post(f"{base}/people/{engineer.pk}/role/", {"role": "customer"},
                        format="json")
    assert wrong.status_code == 400
    assert wrong.json()["role"][0].startswith("role: a customer role is given only to")
    last = client.delete(f"{base}/people/{pm.pk}/")
    assert last.status_code == 409 and "the last project manager" in last.json()["detail"]
    assert client.delete(f"{base}/people/{customer_b.pk}/").status_code == 404
    assert APIClient().get(f"{base}/people/").status_code == 401
    assert state() == before
