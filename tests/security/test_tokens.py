"""API tokens are stored as their sha256 only, expire, can be revoked, and people manage their
own on the "API tokens" page; the admin never shows a key; old authtoken keys keep working."""

import hashlib
import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from acceptance.tokens import ApiToken, api_token_create
from tests.api.conftest import make_user

pytestmark = pytest.mark.django_db


def api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def people(db):
    return {"pm": make_user("pm", "project_manager"), "other": make_user("other", "engineer")}


def test_it_stores_only_the_sha256_and_records_the_last_use(people):
    token, key = api_token_create(user=people["pm"], name="ci", days=30)
    row = ApiToken.objects.values().get(pk=token.pk)
    assert key not in [str(v) for v in row.values()]
    assert row["digest"] == hashlib.sha256(key.encode()).hexdigest()
    assert token.expires_at - timezone.now() > timedelta(days=29, hours=23)
    assert token.last_used_at is None
    assert api(key).get("/api/engagements/").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_it_refuses_an_expired_or_revoked_token_with_the_word(people):
    token, key = api_token_create(user=people["pm"], name="ci", days=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api(key).get("/api/engagements/")
    assert (response.status_code, response.json()) == (401, {"detail": "token expired"})
    token, key = api_token_create(user=people["pm"], name="ci", days=0)
    assert token.expires_at is None
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    response = api(key).get("/api/engagements/")
    assert (response.status_code, response.json()) == (401, {"detail": "token revoked"})
    response = api("x" * 43).get("/api/engagements/")
    assert (response.status_code, response.json()) == (401, {"detail": "invalid token"})


def test_the_token_page_makes_a_token_shown_once_lists_and_revokes_it(client, people):
    client.force_login(people["pm"])
    response = client.post("/accounts/tokens/", {"name": "nightly export", "days": "7"})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    key = response.context["new_key"]
    page = response.content.decode()
    assert key in page and "will not be shown again" in page
    assert api(key).get("/api/engagements/").status_code == 200
    listing = client.get("/accounts/tokens/").content.decode()
    assert "nightly export" in listing and key[:8] in listing and key not in listing
    token = ApiToken.objects.get(user=people["pm"])
    assert client.post(f"/accounts/tokens/{token.id}/revoke/").status_code == 302
    token.refresh_from_db()
    assert token.state == "revoked"
    assert api(key).get("/api/engagements/").status_code == 401


def test_the_token_page_refuses_a_bad_form_and_someone_elses_token(client, people):
    client.force_login(people["pm"])
    response = client.post("/accounts/tokens/", {"name": "", "days": "9999"})
    assert response.status_code == 400
    assert set(response.context["form"].errors) == {"name", "days"}
    theirs, key = api_token_create(user=people["other"], name="theirs")
    assert client.post(f"/accounts/tokens/{theirs.id}/revoke/").status_code == 404
    assert "theirs" not in client.get("/accounts/tokens/").content.decode()
    theirs.refresh_from_db()
    assert theirs.state == "active"


def test_the_token_page_needs_a_login(client):
    response = client.get("/accounts/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_admin_lists_tokens_without_any_key(client, people):
    admin = make_user("root", None)
    admin.is_staff = admin.is_superuser = True
    admin.save()
    token, key = api_token_create(user=people["pm"], name="ci")
    client.force_login(admin)
    for url in ("/admin/acceptance/apitoken/", f"/admin/acceptance/apitoken/{token.id}/change/"):
        page = client.get(url)
        assert page.status_code == 200
        assert key not in page.content.decode() and token.digest not in page.content.decode()
    assert client.get("/admin/acceptance/apitoken/add/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_the_migration_hashes_authtoken_keys_so_they_keep_working(people):
    migration = importlib.import_module("acceptance.migrations.0008_api_token_from_authtoken")
    legacy = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
                       "user_id integer NOT NULL, created datetime NOT NULL)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)",
                       [legacy, people["pm"].id, "2026-01-02 03:04:05"])
    with connection.schema_editor() as editor:
        migration.tokens_hash(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get(user=people["pm"])
    assert token.digest == hashlib.sha256(legacy.encode()).hexdigest()
    assert token.prefix == legacy[:8] and token.expires_at is None
    assert api(legacy).get("/api/engagements/").status_code == 200


def test_the_token_page_and_the_lockout_read_in_chinese(client, people, settings):
    client.force_login(people["pm"])
    page = client.get("/accounts/tokens/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "API 令牌" in page and "创建令牌" in page
    settings.AXES_FAILURE_LIMIT = 1
    client.logout()
    response = client.post("/accounts/login/", {"username": "pm", "password": "wrong"},
                           HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 429
    assert "请在 15 分钟后再试" in response.content.decode()
