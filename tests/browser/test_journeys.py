"""The three journeys in a real browser: Playwright driving Debian's Chromium against the
service on a live server (real sshd lab nodes behind it).

* the project manager ticks the bill of materials and reads why a gate stopped;
* the engineer launches a gate run on the lab and sees it finish;
* a customer downloads their signed report and cannot open another organisation's engagement,
  neither by its URL nor through the API.
"""

import os
import shutil

import pytest
from django.core.management import call_command

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # PLATFORM.md gotcha 11

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed"),
]
PASSWORD = "correct-horse-battery-staple-9"


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield chromium
        chromium.close()


def person(username, role, organisation=None):
    from django.contrib.auth.models import User

    from acceptance.models import Membership

    user = User.objects.create_user(username, password=PASSWORD)
    Membership.objects.create(user=user, role=role, organisation=organisation)
    return user


def log_in(browser, live_server, username, width=1280):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def quiet(*args, **kwargs):
    import io

    with pytest.raises(SystemExit):
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO(), **kwargs)


def test_the_project_manager_ticks_the_bom_and_reads_why_g1_stopped(lab, live_server, browser):
    engagement, _ = lab("missing-drive")
    item = engagement.bom_items.get(position=3)
    item.ticked_by, item.ticked_at = "", None
    item.save()
    person("pm-alice", "project_manager")
    page = log_in(browser, live_server, "pm-alice")
    assert "/dashboard/" in page.url
    page.click(f"text={engagement.name}")
    page.wait_for_load_state()
    row = page.locator("#bom-3")
    row.get_by_role("button").click()
    page.wait_for_function("document.querySelector('#bom-3').innerText.includes('pm-alice')")
    item.refresh_from_db()
    assert item.ticked_by == "pm-alice" and item.ticked_at is not None

    quiet("run_gate", engagement.name, "G1")  # stops: 23 of 24 drives
    page.reload()
    text = page.inner_text("main")
    assert "drive_count >= 24 measured 23" in text
    page.screenshot(path=str(live_server_shots() / "pm-engagement.png"), full_page=True)


def test_the_engineer_launches_a_run_on_the_lab_and_sees_it_finish(lab, live_server, browser):
    engagement, _ = lab("healthy")
    person("eng-bob", "engineer")
    page = log_in(browser, live_server, "eng-bob")
    page.goto(f"{live_server.url}/engagements/{engagement.name}/gates/G1/run/")
    page.get_by_role("button", name="Start G1 now").click()
    page.wait_for_url("**/runs/*/")
    page.wait_for_function(
        "['done','failed','cancelled'].includes("
        "document.querySelector('#run-live').dataset.state)", timeout=60_000)
    assert page.locator("#run-live").get_attribute("data-state") == "done"
    text = page.inner_text("main")
    assert "lab-array-controller" in text and "drive_count" in text
    page.screenshot(path=str(live_server_shots() / "engineer-run.png"), full_page=True)


def test_a_customer_downloads_a_report_and_cannot_open_another_organisation(
        lab, live_server, browser):
    from acceptance.models import Organisation
    from acceptance.tokens import api_token_create
    from gates.services import engagement_create

    engagement, _ = lab("healthy")
    quiet("run_gate", engagement.name, "G1")
    other = engagement_create(name="acme-site", customer="ACME Cloud",
                              start_date=engagement.start_date)
    person("carol", "customer", organisation=engagement.customer)
    mallory = person("mallory", "customer",
                     organisation=Organisation.objects.get(name="ACME Cloud"))

    page = log_in(browser, live_server, "carol", width=390)  # a phone
    assert "/portal/" in page.url
    with page.expect_download() as download:
        page.get_by_role("link", name="Download PDF").first.click()
    path = download.value.path()
    with open(path, "rb") as handle:
        assert handle.read(5) == b"%PDF-"

    intruder = log_in(browser, live_server, "mallory")
    response = intruder.goto(f"{live_server.url}/engagements/{engagement.name}/")
    assert response.status == 404 and engagement.name not in intruder.content()
    own = intruder.goto(f"{live_server.url}/engagements/{other.name}/")
    assert own.status == 200

    _, token = api_token_create(user=mallory, name="test")
    api = intruder.request.get(f"{live_server.url}/api/engagements/{engagement.name}/",
                               headers={"Authorization": f"Token {token}"})
    assert api.status == 404
    listing = intruder.request.get(f"{live_server.url}/api/engagements/",
                                   headers={"Authorization": f"Token {token}"}).json()
    names = [e["name"] for e in listing.get("results", listing)]
    assert names == ["acme-site"]


def live_server_shots():
    from django.conf import settings

    path = settings.LAB_DIR.parent / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
