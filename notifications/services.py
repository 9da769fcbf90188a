"""Notices: who gets one, the deliveries made for it, each attempt, the periodic sweep, and the
settings people change (subscriptions, the webhook, mutes, calendar feeds).

An event (``acceptance.events``) reaches ``notice_send`` through the Celery task
``notifications.notice_send``; it writes one ``Delivery`` per e-mail recipient and one for the
webhook, then rings ``notifications.delivery_send`` for each. A failed attempt is recorded and
tried again with exponential back-off up to ``NOTIFY_MAX_ATTEMPTS``; nothing here ever touches
the decision or run that caused the notice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from datetime import date, datetime, timedelta
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone, translation

from acceptance.crypto import CredentialDecryptError
from acceptance.models import AuditEntry, Engagement, Membership
from acceptance.permissions import engagements_for
from gates.models import Gate
from notifications import senders
from notifications.kinds import KINDS, PARTY_ROLES, ROLES
from notifications.messages import BUILDERS, Message
from notifications.models import CalendarFeed, Delivery, Mute, Notice, Subscription, Webhook
from runners import doorbell
from runners.models import GateRun, NodeJob

logger = logging.getLogger(__name__)
DUE_SOON_DAYS = 3  # issue 20: "a gate due in three days"


class SettingsRefused(ValueError):
    """A settings change refused; the message names the field."""


# --- who gets what ---------------------------------------------------------------------------


def subscribed_roles(engagement: Engagement, kind: str) -> set[str]:
    """The roles whose people get e-mails of ``kind`` on ``engagement``."""
    roles = set(KINDS[kind].default_roles)
    for row in Subscription.objects.filter(engagement=engagement, kind=kind):
        (roles.add if row.email else roles.discard)(row.role)
    return roles


def subscription_grid(engagement: Engagement) -> dict[str, set[str]]:
    """kind → roles getting it, for the settings page."""
    return {kind: subscribed_roles(engagement, kind) for kind in KINDS}


def is_muted(user, engagement: Engagement, kind: str) -> bool:
    return Mute.objects.filter(user=user, engagement=engagement).filter(
        Q(kind="") | Q(kind=kind)).exists()


def email_recipients(message: Message) -> list[str]:
    """E-mail addresses for ``message``: active people of the subscribed roles who may see the
    engagement, have an address and have not muted it (or this kind). A sign-off notice goes
    only to the party still to sign."""
    roles = subscribed_roles(message.engagement, message.kind)
    if message.kind == "signoff_waiting":
        roles &= {PARTY_ROLES[p] for p in message.parties}
    addresses = []
    for membership in Membership.objects.select_related("user").filter(
            role__in=roles, user__is_active=True).exclude(user__email="").order_by("user_id"):
        user = membership.user
        if not engagements_for(user).filter(pk=message.engagement.pk).exists():
            continue
        if is_muted(user, message.engagement, message.kind):
            continue
        if user.email not in addresses:
            addresses.append(user.email)
    return addresses


def _webhook_body(message: Message, delivery: Delivery) -> str:
    return json.dumps({
        "event": message.kind, "delivery": str(delivery.uuid),
        "engagement": message.engagement.name, "subject": message.subject,
        "text": message.text, "url": message.url, "occurred_at": timezone.now().isoformat(),
        "data": message.data,
    }, sort_keys=True, separators=(",", ":"))


@transaction.atomic
def notice_send(*, kind: str, **ids) -> list[int]:
    """Build the notice of ``kind`` from ``ids`` and make its deliveries (e-mail to each
    recipient, the webhook when it takes this kind); each is sent after commit. Returns the
    deliveries' ids."""
    with translation.override("en"):  # the webhook's words stay English for its readers
        message = BUILDERS[kind](**ids)
    engagement = message.engagement
    with translation.override(engagement.report_language):  # the mail, in the report's
        mail = BUILDERS[kind](**ids)
    made = []
    email_body = f"{mail.text}\n\n{mail.url}\n"
    for address in email_recipients(message):
        made.append(Delivery.objects.create(
            engagement=engagement, event=kind, channel=Delivery.Channel.EMAIL,
            recipient=address, subject=mail.subject, body=email_body))
    hook = Webhook.objects.filter(engagement=engagement, active=True).first()
    if hook is not None and kind in hook.kinds:
        delivery = Delivery(engagement=engagement, event=kind, channel=Delivery.Channel.WEBHOOK,
                            recipient=hook.url, subject=message.subject)
        delivery.body = _webhook_body(message, delivery)
        delivery.save()
        made.append(delivery)
    ids_made = [d.id for d in made]
    for delivery_id in ids_made:
        transaction.on_commit(
            lambda d=delivery_id: doorbell.ring("notifications.delivery_send", delivery_id=d),
            robust=True)
    return ids_made


