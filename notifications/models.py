"""Who is told what, and the record of every notice sent: webhooks, subscriptions, mutes,
deliveries; and the calendar feeds.

A ``Delivery`` is one notice to one recipient through one channel (an e-mail address or the
engagement's webhook) with the exact body sent, every attempt counted and the last answer
(status code or error) kept. A ``Notice`` makes a periodic notice (due soon, overdue, queued
too long) happen once per subject and date, however often the sweep runs.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from acceptance import crypto
from acceptance.models import Engagement
from notifications.kinds import KINDS, ROLES

KIND_CHOICES = [(k.name, k.words) for k in KINDS.values()]
ROLE_CHOICES = [(r, r.replace("_", " ")) for r in ROLES]


class Webhook(models.Model):
    """An engagement's webhook: JSON POSTs signed with HMAC-SHA256 of the body under the secret.
    The secret is stored encrypted (``acceptance.crypto``) and never shown again after saving."""

    engagement = models.OneToOneField(Engagement, on_delete=models.CASCADE,
                                      related_name="webhook")
    url = models.URLField(max_length=500)
    secret_encrypted = models.BinaryField()
    kinds = models.JSONField(default=list, help_text="the event kinds posted to it")
    active = models.BooleanField(default=True)
    updated_by = models.CharField(max_length=150)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"webhook of {self.engagement.name}"

    __repr__ = __str__

    def set_secret(self, secret: str) -> None:
        self.secret_encrypted = crypto.encrypt(secret)

    def secret(self) -> str:
        return crypto.decrypt(self.secret_encrypted)


class Subscription(models.Model):
    """Whether people of ``role`` get e-mails of ``kind`` on this engagement (overrides the
    kind's default)."""

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE,
                                   related_name="subscriptions")
    role = models.CharField(max_length=16, choices=ROLE_CHOICES)
    kind = models.CharField(max_length=32, choices=KIND_CHOICES)
    email = models.BooleanField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["engagement", "role", "kind"],
                                               name="subscription_unique")]

    def __str__(self) -> str:
        return f"{self.engagement.name} {self.role} {self.kind}: {self.email}"


class Mute(models.Model):
    """A person's own silence: an engagement entirely (``kind`` empty) or one kind of it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notification_mutes")
    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="mutes")
    kind = models.CharField(max_length=32, blank=True, choices=KIND_CHOICES)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "engagement", "kind"],
                                               name="mute_unique")]

    def __str__(self) -> str:
        return f"{self.user} mutes {self.engagement.name} {self.kind or 'everything'}"


class Delivery(models.Model):
    """One notice to one recipient through one channel, with every attempt counted."""

    class Channel(models.TextChoices):
        EMAIL = "email", "e-mail"
        WEBHOOK = "webhook", "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        RETRYING = "retrying"
        SENT = "sent"
        FAILED = "failed"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE,
                                   related_name="deliveries")
    event = models.CharField(max_length=32, choices=KIND_CHOICES)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    recipient = models.CharField(max_length=500, help_text="e-mail address or webhook URL")
    subject = models.CharField(max_length=300)
    body = models.TextField(help_text="the e-mail text, or the exact JSON body posted")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.recipient} by {self.channel}: {self.status}"


class Notice(models.Model):
    """A periodic notice that has been sent: ``key`` names subject and date
    (``gate_due_soon:12:2026-12-05``), so the sweep sends each one once."""

    key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class CalendarFeed(models.Model):
    """A person's secret calendar URL. Only the token's sha256 is stored; revoked feeds answer
    404. A new token revokes the old one."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="calendar_feeds")
    token_sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"calendar feed of {self.user} ({'revoked' if self.revoked_at else 'active'})"


class CalendarEntry(models.Model):
    """What a feed last said about one event (by UID): a change of its content raises its
    SEQUENCE and LAST-MODIFIED, so calendar clients replace the old entry."""

    uid = models.CharField(max_length=200, unique=True)
    fingerprint = models.CharField(max_length=64)
    sequence = models.PositiveIntegerField(default=0)
    modified_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "calendar entries"

    def __str__(self) -> str:
        return f"{self.uid} #{self.sequence}"
