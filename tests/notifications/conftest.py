"""Real parts for the notification tests: an SMTP server (aiosmtpd) and a webhook receiver
(http.server) on 127.0.0.1, each on a free port and stopped when the test ends; people with
e-mail addresses; a helper recording a gate decision with its after-commit events run."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from acceptance.models import Membership
from gates.services import engagement_create
from tests.web.conftest import G1_MISSING_DRIVE, decide, make_user

WEBHOOK_SECRET = "a-webhook-secret-of-32-characters"


class _Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append({"to": list(envelope.rcpt_tos),
                              "message": message_from_bytes(envelope.content)})
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp_server(settings):
    """A real SMTP server on 127.0.0.1; Django's SMTP backend pointed at it. Yields the list
    of received mails ({"to", "message"})."""
    inbox = _Inbox()
    port = _free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.DEFAULT_FROM_EMAIL = "acceptance@vendor.example"
    yield inbox.messages
    controller.stop()


@dataclass
class Receiver:
    url: str
    status: int = 200
    posts: list[dict] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)  # answered first, in order, then status


@pytest.fixture
def webhook_receiver():
    """A real HTTP server on 127.0.0.1 that records each POST (headers, body) and answers
    ``receiver.status``."""
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            receiver.posts.append({"headers": dict(self.headers), "body": body,
                                   "path": self.path})
            self.send_response(receiver.answers.pop(0) if receiver.answers
                               else receiver.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.NOTIFY_RETRY_BASE_S = 0.01
    settings.NOTIFY_WEBHOOK_TIMEOUT_S = 3.0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.NOTIFICATIONS_BASE_URL = "https://acceptance.vendor.example"


def person(username: str, role: str, organisation=None):
    user = make_user(username, role, organisation)
    user.email = f"{username}@example.com"
    user.save(update_fields=["email"])
    return user


@pytest.fixture
def acme(db):
    return engagement_create(name="acme-prod", customer="Acme",
                             start_date=timezone.localdate())


@pytest.fixture
def globex(db):
    return engagement_create(name="globex-prod", customer="Globex",
                             start_date=timezone.localdate())


@pytest.fixture
def pm(db):
    return person("pat-pm", Membership.Role.PROJECT_MANAGER)


@pytest.fixture
def engineer(db):
    return person("erin-engineer", Membership.Role.ENGINEER)


@pytest.fixture
def customer(acme):
    return person("carla-acme", Membership.Role.CUSTOMER, acme.customer)


@pytest.fixture
def other_customer(globex):
    return person("bob-globex", Membership.Role.CUSTOMER, globex.customer)


def stop_g1(engagement, capture):
    """Record G1 stopped (23 of 24 drives) and run what was waiting for the commit."""
    with capture(execute=True):
        return decide(engagement.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")


def body_of(post: dict) -> dict:
    return json.loads(post["body"])