# --- one attempt -----------------------------------------------------------------------------


def backoff_s(retries: int) -> float:
    """Seconds before attempt ``retries + 2``: base, 2 × base, 4 × base …"""
    return settings.NOTIFY_RETRY_BASE_S * (2 ** retries)


def _send(delivery: Delivery) -> tuple[int | None, str]:
    """One attempt: (status code, error text); the error is empty on success."""
    if delivery.channel == Delivery.Channel.EMAIL:
        try:
            senders.email_send(to=delivery.recipient, subject=delivery.subject,
                               body=delivery.body)
        except OSError as error:  # smtplib.SMTPException is an OSError
            return None, f"{type(error).__name__}: {error}"
        return None, ""
    hook = Webhook.objects.filter(engagement_id=delivery.engagement_id).first()
    if hook is None or hook.url != delivery.recipient:
        return None, "the engagement's webhook was changed or removed after this notice"
    try:
        secret = hook.secret()
    except CredentialDecryptError as error:
        return None, str(error)
    try:
        code = senders.webhook_post(url=delivery.recipient, body=delivery.body.encode(),
                                    secret=secret, delivery_uuid=str(delivery.uuid))
    except requests.RequestException as error:
        return None, f"{type(error).__name__}: {error}"[:1000]
    if not 200 <= code < 300:
        return code, f"the receiver answered HTTP {code}"
    return code, ""


def delivery_attempt(*, delivery_id: int) -> str | None:
    """Claim and attempt ``delivery_id`` once; record the answer. Returns the new status (sent,
    retrying, failed), or None when it was not waiting for an attempt (a duplicate task)."""
    now = timezone.now()
    if not Delivery.objects.filter(
            id=delivery_id,
            status__in=[Delivery.Status.PENDING, Delivery.Status.RETRYING]).update(
            status=Delivery.Status.SENDING, attempts=F("attempts") + 1, last_attempt_at=now):
        return None
    delivery = Delivery.objects.get(id=delivery_id)
    code, error = _send(delivery)
    delivery.status_code, delivery.error = code, error
    if not error:
        delivery.status, delivery.sent_at = Delivery.Status.SENT, timezone.now()
    elif delivery.attempts < settings.NOTIFY_MAX_ATTEMPTS:
        delivery.status = Delivery.Status.RETRYING
    else:
        delivery.status = Delivery.Status.FAILED
    if error:
        logger.warning("notification %s (%s to %s) attempt %d: %s", delivery.uuid,
                       delivery.event, delivery.channel, delivery.attempts, error)
    delivery.save(update_fields=["status", "status_code", "error", "sent_at"])
    return delivery.status


# --- the periodic sweep ----------------------------------------------------------------------


def _once(key: str, kind: str, **ids) -> bool:
    """Send the notice named ``key`` unless it was sent before."""
    with transaction.atomic():
        _, created = Notice.objects.get_or_create(key=key)
        if created:
            notice_send(kind=kind, **ids)
    return created


def schedule_sweep(*, now: datetime | None = None) -> list[str]:
    """Send what time alone makes due, each once: gates due within three days or overdue
    (per gate and due date), runs whose node jobs no worker picked up for
    ``NOTIFY_QUEUED_TOO_LONG_SECONDS``; and send again deliveries a dead worker left
    half-attempted. Returns the keys of the notices sent."""
    now = now or timezone.now()
    today = timezone.localdate(now)
    sent = []
    for gate in Gate.objects.select_related("engagement").filter(
            engagement__state=Engagement.State.ACTIVE,
            state__in=[Gate.State.PENDING, Gate.State.REVIEW]):
        due: date = gate.due_date
        days = (due - today).days
        kind = ("gate_due_soon" if 0 <= days <= DUE_SOON_DAYS
                else "gate_overdue" if days < 0 else None)
        if kind and _once(f"{kind}:{gate.id}:{due.isoformat()}", kind, gate_id=gate.id,
                          due=due.isoformat()):
            sent.append(f"{kind}:{gate.id}:{due.isoformat()}")
    cutoff = now - timedelta(seconds=settings.NOTIFY_QUEUED_TOO_LONG_SECONDS)
    waiting = (NodeJob.objects.filter(state=NodeJob.State.QUEUED, dispatched_at__lt=cutoff)
               .values_list("gate_run_id", "dispatched_at"))
    queued_runs = GateRun.objects.filter(state=GateRun.State.QUEUED, created_at__lt=cutoff)
    oldest: dict[int, datetime] = {}
    for run_id, since in [*waiting, *queued_runs.values_list("id", "created_at")]:
        oldest[run_id] = min(since, oldest.get(run_id, since))
    for run_id, since in sorted(oldest.items()):
        key = f"run_queued_too_long:{run_id}"
        if _once(key, "run_queued_too_long", gate_run_id=run_id,
                 waited_s=(now - since).total_seconds()):
            sent.append(key)
    stale = now - timedelta(seconds=settings.NOTIFY_WEBHOOK_TIMEOUT_S * 10 + 60)
    for delivery_id in Delivery.objects.filter(
            status=Delivery.Status.SENDING, last_attempt_at__lt=stale).values_list(
            "id", flat=True):
        if Delivery.objects.filter(id=delivery_id, status=Delivery.Status.SENDING).update(
                status=Delivery.Status.RETRYING):
            transaction.on_commit(lambda d=delivery_id: doorbell.ring(
                "notifications.delivery_send", delivery_id=d), robust=True)
    return sent


