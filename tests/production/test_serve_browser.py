"""``manage.py serve`` on the embedded default (SQLite, no Redis, no broker URL: the filesystem
broker under var/broker), driven in a real browser (Playwright + Debian's Chromium): the
engineer starts G1 from the page and the request returns at once, watches the log grow, cancels
the run, re-runs the gate and sees the new attempt finish."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import requests

from tests.production.helpers import ROOT, base_env, free_port, manage, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed"),
]
PASSWORD = "correct-horse-battery-staple-9"
STATE = "document.querySelector('#run-live').dataset.state"


@pytest.fixture
def served(tmp_path):
    env = base_env(tmp_path / "var")
    assert "CELERY_BROKER_URL" not in env
    for command in (["migrate", "-v", "0"], ["lab", "up", "--scenario", "healthy"]):
        done = manage(env, *command)
        assert done.returncode == 0, (command, done.stderr)
    made = manage(env, "shell", "--no-imports", "-c", (
        "from django.contrib.auth.models import User; from acceptance.models import Membership;"
        f"u = User.objects.create_user('eng-bob', password={PASSWORD!r});"
        "Membership.objects.create(user=u, role='engineer')"))
    assert made.returncode == 0, made.stderr
    port = free_port()
    log = open(tmp_path / "serve.log", "w+")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base), 60, "serve to be ready")
        yield base, tmp_path / "var"
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
        manage(env, "lab", "down")
        log.seek(0)
        print(log.read()[-6000:])  # shown when the test fails
    assert status == 0


def _ready(base):
    try:
        return requests.get(base + "/readyz", timeout=10).status_code == 200
    except requests.ConnectionError:
        return False


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda dialog: dialog.accept())  # the cancel confirmation
        yield page
        chromium.close()


def test_on_the_embedded_default_a_run_started_in_the_browser_is_watched_cancelled_and_rerun(
        served, page):
    base, var = served
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", "eng-bob")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()

    page.goto(f"{base}/engagements/lab-healthy/gates/G1/run/")
    clicked = time.monotonic()
    page.get_by_role("button", name="Start G1 now").click()
    page.wait_for_url("**/runs/*/")
    assert time.monotonic() - clicked < 5  # the request returned at once: a worker runs it
    first_url = page.url
    assert page.evaluate(STATE) in ("queued", "running")

    # the log grows while the run runs
    page.wait_for_function("document.querySelector('#run-log').innerText.length > 0",
                           timeout=60_000)
    length = page.evaluate("document.querySelector('#run-log').innerText.length")
    page.wait_for_function(
        f"document.querySelector('#run-log').innerText.length > {length}", timeout=60_000)
    assert page.evaluate(STATE) == "running"

    page.get_by_role("button", name="Cancel run").click()
    page.wait_for_function(f"{STATE} === 'cancelled'", timeout=60_000)
    assert "Cancelled by eng-bob." in page.inner_text("main")

    page.get_by_role("link", name="Re-run gate…").click()
    page.get_by_role("button", name="Re-run the gate").click()
    page.wait_for_url("**/runs/*/")
    assert page.url != first_url
    page.wait_for_function(f"['done','failed','cancelled'].includes({STATE})", timeout=90_000)
    assert page.evaluate(STATE) == "done"
    assert "attempt #2" in page.inner_text("main")

    # the work went through the server-less broker, not the request
    assert list((var / "broker" / "processed").glob("*.msg"))
    # the run's last tasks (its notices) are rung as it ends: the queue drains soon after
    deadline = time.monotonic() + 60
    while list((var / "broker" / "queue").glob("*.msg")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not list((var / "broker" / "queue").glob("*.msg"))
