"""A real customer engagement from the first day, in the browser, without a shell (issue 20).

From an empty database and the README's one command (``createsuperuser``), using only pages:
the superuser makes a project manager in ``/admin/`` (Membership); the project manager creates
engagement ``acme-prod`` for organisation Acme with one array, sets a webhook, invites an
engineer and an Acme customer — the invitations are read from a real SMTP server on 127.0.0.1
(aiosmtpd) and their links opened in the browser; the engineer registers the array controller:
a loopback sshd running this machine's REAL tools (nvme-cli, smartmontools; no stand-ins on its
PATH); the project manager uploads the BOM as CSV and ticks it; G1 runs from the browser on a
real Celery worker (Redis), is watched on its run page, and —
this machine having no NVMe drive — stops on ``drive_count`` (0 of 24) with a signed report; the
project manager gets the mail, the webhook receiver a correctly signed POST; the customer sees
only Acme's engagement, downloads the report and verifies it on /reports/verify/, signs off; the
portal then serves version 2; the project manager re-opens G1 with a reason.

Screenshots: /tmp/journey-*.png.
"""

import hashlib
import hmac
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from acceptance.celery import app
from acceptance.models import Engagement, Membership
from reports.models import Report
from tests.browser.test_journeys import CHROMIUM, browser  # noqa: F401 (fixture)
from tests.notifications.conftest import webhook_receiver  # noqa: F401 (fixture)
from tests.transport.sshd import host_key_fingerprint_of, real_node
from tests.web.conftest import smtp_server  # noqa: F401 (fixture)

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # PLATFORM.md gotcha 11

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed"),
    pytest.mark.skipif(not shutil.which("nvme", path="/usr/sbin:/usr/bin"),
                       reason="nvme-cli is not installed (scripts/setup)"),
]
PASSWORD = "correct-horse-battery-staple-9"
SECRET = "webhook-secret-of-acme-prod"
BOM_CSV = ("description,quantity,part number,serials\n"
           "FX100 array (24 x 7.68 TB),1,FX100-24,FX24-0001\n")


@pytest.fixture
def worker():
    """A real Celery worker in this process, through Redis (TEST_REDIS_URL, DB 10 by default):
    the run page is watched while the run goes on. One task at a time (``solo``): the test
    database is SQLite in memory, shared between threads, and two writers would lock it."""
    broker = app.conf.broker_url
    app.conf.task_always_eager = False
    app.conf.broker_url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/10")
    forget_broker_connections()
    try:
        with start_worker(app, pool="solo", perform_ping_check=False,
                          shutdown_timeout=10, loglevel="WARNING"):
            yield
    finally:
        app.conf.task_always_eager, app.conf.broker_url = True, broker
        forget_broker_connections()


def forget_broker_connections() -> None:
    """Celery keeps the connection and producer pools of the broker it first published to: an
    earlier test in this process would leave the run's tasks going to the old broker, where
    this worker never sees them. Drop both, so the next publish uses ``broker_url`` as set."""
    app._pool = None
    app.amqp._producer_pool = None


def shot(page, name: str) -> None:
    page.screenshot(path=f"/tmp/journey-{name}.png", full_page=True)


def log_in(browser, url: str, username: str, password: str = PASSWORD):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("form [type=submit]")
    page.wait_for_load_state()
    return page


def link_in(mailbox, address: str, pattern: str) -> str:
    messages = mailbox.to(address)
    assert messages, f"no mail to {address}"
    found = re.search(pattern, mailbox.body(messages[-1]))
    assert found, mailbox.body(messages[-1])
    return found.group(0)