# --- settings people change ------------------------------------------------------------------


@transaction.atomic
def subscriptions_save(*, engagement: Engagement, chosen: set[tuple[str, str]]) -> None:
    """Store who gets what: ``chosen`` is the set of (kind, role) that get e-mails; a row is
    kept only where it differs from the kind's default."""
    Subscription.objects.filter(engagement=engagement).delete()
    for kind, spec in KINDS.items():
        for role in ROLES:
            wanted = (kind, role) in chosen
            if wanted != (role in spec.default_roles):
                Subscription.objects.create(engagement=engagement, role=role, kind=kind,
                                            email=wanted)


def webhook_save(*, engagement: Engagement, url: str, secret: str, kinds: list[str],
                 actor: str) -> Webhook:
    """Set the engagement's webhook. An empty ``secret`` keeps the stored one (the secret is
    never shown again); a new webhook needs one. Raises SettingsRefused naming the field."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SettingsRefused(f"kinds: unknown event kind {unknown[0]!r}")
    hook = Webhook.objects.filter(engagement=engagement).first()
    if hook is None and not secret:
        raise SettingsRefused("secret: a new webhook needs a secret (at least 16 characters)")
    if secret and len(secret) < 16:
        raise SettingsRefused("secret: at least 16 characters")
    hook = hook or Webhook(engagement=engagement)
    hook.url, hook.kinds, hook.updated_by, hook.active = url, list(kinds), actor, True
    if secret:
        hook.set_secret(secret)
    with transaction.atomic():
        hook.save()
        AuditEntry.objects.create(
            engagement=engagement, actor=actor, action="webhook_set",
            reason="notification webhook set",
            details={"host": urlsplit(url).hostname, "kinds": list(kinds),
                     "secret_changed": bool(secret)})  # never the secret, nor the URL's path
    return hook


@transaction.atomic
def webhook_remove(*, engagement: Engagement, actor: str) -> bool:
    """Remove the engagement's webhook (its deliveries stay recorded)."""
    removed, _ = Webhook.objects.filter(engagement=engagement).delete()
    if removed:
        AuditEntry.objects.create(engagement=engagement, actor=actor, action="webhook_remove",
                                  reason="notification webhook removed", details={})
    return bool(removed)


def mute_set(*, user, engagement: Engagement, kind: str, muted: bool) -> None:
    """Mute (or unmute) ``engagement`` for ``user``: every kind when ``kind`` is empty."""
    if kind and kind not in KINDS:
        raise SettingsRefused(f"kind: unknown event kind {kind!r}")
    if muted:
        Mute.objects.get_or_create(user=user, engagement=engagement, kind=kind)
    else:
        Mute.objects.filter(user=user, engagement=engagement, kind=kind).delete()


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def calendar_feed_renew(*, user) -> str:
    """A new secret calendar token for ``user`` (returned once, stored hashed); any earlier
    one is revoked."""
    calendar_feed_revoke(user=user)
    token = secrets.token_urlsafe(32)
    CalendarFeed.objects.create(user=user, token_sha256=token_sha256(token))
    return token


def calendar_feed_revoke(*, user) -> int:
    return CalendarFeed.objects.filter(user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now())


def calendar_feed_user(token: str):
    """The active person behind ``token``, or None (unknown, revoked, inactive)."""
    feed = CalendarFeed.objects.select_related("user").filter(
        token_sha256=token_sha256(token), revoked_at__isnull=True).first()
    if feed is None or not feed.user.is_active:
        return None
    return get_user_model().objects.select_related("membership").get(pk=feed.user_id)
