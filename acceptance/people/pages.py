"""The People page of an engagement, as plain rows: its members and its invitations."""

from __future__ import annotations

from django.urls import reverse
from django.utils.translation import pgettext_lazy

from acceptance.models import Engagement, Invitation, Membership
from acceptance.people.services import engagement_members, role_word

ROLE_ORDER = {Membership.Role.PROJECT_MANAGER: 0, Membership.Role.ENGINEER: 1,
              Membership.Role.CUSTOMER: 2}
STATUS_WORDS = {
    Invitation.Status.PENDING: pgettext_lazy("invitation", "pending"),
    Invitation.Status.USED: pgettext_lazy("invitation", "accepted"),
    Invitation.Status.REVOKED: pgettext_lazy("invitation", "revoked"),
    Invitation.Status.EXPIRED: pgettext_lazy("invitation", "expired"),
}


def _member_row(engagement: Engagement, membership: Membership) -> dict:
    user = membership.user
    return {
        "id": user.pk, "name": user.get_username(), "full_name": user.get_full_name(),
        "email": user.email, "role": membership.role,
        "role_word": role_word(membership.role, engagement),
        "staff": membership.role != Membership.Role.CUSTOMER,
        "active": user.is_active, "last_login": user.last_login,
        "role_url": reverse("people-role", args=[engagement.name, user.pk]),
        "remove_url": reverse("people-remove", args=[engagement.name, user.pk]),
    }


def _invitation_row(engagement: Engagement, invitation: Invitation, now) -> dict:
    status = invitation.status(now)
    return {
        "id": invitation.pk, "email": invitation.email,
        "role_word": role_word(invitation.role, engagement),
        "invited_by": invitation.invited_by, "sent": invitation.created_at,
        "expires": invitation.expires_at, "status": status, "status_word": STATUS_WORDS[status],
        "pending": status == Invitation.Status.PENDING,
        "closed_at": invitation.used_at or invitation.revoked_at,
        "revoke_url": reverse("invitation-revoke", args=[engagement.name, invitation.pk]),
    }


def people_page(engagement: Engagement, *, can_manage: bool, now) -> dict:
    members = sorted(engagement_members(engagement),
                     key=lambda m: (ROLE_ORDER.get(m.role, 9), m.user.get_username()))
    return {
        "engagement": engagement, "can_manage": can_manage,
        "members": [_member_row(engagement, m) for m in members],
        "invitations": [_invitation_row(engagement, i, now)
                        for i in engagement.invitations.all()],
        "back_url": reverse("engagement-detail", args=[engagement.name]),
    }
