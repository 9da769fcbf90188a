"""The engineer watches a compressed G4 soak in a real browser: Playwright driving Debian's
Chromium against ``manage.py runserver``, while ``run_gate … G4`` drives a real lab soak
(``soak-drive-impact``: real sshd nodes, the stand-in engine and array) — two processes sharing
one database, as on a site. The page advances without a reload, the engineer pauses and resumes
the load from the page, the drive fault's window appears shaded on the charts, and the page
ends on the decision: G4 stopped, naming the fault window and the check that failed.

Screenshots (1280 px and 390 px, mid-run and done) go to ``var/screens/`` for people to look at.
"""

import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.harness import service_env as base_env

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # PLATFORM.md gotcha 11

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screens"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PASSWORD = "correct-horse-battery-staple-9"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed"),
]

SETUP = """
from django.contrib.auth.models import User
from acceptance.models import Membership
from gates.models import Gate
from runners.lab.services import lab_up
engagement, _ = lab_up(scenario_name="soak-drive-impact", overrides={"soak": {"seconds": %d}})
Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(state="passed")
user = User.objects.create_user("eng-erin", password=%r)
Membership.objects.create(user=user, role="engineer")
"""


def manage(env, *args, timeout=180):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def start(env, *args):
    return subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=60, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2):  # noqa: S310 (loopback test server)
            return True
    except OSError:
        return False


def soak_id(tmp_path) -> int | None:
    with sqlite3.connect(tmp_path / "var" / "acceptance.sqlite3", timeout=30) as db:
        rows = db.execute("select id from soak_soak").fetchall()
    return rows[0][0] if rows else None


@pytest.fixture
def site(tmp_path):
    """A lab soak engagement, a web server and (started by the test) the soak's driver."""
    env = base_env(tmp_path)
    assert manage(env, "migrate", "-v", "0").returncode == 0
    setup = manage(env, "shell", "-c", SETUP % (30, PASSWORD))
    assert setup.returncode == 0, setup.stderr
    port = free_port()
    server = start(env, "runserver", f"127.0.0.1:{port}", "--noreload", "--nothreading")
    processes = [server]
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(url + "/accounts/login/"), what="the web server")
        yield env, url, processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        manage(env, "lab", "down")


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


def log_in(browser, url, width=1280):
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", "eng-erin")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def percent(page) -> int:
    return int(re.sub(r"\D", "", page.inner_text("#soak-percent")) or 0)


def test_an_engineer_watches_a_compressed_soak_live_to_its_decision(site, browser, tmp_path):
    env, url, processes = site
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = log_in(browser, url)
    page.goto(f"{url}/engagements/lab-soak-drive-impact/gates/G4/soak/")
    assert "fault targets" in page.inner_text("main").lower()
    assert "drive_out" in page.inner_text("#fault-targets")  # marked by the lab, confirmed
    page.screenshot(path=str(SHOTS / "soak-plan-1280.png"), full_page=True)

    driver = start(env, "run_gate", "lab-soak-drive-impact", "G4", "--timeout", "240")
    processes.append(driver)
    wait_for(lambda: soak_id(tmp_path) is not None, what="the soak row")
    page.goto(f"{url}/soaks/{soak_id(tmp_path)}/")
    assert page.get_attribute("#soak-live", "hx-get")  # polling its fragment

    # Live: the percentage grows while the page is never reloaded.
    page.evaluate("window.__notReloaded = true")
    page.wait_for_function("parseInt(document.querySelector('#soak-percent').innerText) >= 10",
                           timeout=60_000)
    first = percent(page)

    # Pause and resume from the page (the agents on the node are told; the pause is logged).
    page.click("details.soak-act > summary")
    page.fill("#pause-reason", "customer change window")
    page.click("#soak-pause")
    page.wait_for_selector("#soak-state:has-text('paused')", timeout=30_000)
    assert "customer change window" in page.inner_text("#soak-events")
    page.click("#soak-resume")
    page.wait_for_selector("#soak-state:has-text('running')", timeout=30_000)
    page.evaluate("window.__notReloaded = true")

    # The drive fault: its window shaded on every chart, its row in the fault table.
    page.wait_for_selector("#chart-request_error_rate rect.fault-window[data-fault='drive-out']",
                           timeout=90_000)
    assert page.evaluate("window.__notReloaded === true")  # htmx swapped, no reload
    assert percent(page) > first
    page.screenshot(path=str(SHOTS / "soak-mid-1280.png"), full_page=True)
    phone = log_in(browser, url, width=390)
    phone.goto(page.url)
    phone.screenshot(path=str(SHOTS / "soak-mid-390.png"), full_page=True)

    # The decision, live: G4 stopped on the error rate in the drive fault window.
    page.wait_for_selector("#soak-decision", timeout=180_000)
    decision = page.inner_text("#soak-decision")
    assert "stopped" in decision and "fault window drive-out" in decision
    assert "request_error_rate <= 0 measured" in decision
    page.click("#soak-decision details.stop-reason > summary")  # the reason, check by check
    assert "error-rate: worst of" in page.inner_text("#soak-decision")
    assert page.evaluate("window.__notReloaded === true")
    assert page.get_attribute("#soak-live", "hx-get") is None  # polling stopped
    assert page.inner_text("#soak-percent").strip() == "100 %"
    row = page.inner_text("tr[data-fault='drive-out']")
    assert "not met" in row and "timer" in row
    assert page.locator("#soak-actions button").count() == 0  # nothing left to pause or abort
    out = driver.communicate(timeout=120)[0]
    assert driver.returncode == 1, out  # stopped
    page.screenshot(path=str(SHOTS / "soak-done-1280.png"), full_page=True)
    phone.goto(page.url)
    phone.screenshot(path=str(SHOTS / "soak-done-390.png"), full_page=True)
