"""Who may see and do what. Every view and API endpoint asks here, on the object.

Roles (``Membership.role``): project managers and engineers (the vendor's staff) see every
engagement; a customer sees only their organisation's. Superusers may do everything. Someone
with no membership sees nothing. Objects a user may not see answer 404, so their existence is
not revealed.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext_lazy

from acceptance.models import Engagement, Membership

Role = Membership.Role
STAFF_ROLES = (Role.PROJECT_MANAGER, Role.ENGINEER)


def role_of(user) -> str | None:
    """The user's role, ``"superuser"`` for superusers, or None."""
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return "superuser"
    membership = getattr(user, "membership", None)
    try:
        return membership.role if membership else None
    except Membership.DoesNotExist:
        return None


def has_role(user, *roles: str) -> bool:
    """True for a superuser, or a user whose role is one of ``roles``."""
    role = role_of(user)
    return role == "superuser" or (role is not None and role in roles)


def sees_every_engagement(user) -> bool:
    """True for the vendor's staff and superusers: ``engagements_for`` is every engagement."""
    return has_role(user, *STAFF_ROLES)


def engagements_for(user) -> QuerySet[Engagement]:
    """The engagements ``user`` may see."""
    if sees_every_engagement(user):
        return Engagement.objects.all()
    role = role_of(user)
    if role == Role.CUSTOMER:
        return Engagement.objects.filter(customer_id=user.membership.organisation_id)
    return Engagement.objects.none()


def engagement_for(user, name: str) -> Engagement:
    """The engagement ``name`` if ``user`` may see it; Http404 otherwise (also when absent)."""
    try:
        return engagements_for(user).select_related("customer").get(name=name)
    except Engagement.DoesNotExist:
        raise Http404("no such engagement") from None


def can_view(user, engagement: Engagement) -> bool:
    return engagements_for(user).filter(pk=engagement.pk).exists()


ROLE_WORDS = {
    "project_manager": gettext_lazy("project manager"), "engineer": gettext_lazy("engineer"),
    "customer": gettext_lazy("customer"), "superuser": gettext_lazy("administrator"),
}


def roles_context(request) -> dict:
    """Template context: the user's role (``user_role``; in words: ``user_role_text``) and
    what the navigation may offer."""
    user = request.user
    role = role_of(user)
    return {
        "user_role": role,
        "user_role_text": ROLE_WORDS.get(role, role) if role else "",
        "is_project_manager": has_role(user, Role.PROJECT_MANAGER),
        "is_engineer": has_role(user, Role.ENGINEER),
        "is_customer": role_of(user) == Role.CUSTOMER,
    }
