"""Login throttling (django-axes) and the API's request rates (anonymous, per user, uploads)."""

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient

from acceptance.tokens import api_token_create
from tests.api.conftest import make_user

pytestmark = pytest.mark.django_db


def test_it_refuses_the_right_password_after_thirty_wrong_ones(client):
    User.objects.create_user("carol", password="right horse battery staple")
    for _ in range(30):
        response = client.post("/accounts/login/", {"username": "carol", "password": "wrong"})
        assert response.status_code in (200, 429)
    assert response.status_code == 429
    response = client.post("/accounts/login/", {"username": "carol",
                                                "password": "right horse battery staple"})
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed log-ins" in page and "15 minutes" in page
    assert 'class="topbar"' in page  # in the layout
    assert "_auth_user_id" not in client.session


def test_the_fifth_failure_locks_only_that_user_name(client):
    User.objects.create_user("carol", password="right")
    User.objects.create_user("dave", password="right")
    for attempt in range(1, 6):
        response = client.post("/accounts/login/", {"username": "carol", "password": "wrong"})
        assert response.status_code == (429 if attempt == 5 else 200)
    response = client.post("/accounts/login/", {"username": "dave", "password": "right"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(
        User.objects.get(username="dave").pk)


def test_anonymous_and_user_api_rates(settings):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "anon": "3/min",
                                   "user": "4/min"}
    guesser = APIClient()
    guesser.credentials(HTTP_AUTHORIZATION="Token guessed")
    assert [guesser.get("/api/engagements/").status_code for _ in range(4)] == [401] * 3 + [429]
    _, key = api_token_create(user=make_user("pm", "project_manager"), name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    codes = [client.get("/api/engagements/").status_code for _ in range(5)]
    assert codes == [200] * 4 + [429]
    response = client.get("/api/engagements/")
    assert response.json()["detail"].startswith("Request was throttled.")
    assert int(response["Retry-After"]) > 0


def test_uploads_have_their_own_rate_on_pages_and_the_api(settings, client, ledger, client_for):
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, "upload": "2/hour"}
    client.force_login(ledger.report.engagement.customer.members.first().user)
    codes = [client.post("/reports/verify/", {}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    response = client.post("/reports/verify/", {})
    assert response.content.decode().startswith("too many uploads: try again in ")
    assert int(response["Retry-After"]) > 0
    api = client_for("customer")  # the same person: the count is theirs, page or API
    url = f"/api/reports/{ledger.report.id}/countersigned/"
    assert api.post(url, {}).status_code == 429
    cache.clear()  # an hour later
    assert [api.post(url, {}).status_code for _ in range(3)] == [400, 400, 429]
