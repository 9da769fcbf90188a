"""REST API tokens, stored as their sha256 only.

A token is shown once, when it is made (``api_token_create`` returns it); the database keeps its
sha256, the first characters (so a person can tell two tokens apart), a name, when it was made
and last used, when it expires and when it was revoked. A stolen database (or the admin's
listing) gives nobody a working token. django-rest-knox stores a digest too, but has no name or
last-used time and brings its own login views; this is the small part of it we need.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

PREFIX_LENGTH = 8
# Seconds between two writes of last_used_at for one token (a busy client would otherwise
# write the row on every request).
LAST_USED_RESOLUTION_S = 60


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """One named API token of one user (``Authorization: Token KEY``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def state(self) -> str:
        """active, expired or revoked."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"

    def used_now(self) -> None:
        now = timezone.now()
        if (self.last_used_at is None
                or (now - self.last_used_at).total_seconds() >= LAST_USED_RESOLUTION_S):
            self.last_used_at = now
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)


def api_token_create(*, user, name: str, days: int | None = None) -> tuple[ApiToken, str]:
    """Make a token for ``user``; ``days`` until it expires (``None``: the setting
    ``API_TOKEN_EXPIRY_DAYS``; 0: never). Returns the row and the raw token (shown once)."""
    if days is None:
        days = settings.API_TOKEN_EXPIRY_DAYS
    raw = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, digest=token_digest(raw), prefix=raw[:PREFIX_LENGTH],
        expires_at=timezone.now() + timedelta(days=days) if days else None)
    return token, raw


def api_token_revoke(*, token: ApiToken) -> bool:
    """Revoke ``token`` (kept for the record); False when it was revoked already."""
    return bool(ApiToken.objects.filter(pk=token.pk, revoked_at=None)
                .update(revoked_at=timezone.now()))


def api_token_find(raw: str) -> ApiToken | None:
    """The token whose raw key is ``raw`` (any state), or None."""
    return ApiToken.objects.select_related("user").filter(digest=token_digest(raw)).first()
