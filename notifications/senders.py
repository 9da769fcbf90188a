"""The one module of this room that talks to the outside: e-mail through Django's mail API,
webhook POSTs through requests. Tests point both at real servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac

import requests
from django.conf import settings
from django.core.mail import send_mail


def email_send(*, to: str, subject: str, body: str) -> None:
    """Send one e-mail; raises what the mail backend raises (SMTPException, OSError)."""
    send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to], fail_silently=False)


def signature(secret: str, body: bytes) -> str:
    """The ``X-Acceptance-Signature`` value: ``sha256=`` + hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_post(*, url: str, body: bytes, secret: str, delivery_uuid: str) -> int:
    """POST ``body`` (JSON) signed with ``secret``; returns the status code. Redirects are not
    followed (a 3xx is an answer, not a delivery). Raises requests.RequestException on
    connection errors and timeouts."""
    response = requests.post(
        url, data=body, allow_redirects=False, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S,
        headers={"Content-Type": "application/json",
                 "User-Agent": "acceptance-service-notifications",
                 "X-Acceptance-Signature": signature(secret, body),
                 "X-Acceptance-Delivery": delivery_uuid})
    response.close()
    return response.status_code
