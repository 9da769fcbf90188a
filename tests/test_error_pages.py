"""Error pages 403, 404 and 500 in the service's layout and language, each with a way back;
the 500 page renders without a request or any context (it is what shows when those failed)."""

from __future__ import annotations

import pytest
from django.template import loader
from django.test import Client
from django.urls import include, path, reverse

from tests.web.conftest import make_user


def broken_view(request):
    raise RuntimeError("a bug in a view")


# This module is also the URL configuration of the 500 test: the service's URLs plus a view
# that fails.
urlpatterns = [path("broken/", broken_view), path("", include("acceptance.urls"))]


def test_404_is_in_the_layout_with_a_way_back(db):
    user = make_user("pat-pm", "project_manager")
    client = Client()
    client.force_login(user)
    response = client.get("/engagements/no-such-one/")
    assert response.status_code == 404
    page = response.content.decode()
    assert '<header class="topbar">' in page and "<h1>Not found</h1>" in page
    assert '<a class="button" href="/">Back to your start page</a>' in page
    assert "no-such-one" not in page  # the refused address is not echoed back


def test_404_for_someone_logged_out_offers_the_login(db):
    page = Client().get("/accounts/nothing-here/").content.decode()
    assert f'href="{reverse("login")}">Log in</a>' in page


def test_403_shows_the_reason_and_a_way_back(db, settings):
    customer = make_user("cy", None)
    client = Client()
    client.force_login(customer)
    response = client.get(reverse("dashboard"))
    assert response.status_code == 403
    page = response.content.decode()
    assert "<h1>Not allowed</h1>" in page and "Nothing was changed." in page
    assert '<a class="button" href="/">Back to your start page</a>' in page


def test_403_says_why_when_the_service_says_it(db):
    user = make_user("no-role", None)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("home")).content.decode()
    assert "Your account has no role yet: ask the project manager." in page


def test_error_pages_speak_chinese(db):
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = client.get("/accounts/nothing-here/").content.decode()
    assert "<h1>未找到</h1>" in page
    assert "登录" in page


def test_500_renders_without_a_request_or_context():
    page = loader.get_template("500.html").render()
    assert '<header class="topbar">' in page and "<h1>Something went wrong</h1>" in page
    assert '<a class="button" href="/">Back to your start page</a>' in page


@pytest.mark.urls("tests.test_error_pages")
def test_a_failing_view_answers_the_500_page(db):
    client = Client(raise_request_exception=False)
    response = client.get("/broken/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "<h1>Something went wrong</h1>" in page
    assert "a bug in a view" not in page and "Traceback" not in page