def accept_invitation(browser, url: str, link: str, username: str):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(15_000)
    page.goto(link.replace("http://testserver", url))
    page.wait_for_load_state()
    if page.locator("input[name=username]").count():
        page.fill("input[name=username]", username)
    page.fill("input[name=new_password1]", PASSWORD)
    page.fill("input[name=new_password2]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    return page


def test_a_real_engagement_from_an_empty_database_to_a_signed_g1_report(
        transactional_db, live_server, worker, browser, smtp_server, webhook_receiver,  # noqa: F811
        settings, tmp_path):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.NOTIFICATIONS_BASE_URL = live_server.url
    settings.NOTIFY_RETRY_BASE_S = 0.01
    url = live_server.url
    assert not User.objects.exists() and not Engagement.objects.exists()

    # The README: createsuperuser (no shell beyond it).
    os.environ["DJANGO_SUPERUSER_PASSWORD"] = PASSWORD
    try:
        call_command("createsuperuser", "--noinput", username="root-admin",
                     email="admin@vendor.example", verbosity=0)
    finally:
        del os.environ["DJANGO_SUPERUSER_PASSWORD"]

    # 1. The superuser makes a project manager in /admin/.
    admin = log_in(browser, f"{url}/admin", "root-admin")
    admin.goto(f"{url}/admin/auth/user/add/")
    admin.fill("input[name=username]", "pm-paula")
    admin.fill("input[name=password1]", PASSWORD)
    admin.fill("input[name=password2]", PASSWORD)
    admin.click("input[name=_save]")
    admin.wait_for_url("**/admin/auth/user/*/change/")  # then the e-mail address, for notices
    admin.fill("input[name=email]", "paula@vendor.example")
    admin.click("input[name=_save]")
    admin.wait_for_load_state()
    admin.goto(f"{url}/admin/acceptance/membership/add/")
    admin.select_option("select[name=user]", label="pm-paula")
    admin.select_option("select[name=role]", value="project_manager")
    admin.click("input[name=_save]")
    admin.wait_for_load_state()
    assert Membership.objects.get(user__username="pm-paula").role == "project_manager"
    assert User.objects.get(username="pm-paula").email == "paula@vendor.example"

    # 2. The project manager creates acme-prod for Acme with one array.
    pm = log_in(browser, url, "pm-paula")
    pm.goto(f"{url}/engagements/new/")
    pm.fill("input[name=name]", "acme-prod")
    pm.fill("input[name=new_organisation]", "Acme")
    pm.fill("input[name=start_date]", timezone.localdate().isoformat())
    pm.fill("input[name=arrays-0-model]", "FX100")
    pm.fill("input[name=arrays-0-serial]", "FX24-0001")
    pm.fill("input[name=arrays-0-expected_drive_count]", "24")
    pm.fill("input[name=arrays-0-link_speed_mbps]", "100000")
    pm.click("main button[type=submit]")
    pm.wait_for_url("**/engagements/acme-prod/")
    engagement = Engagement.objects.get(name="acme-prod")
    assert engagement.customer.name == "Acme" and engagement.gates.count() == 4
    # ... and another customer's engagement, which Acme's customer must never see.
    pm.goto(f"{url}/engagements/new/")
    pm.fill("input[name=name]", "globex-1")
    pm.fill("input[name=new_organisation]", "Globex")
    pm.fill("input[name=start_date]", timezone.localdate().isoformat())
    pm.click("main button[type=submit]")
    pm.wait_for_url("**/engagements/globex-1/")

    # ... sets the webhook ...
    pm.goto(f"{url}/engagements/acme-prod/notifications/")
    pm.fill("input[name=url]", webhook_receiver.url)
    pm.fill("input[name=secret]", SECRET)
    for box in pm.locator("input[name=kinds]").all():
        box.check()
    pm.locator("form:has(input[name=url]) button[type=submit]").click()
    pm.wait_for_load_state()

    # ... and invites an engineer and an Acme customer.
    for address, role in (("erin@vendor.example", "engineer"),
                          ("carla@acme.example", "customer")):
        pm.goto(f"{url}/engagements/acme-prod/people/")
        invite = pm.locator("form:has(input[name=email])")
        invite.locator("input[name=email]").fill(address)
        invite.locator("select[name=role]").select_option(value=role)
        invite.locator("button[type=submit]").click()
        pm.wait_for_load_state()
        assert address in pm.inner_text("main")

    invitation = r"https?://[^\s]+/accounts/invitation/[^\s]+/"
    engineer = accept_invitation(browser, url, link_in(smtp_server, "erin@vendor.example",
                                                       invitation), "erin")
    customer = accept_invitation(browser, url, link_in(smtp_server, "carla@acme.example",
                                                       invitation), "carla")
    erin = User.objects.get(email="erin@vendor.example")
    carla = User.objects.get(email="carla@acme.example")
    assert erin.membership.role == "engineer"
    assert carla.membership.role == "customer"
    assert carla.membership.organisation == engagement.customer

    # 3. The engineer registers the array controller: a node with the machine's real tools.
    node = real_node(settings.LAB_DIR / "acme-array-ctl")
    fingerprint = host_key_fingerprint_of(node)
    key_file = tmp_path / "array-ctl-key"
    key_file.write_text(node.client_private_key)
    engineer.goto(f"{url}/engagements/acme-prod/nodes/register/")
    engineer.fill("input[name=address]", "127.0.0.1")
    engineer.fill("input[name=port]", str(node.port))
    engineer.get_by_role("button", name="Read the host key").click()
    engineer.wait_for_load_state()
    engineer.fill("input[name=fingerprint]", fingerprint)
    engineer.fill("input[name=name]", "array-ctl")
    engineer.select_option("select[name=role]", value="array")
    engineer.fill("input[name=ssh_user]", node.user)
    engineer.set_input_files("input[name=private_key]", str(key_file))
    engineer.select_option("select[name=array]",
                           value=str(engagement.arrays.get(serial="FX24-0001").pk))
    engineer.get_by_role("button", name="Check the login and enrol").click()
    engineer.wait_for_load_state()
    assert engagement.nodes.filter(name="array-ctl").exists(), engineer.inner_text("main")

    # 4. The project manager uploads the BOM as CSV and ticks it.
    bom = tmp_path / "bom.csv"
    bom.write_text(BOM_CSV)
    pm.goto(f"{url}/engagements/acme-prod/")
    pm.get_by_role("link", name="Upload a CSV list").click()
    pm.set_input_files("input[name=file]", str(bom))
    pm.locator("form:has(input[name=file]) button[type=submit]").click()
    pm.wait_for_load_state()
    assert engagement.bom_items.count() == 1, pm.inner_text("main")
    pm.locator("#bom-1").get_by_role("button").click()
    pm.wait_for_function("document.querySelector('#bom-1').innerText.includes('pm-paula')")

    # 5. The engineer starts G1 and watches the run page; it stops on 0 of 24 drives.
    engineer.goto(f"{url}/engagements/acme-prod/gates/G1/run/")
    engineer.get_by_role("button", name="Start G1 now").click()
    engineer.wait_for_url("**/runs/*/")
    # A real worker runs it: the page is usually first seen queued or running and follows
    # the run to its end without a reload.
    assert engineer.locator("#run-live").get_attribute("data-state") in (
        "queued", "running", "evaluating", "done")
    engineer.wait_for_function(
        "['done','failed','cancelled'].includes("
        "document.querySelector('#run-live').dataset.state)", timeout=90_000)
    run_text = engineer.inner_text("main")
    shot(engineer, "run")
    assert engineer.locator("#run-live").get_attribute("data-state") == "done", run_text
    assert "Lab" not in run_text and "simulated" not in run_text.lower()
    gate = engagement.gates.get(code="G1")
    assert gate.state == "stopped", run_text
    decision = gate.decisions.latest("decided_at")
    verdict = decision.verdicts.get(criterion__metric="drive_count")
    assert verdict.verdict == "fail" and verdict.measured_value == 0
    report = Report.objects.get(decision=decision, version=1)

    pm.goto(f"{url}/engagements/acme-prod/")
    page_text = pm.inner_text("main")
    shot(pm, "engagement-stopped")
    assert "drive_count >= 24 measured 0" in page_text, page_text

    # The project manager got the mail; the webhook receiver a correctly signed POST.
    assert any("G1" in m["Subject"] and "stop" in m["Subject"].lower()
               for m in smtp_server.to("paula@vendor.example")), \
        [m["Subject"] for m in smtp_server.messages]
    posts = [p for p in webhook_receiver.posts
             if json.loads(p["body"]).get("event") == "gate_decided"]
    assert posts, [json.loads(p["body"]).get("event") for p in webhook_receiver.posts]
    post = posts[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), post["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(post["headers"]["X-Acceptance-Signature"], expected)
    assert post["headers"]["X-Acceptance-Delivery"]

    # The project manager signs off version 1 (the vendor's side).
    pm.get_by_role("link", name="Reports, versions and sign-off").first.click()
    pm.wait_for_url("**/engagements/acme-prod/reports/")
    pm.get_by_role("button", name="Approve this decision").click()
    pm.wait_for_load_state()
    assert "pm-paula" in pm.inner_text("main")

    # 6. The customer sees only Acme's engagement, downloads and verifies the report, signs off.
    customer.goto(f"{url}/portal/")
    portal_text = customer.inner_text("main")
    assert "acme-prod" in portal_text and "globex-1" not in portal_text
    assert customer.goto(f"{url}/engagements/globex-1/").status == 404
    assert customer.goto(f"{url}/engagements/globex-1/reports/").status == 404
    customer.goto(f"{url}/portal/")
    with customer.expect_download() as download:
        customer.get_by_role("link", name=re.compile("Download PDF")).first.click()
    pdf = Path(download.value.path())
    assert hashlib.sha256(pdf.read_bytes()).hexdigest() == report.sha256  # version 1, signed
    customer.goto(f"{url}/reports/verify/")
    customer.set_input_files("input[name=pdf]", str(pdf))
    customer.get_by_role("button", name="Check the signature").click()
    customer.wait_for_load_state()
    verify_text = customer.inner_text("main")
    assert "valid" in verify_text.lower() and "acme-prod" in verify_text, verify_text
    customer.goto(f"{url}/portal/")
    customer.get_by_role("link", name=re.compile("sign-off", re.I)).first.click()
    customer.wait_for_url("**/engagements/acme-prod/reports/")
    customer.get_by_role("button", name="Approve this decision").click()
    customer.wait_for_load_state()
    second = Report.objects.get(about=decision, version=2)
    assert second.signoff_complete

    customer.goto(f"{url}/portal/")
    portal_text = customer.inner_text("main")
    shot(customer, "portal")
    assert "version 2 of 2, signed off by both parties" in portal_text, portal_text
    assert customer.locator(f"a[href='/reports/{second.id}/download/']").count()
    assert customer.goto(f"{url}/engagements/acme-prod/").status == 200

    # 7. The project manager re-opens G1 with a reason.
    pm.goto(f"{url}/engagements/acme-prod/")
    pm.fill("textarea[name=reason]", "24 drives delivered on a second pallet; G1 to run again")
    pm.get_by_role("button", name="Re-open the engagement").click()
    pm.wait_for_load_state()
    assert "acme-prod is re-opened" in pm.inner_text("main")
    gate.refresh_from_db()
    assert gate.state != "stopped", pm.inner_text("main")
