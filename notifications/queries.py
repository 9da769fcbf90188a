"""Read-only figures and lists of the notifications room (pages, operations' metrics)."""

from __future__ import annotations

from django.db.models import QuerySet

from acceptance.models import Engagement
from notifications.models import Delivery


def notification_failures_count() -> int:
    """Deliveries that failed for good (every attempt used): for operations' metrics."""
    return Delivery.objects.filter(status=Delivery.Status.FAILED).count()


def deliveries_of(engagement: Engagement, *, limit: int = 200) -> QuerySet[Delivery]:
    """The engagement's latest deliveries, newest first."""
    return Delivery.objects.filter(engagement=engagement).order_by("-created_at", "-id")[:limit]
