"""People and engagements for the web pages: a project manager, an engineer, a customer of
ACME (engagement ``acme-1``) and a customer of Globex (engagement ``globex-1``), each with their
``Membership``; helpers that record a decision and a signed-report row without any SSH."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from acceptance.models import Membership, Organisation
from gates import evaluation
from gates.models import Gate
from gates.services import decision_record, decision_settle, engagement_create
from reports.models import Report
from runners.models import GateRun

PASSWORD = "correct horse battery staple"
# G1's criteria with the figures of the missing-drive lab scenario: 23 of 24 drives.
G1_MISSING_DRIVE = {"bom-complete": ("pass", 0.0), "drive-count": ("fail", 23.0),
                    "self-test": ("pass", 0.0), "critical-warning": ("pass", 0.0)}
G1_HEALTHY = {"bom-complete": ("pass", 0.0), "drive-count": ("pass", 24.0),
              "self-test": ("pass", 0.0), "critical-warning": ("pass", 0.0)}


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def make_user(username: str, role: str | None, organisation: Organisation | None = None) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        Membership.objects.create(user=user, role=role, organisation=organisation)
    return user


@pytest.fixture
def engagement_a(db):
    return engagement_create(name="acme-1", customer="ACME",
                             start_date=timezone.localdate() - timedelta(weeks=3))


@pytest.fixture
def engagement_b(db):
    return engagement_create(name="globex-1", customer="Globex",
                             start_date=timezone.localdate() - timedelta(weeks=1))


@pytest.fixture
def pm(db):
    return make_user("pat-pm", Membership.Role.PROJECT_MANAGER)


@pytest.fixture
def engineer(db):
    return make_user("erin-engineer", Membership.Role.ENGINEER)


@pytest.fixture
def customer_a(engagement_a):
    return make_user("carla-acme", Membership.Role.CUSTOMER, engagement_a.customer)


@pytest.fixture
def customer_b(engagement_b):
    return make_user("bob-globex", Membership.Role.CUSTOMER, engagement_b.customer)


@pytest.fixture
def nobody(db):
    """Logged in, but no role yet."""
    return make_user("nora-norole", None)


def decide(gate: Gate, figures: dict[str, tuple[str, float]], outcome: str,
           started_by: str = "erin-engineer", settle: bool = True):
    """Record a decision on ``gate`` as the service would after a run (no SSH); ``settle``:
    move the gate as the service does once the signed report is in (``report_for`` or
    ``report_issue`` add the report)."""
    attempt = gate.runs.count() + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=started_by,
                                      state=GateRun.State.DONE, finished_at=timezone.now())
    verdicts = [evaluation.Verdict(key, verdict, measured, f"{key}: {verdict}")
                for key, (verdict, measured) in figures.items()]
    decision = decision_record(gate_run=gate_run, verdicts=verdicts,
                               criteria=list(gate.criteria.all()), outcome=outcome)
    if settle:
        decision_settle(decision=decision)
    return decision


def report_for(decision, directory, content: bytes = b"%PDF-1.7\n% a stand-in report\n"):
    path = directory / f"{decision.gate.engagement.name}-{decision.gate.code}.pdf"
    path.write_bytes(content)
    return Report.objects.create(
        decision=decision, path=str(path), sha256=hashlib.sha256(content).hexdigest(),
        size_bytes=len(content), signer="Acceptance Service (development)",
        signed_at=timezone.now(), simulated=False)


@pytest.fixture
def stopped_a(engagement_a, tmp_path):
    """ACME's G1 stopped on 23 of 24 drives, with a signed-report row and a BOM of two items
    (one ticked, one open)."""
    engagement_a.bom_items.create(position=1, description="FX100 array", quantity=1,
                                  ticked_by="pat-pm", ticked_at=timezone.now())
    engagement_a.bom_items.create(position=2, description="100 GbE cable", quantity=2)
    decision = decide(engagement_a.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    report = report_for(decision, tmp_path)
    engagement_a.refresh_from_db()
    return engagement_a, decision, report


@pytest.fixture(autouse=True)
def language_reset():
    """A request in Chinese leaves its language active in this thread; later tests (and the
    services' messages they check) start from the default language again."""
    yield
    from django.conf import settings
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)


# --- A real SMTP server on 127.0.0.1 (aiosmtpd) for the mail of invitations and resets ------
import email  # noqa: E402 (this block only)
import socket  # noqa: E402
from email import policy  # noqa: E402

from aiosmtpd.controller import Controller  # noqa: E402


class Mailbox:
    """What the SMTP server received, as ``email.message.EmailMessage`` objects."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        message = email.message_from_bytes(envelope.content, policy=policy.default)
        message["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"

    def to(self, address: str) -> list:
        return [m for m in self.messages if address in m["X-Envelope-To"].split(", ")]

    @staticmethod
    def body(message) -> str:
        return message.get_body(preferencelist=("plain",)).get_content()


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server on a free loopback port; Django's mail goes to it by SMTP."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 10
    mailbox.port = port
    yield mailbox
    controller.stop()
# --- end of the SMTP server ------------------------------------------------------------------
