"""Who works on an engagement, and how people get in: invitations, role changes, removal.

Roles are the service's, one ``Membership`` per person: project managers and engineers (the
vendor's staff) work on every engagement; a customer belongs to one organisation (the
membership's ``organisation``) and sees only its engagements. An engagement's people are
therefore every staff member and the customers of its organisation, and a person becomes a
customer of an organisation by being invited as a customer from one of its engagements (or added
with ``manage.py member_add``). A customer role is never given to someone of another
organisation, nor to staff (their organisation is none).

Every change is recorded in the engagement's audit trail with the actor. A refusal raises
``PeopleRefused`` (a ValueError) with a one-line message naming the field, and changes nothing.
Mail goes through Django's mail API inside the transaction: a mail that cannot be sent undoes
the change it announces.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q, QuerySet
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from acceptance.models import AuditEntry, Engagement, Invitation, Membership
from acceptance.permissions import ROLE_WORDS
from acceptance.tokens import ApiToken

Role = Membership.Role
STAFF = (Role.PROJECT_MANAGER, Role.ENGINEER)
USERNAME_MAX = 150  # auth.User.username: an invited person's user name is their address


class PeopleRefused(ValueError):
    """Refused; nothing was changed. The message is one line, for the person who asked."""


class InvitationClosed(PeopleRefused):
    """The invitation was used, revoked or has expired (``status``)."""

    def __init__(self, invitation: Invitation, status: str):
        super().__init__(_("This invitation is %(status)s.") % {"status": status})
        self.invitation = invitation
        self.status = status


@dataclass(frozen=True)
class InviteOutcome:
    """``invitation`` for a new person (the link was mailed), ``membership`` for someone who has
    an account already (access given at once, a notice mailed)."""

    email: str
    invitation: Invitation | None = None
    membership: Membership | None = None


def role_word(role: str, engagement: Engagement | None = None) -> str:
    if role == Role.CUSTOMER and engagement is not None:
        return _("customer of %(organisation)s") % {"organisation": engagement.customer.name}
    return str(ROLE_WORDS.get(role, role))


def email_normalise(email: str) -> str:
    """The address, trimmed and in lower case; PeopleRefused (naming ``email``) if it is none."""
    value = (email or "").strip().lower()
    try:
        validate_email(value)
    except ValidationError:
        raise PeopleRefused(_("email: %(value)r is not an e-mail address") % {
            "value": email}) from None
    if len(value) > USERNAME_MAX:
        raise PeopleRefused(_("email: at most %(n)d characters") % {"n": USERNAME_MAX})
    return value


def role_check(role: str) -> str:
    if role not in Role.values:
        raise PeopleRefused(_("role: %(role)r is not a role; use one of %(roles)s") % {
            "role": role, "roles": ", ".join(Role.values)})
    return role


def engagement_members(engagement: Engagement) -> QuerySet[Membership]:
    """The memberships of the people who work on ``engagement``: every project manager and
    engineer, and the customers of its organisation."""
    return (Membership.objects
            .filter(Q(role__in=STAFF)
                    | Q(role=Role.CUSTOMER, organisation_id=engagement.customer_id))
            .select_related("user", "organisation"))


def engagement_member(engagement: Engagement, user_id: int) -> Membership | None:
    return engagement_members(engagement).filter(user_id=user_id).first()


def invitation_by_token(token: str) -> Invitation | None:
    """The invitation whose link carries ``token`` (only its sha256 is stored), or None."""
    if not token:
        return None
    return (Invitation.objects.select_related("engagement", "engagement__customer")
            .filter(token_sha256=Invitation.token_hash(token)).first())


def _user_with_email(email: str) -> User | None:
    users = list(User.objects.filter(Q(email__iexact=email) | Q(username__iexact=email))[:2])
    if len(users) > 1:
        raise PeopleRefused(_("email: several accounts have the address %(email)s; settle "
                              "which one is theirs in /admin/ first") % {"email": email})
    return users[0] if users else None


def _pending_invitation(email: str) -> Invitation | None:
    return (Invitation.objects.select_related("engagement")
            .filter(email=email, used_at__isnull=True, revoked_at__isnull=True,
                    expires_at__gt=timezone.now()).first())


def _audit(engagement: Engagement, actor: str, action: str, reason: str, **details) -> None:
    AuditEntry.objects.create(engagement=engagement, actor=actor, action=action, reason=reason,
                              details=details)


def _mail(*, engagement: Engagement, to: str, role: str, template: str, context: dict) -> None:
    """Send ``registration/{template}_subject.txt`` / ``_email.txt`` in the engagement's report
    language; PeopleRefused when it cannot be sent (the caller's transaction is undone)."""
    with translation.override(engagement.report_language):
        context = {**context, "engagement": engagement, "role": role_word(role, engagement)}
        subject = " ".join(render_to_string(f"registration/{template}_subject.txt",
                                            context).split())
        body = render_to_string(f"registration/{template}_email.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to])
    except OSError as error:  # smtplib's errors are OSErrors
        raise PeopleRefused(_("the mail to %(to)s could not be sent (%(error)s); nothing was "
                              "changed") % {"to": to, "error": error}) from None


def _lock_project_managers() -> None:
    """Lock the project managers' rows (in one order) so that two of them cannot demote each
    other at once and leave none."""
    list(Membership.objects.select_for_update().filter(role=Role.PROJECT_MANAGER)
         .order_by("pk").values_list("pk", flat=True))


def _locked_membership(pk: int) -> Membership:
    # "of self": Postgres locks no row of a nullable outer join (the organisation).
    return (Membership.objects.select_for_update(of=("self",))
            .select_related("user", "organisation").get(pk=pk))


def _last_project_manager_check(membership: Membership) -> None:
    others = (Membership.objects.filter(role=Role.PROJECT_MANAGER, user__is_active=True)
              .exclude(pk=membership.pk))
    if membership.role == Role.PROJECT_MANAGER and not others.exists():
        raise PeopleRefused(_("%(who)s is the last project manager: make someone else project "
                              "manager first") % {"who": membership.user.get_username()})


def _membership_add(*, engagement: Engagement, user: User, role: str, actor: str,
                    how: str) -> Membership:
    who = user.get_username()
    if not user.is_active:
        raise PeopleRefused(_("email: the account %(who)s is inactive (see /admin/)") % {
            "who": who})
    existing = Membership.objects.filter(user=user).select_related("organisation").first()
    if existing is not None:
        where = (f" ({existing.organisation.name})"
                 if existing.role == Role.CUSTOMER and existing.organisation else "")
        raise PeopleRefused(_("email: %(who)s already has access as %(role)s%(where)s; change "
                              "their role on the People page") % {
            "who": who, "role": role_word(existing.role), "where": where})
    organisation = engagement.customer if role == Role.CUSTOMER else None
    membership = Membership.objects.create(user=user, role=role, organisation=organisation)
    _audit(engagement, actor, "member added",
           f"{who} added as {role_word(role, engagement)} ({how})",
           user=who, role=role, organisation=organisation.name if organisation else None)
    return membership


@transaction.atomic
def person_invite(*, engagement: Engagement, email: str, role: str, actor: str,
                  site_url: str) -> InviteOutcome:
    """Invite ``email`` to the service as ``role`` from ``engagement``'s People page.

    A new address gets an invitation with a one-time link (``site_url`` + its path) that
    expires after ``INVITATION_EXPIRY_DAYS``; an address that has an account without a role gets
    the membership at once and a notice. Refused: a bad address or role, a person who has a
    role already, a pending invitation to the same address.
    """
    email, role = email_normalise(email), role_check(role)
    context: dict = {"actor": actor}
    user = _user_with_email(email)
    if user is not None:
        membership = _membership_add(engagement=engagement, user=user, role=role, actor=actor,
                                     how="invited; the account existed")
        context.update(user=user, link=site_url + reverse("engagement-detail",
                                                           args=[engagement.name]))
        _mail(engagement=engagement, to=user.email or email, role=role,
              template="membership_notice", context=context)
        return InviteOutcome(email=email, membership=membership)
    pending = _pending_invitation(email)
    if pending is not None:
        raise PeopleRefused(_("email: an invitation to %(email)s is pending (from %(name)s, "
                              "until %(until)s); revoke it to send a new one") % {
            "email": email, "name": pending.engagement.name,
            "until": f"{pending.expires_at:%Y-%m-%d %H:%M} UTC"})
    token = secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(days=settings.INVITATION_EXPIRY_DAYS)
    invitation = Invitation.objects.create(
        engagement=engagement, email=email, role=role, invited_by=actor,
        token_sha256=Invitation.token_hash(token), expires_at=expires_at)
    _audit(engagement, actor, "invitation sent",
           f"invited {email} as {role_word(role, engagement)}",
           invitation=invitation.pk, email=email, role=role,
           expires_at=expires_at.isoformat(timespec="seconds"))
    context.update(link=site_url + reverse("invitation-open", args=[token]),
                   expires_at=expires_at)
    _mail(engagement=engagement, to=email, role=role, template="invitation", context=context)
    return InviteOutcome(email=email, invitation=invitation)


@transaction.atomic
def invitation_accept(*, invitation: Invitation, password: str) -> User:
    """Create the invitee's account with ``password`` (already validated) and their membership,
    and use the invitation up. InvitationClosed when it was used, revoked or has expired."""
    invitation = (Invitation.objects.select_for_update(of=("self",))
                  .select_related("engagement", "engagement__customer").get(pk=invitation.pk))
    now = timezone.now()
    status = invitation.status(now)
    if status != Invitation.Status.PENDING:
        raise InvitationClosed(invitation, status)
    if _user_with_email(invitation.email) is not None:
        raise PeopleRefused(_("an account with the address %(email)s exists already: log in, "
                              "or reset its password") % {"email": invitation.email})
    engagement = invitation.engagement
    user = User(username=invitation.email, email=invitation.email)
    user.set_password(password)
    user.save()
    Membership.objects.create(
        user=user, role=invitation.role,
        organisation=engagement.customer if invitation.role == Role.CUSTOMER else None)
    invitation.used_at, invitation.used_by = now, user
    invitation.save(update_fields=["used_at", "used_by"])
    _audit(engagement, user.get_username(), "invitation accepted",
           f"{user.get_username()} joined as {role_word(invitation.role, engagement)}",
           invitation=invitation.pk, invited_by=invitation.invited_by, role=invitation.role)
    return user


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, actor: str) -> Invitation:
    """Withdraw a pending invitation: its link answers "revoked" from now on."""
    invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
    status = invitation.status(timezone.now())
    if status != Invitation.Status.PENDING:
        raise PeopleRefused(_("the invitation of %(email)s is %(status)s: there is nothing to "
                              "revoke") % {"email": invitation.email, "status": status})
    invitation.revoked_at, invitation.revoked_by = timezone.now(), actor
    invitation.save(update_fields=["revoked_at", "revoked_by"])
    _audit(invitation.engagement, actor, "invitation revoked",
           f"revoked the invitation of {invitation.email}",
           invitation=invitation.pk, email=invitation.email, role=invitation.role)
    return invitation


@transaction.atomic
def member_role_change(*, engagement: Engagement, membership: Membership, role: str,
                       actor: str) -> Membership:
    """Give ``membership``'s person ``role``. Refused: the same role, a customer role for
    someone not of the engagement's organisation, the last project manager's demotion."""
    role = role_check(role)
    _lock_project_managers()
    membership = _locked_membership(membership.pk)
    who, old = membership.user.get_username(), membership.role
    if role == old:
        raise PeopleRefused(_("role: %(who)s is %(role)s already") % {
            "who": who, "role": role_word(role, engagement)})
    if role == Role.CUSTOMER and membership.organisation_id != engagement.customer_id:
        raise PeopleRefused(_("role: a customer role is given only to a person of %(org)s, and "
                              "%(who)s is not one; remove their access and invite them as a "
                              "customer") % {"org": engagement.customer.name, "who": who})
    _last_project_manager_check(membership)
    membership.role = role
    membership.save(update_fields=["role"])
    _audit(engagement, actor, "role changed",
           f"{who}: {role_word(old, engagement)} → {role_word(role, engagement)}",
           user=who, old_role=old, new_role=role)
    return membership


@transaction.atomic
def member_remove(*, engagement: Engagement, membership: Membership, actor: str) -> None:
    """Take ``membership``'s person's role away: they see nothing any more (a staff member loses
    every engagement). The account stays, so the audit trail keeps its names."""
    _lock_project_managers()
    membership = _locked_membership(membership.pk)
    _last_project_manager_check(membership)
    who, role = membership.user.get_username(), membership.role
    organisation = membership.organisation.name if membership.organisation else None
    user = membership.user
    membership.delete()
    # Their API tokens go with the role: a later role must not revive an old key.
    revoked = ApiToken.objects.filter(user=user, revoked_at=None).update(
        revoked_at=timezone.now())
    _audit(engagement, actor, "access removed",
           f"{who} ({role_word(role, engagement)}) no longer has access",
           user=who, role=role, organisation=organisation, api_tokens_revoked=revoked)


@transaction.atomic
def member_add(*, engagement: Engagement, email: str, role: str, actor: str,
               create_user: bool = False) -> tuple[Membership, bool]:
    """Give the account with ``email`` ``role`` (for scripts: no mail). With ``create_user``
    an address without an account gets one, without a password: they set it with "Forgot your
    password?" on the login page. Returns the membership and whether the account was made."""
    email, role = email_normalise(email), role_check(role)
    user = _user_with_email(email)
    created = user is None
    if user is None:
        if not create_user:
            raise PeopleRefused(_("email: no account has the address %(email)s "
                                  "(--create-user makes one)") % {"email": email})
        user = User.objects.create_user(username=email, email=email)  # no usable password
    membership = _membership_add(engagement=engagement, user=user, role=role, actor=actor,
                                 how="added by a command" + (", account created" if created
                                                             else ""))
    return membership, created
