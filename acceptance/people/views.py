"""The People page of an engagement (project managers change, engineers read) and the
invitation's link (no login: the link is the key).

Customers never see the People page (403 on their own engagement, 404 on another
organisation's, as every engagement page). A refusal re-shows the page with its one-line reason
and status 400; nothing is changed then.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.models import Engagement, Invitation
from acceptance.people.forms import InvitationPasswordForm, InviteForm, RoleForm, form_error_line
from acceptance.people.pages import people_page
from acceptance.people.services import (
    InvitationClosed,
    PeopleRefused,
    engagement_member,
    invitation_accept,
    invitation_by_token,
    invitation_revoke,
    member_remove,
    member_role_change,
    person_invite,
    role_word,
)
from acceptance.permissions import STAFF_ROLES, Role, engagement_for, has_role

SESSION_KEY = "acceptance_invitation"  # the sha256 of the link's token, between two requests


def _engagement(request, name: str) -> Engagement:
    engagement = engagement_for(request.user, name)
    if not has_role(request.user, *STAFF_ROLES):
        raise PermissionDenied(_("Only the vendor's project managers and engineers see who "
                                 "works on an engagement."))
    return engagement


def _manager_only(request) -> None:
    if not has_role(request.user, Role.PROJECT_MANAGER):
        raise PermissionDenied(_("Only a project manager may do this."))


def _page(request, engagement: Engagement, *, invite_form: InviteForm | None = None,
          error: str = "", status: int = 200):
    context = people_page(engagement, can_manage=has_role(request.user, Role.PROJECT_MANAGER),
                          now=timezone.now())
    context.update(invite_form=invite_form or InviteForm(engagement=engagement),
                   role_form=RoleForm(engagement=engagement), error=error)
    return render(request, "acceptance/people.html", context, status=status)


def _people_url(name: str) -> str:
    return reverse("people", args=[name])


@login_required
@require_GET
def people(request, name: str):
    return _page(request, _engagement(request, name))


@login_required
@require_POST
def people_invite(request, name: str):
    engagement = _engagement(request, name)
    _manager_only(request)
    form = InviteForm(request.POST, engagement=engagement)
    if not form.is_valid():
        return _page(request, engagement, invite_form=form, error=form_error_line(form),
                     status=400)
    try:
        outcome = person_invite(
            engagement=engagement, email=form.cleaned_data["email"],
            role=form.cleaned_data["role"], actor=request.user.get_username(),
            site_url=request.build_absolute_uri("/").rstrip("/"))
    except PeopleRefused as refusal:
        return _page(request, engagement, invite_form=form, error=str(refusal), status=400)
    words = {"email": outcome.email, "role": role_word(form.cleaned_data["role"], engagement)}
    if outcome.invitation is not None:
        messages.success(request, _("Invitation sent to %(email)s as %(role)s.") % words)
    else:
        messages.success(request, _("%(email)s has an account: they now have access as "
                                    "%(role)s, and a notice was mailed.") % words)
    return redirect(_people_url(name))


def _member(engagement: Engagement, user_id: int):
    membership = engagement_member(engagement, user_id)
    if membership is None:
        raise Http404("no such member of this engagement")
    return membership


@login_required
@require_POST
def people_role(request, name: str, user_id: int):
    engagement = _engagement(request, name)
    _manager_only(request)
    membership = _member(engagement, user_id)
    form = RoleForm(request.POST, engagement=engagement)
    if not form.is_valid():
        return _page(request, engagement, error=form_error_line(form), status=400)
    try:
        member_role_change(engagement=engagement, membership=membership,
                           role=form.cleaned_data["role"], actor=request.user.get_username())
    except PeopleRefused as refusal:
        return _page(request, engagement, error=str(refusal), status=400)
    messages.success(request, _("%(who)s is now %(role)s.") % {
        "who": membership.user.get_username(),
        "role": role_word(form.cleaned_data["role"], engagement)})
    return redirect(_people_url(name))


@login_required
@require_POST
def people_remove(request, name: str, user_id: int):
    engagement = _engagement(request, name)
    _manager_only(request)
    membership = _member(engagement, user_id)
    try:
        member_remove(engagement=engagement, membership=membership,
                      actor=request.user.get_username())
    except PeopleRefused as refusal:
        return _page(request, engagement, error=str(refusal), status=400)
    messages.success(request, _("%(who)s no longer has access.") % {
        "who": membership.user.get_username()})
    return redirect(_people_url(name))


@login_required
@require_POST
def people_invitation_revoke(request, name: str, invitation_id: int):
    engagement = _engagement(request, name)
    _manager_only(request)
    invitation = get_object_or_404(engagement.invitations, pk=invitation_id)
    try:
        invitation_revoke(invitation=invitation, actor=request.user.get_username())
    except PeopleRefused as refusal:
        return _page(request, engagement, error=str(refusal), status=400)
    messages.success(request, _("The invitation of %(email)s is revoked.") % {
        "email": invitation.email})
    return redirect(_people_url(name))


def _closed(request, invitation: Invitation | None, status: str, http_status: int):
    texts = {
        Invitation.Status.USED: _("This invitation has been used already: log in, or reset "
                                  "your password if you have forgotten it."),
        Invitation.Status.REVOKED: _("This invitation was withdrawn. Ask the project manager "
                                     "for a new one if you still need access."),
        Invitation.Status.EXPIRED: _("This invitation has expired. Ask the project manager "
                                     "for a new one."),
        "unknown": _("This link is not an invitation of this service: check that it was "
                     "copied whole."),
        "no-session": _("Open the link in your invitation mail again."),
    }
    return render(request, "acceptance/people_invitation_closed.html", {
        "text": texts[status], "status": status,
        "expired_at": invitation.expires_at if invitation else None,
    }, status=http_status)


@require_GET
def invitation_open(request, token: str):
    """The link in the mail: keep the token in the session and go on to a URL without it (so
    it does not leak in a Referer header), as Django's password reset does."""
    invitation = invitation_by_token(token)
    if invitation is None:
        return _closed(request, None, "unknown", 404)
    status = invitation.status(timezone.now())
    if status != Invitation.Status.PENDING:
        return _closed(request, invitation, status, 410)
    request.session[SESSION_KEY] = invitation.token_sha256  # not the token itself
    return redirect("invitation-accept")


@require_http_methods(["GET", "POST"])
def invitation_accept_view(request):
    invitation = (Invitation.objects.select_related("engagement", "engagement__customer")
                  .filter(token_sha256=request.session.get(SESSION_KEY) or "-").first())
    if invitation is None:
        return _closed(request, None, "no-session", 400)
    status = invitation.status(timezone.now())
    if status != Invitation.Status.PENDING:
        return _closed(request, invitation, status, 410)
    form = InvitationPasswordForm(User(username=invitation.email, email=invitation.email),
                                  request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = invitation_accept(invitation=invitation,
                                     password=form.cleaned_data["new_password1"])
        except InvitationClosed as closed:
            return _closed(request, invitation, closed.status, 410)
        except PeopleRefused as refusal:
            form.add_error(None, str(refusal))
        else:
            request.session.pop(SESSION_KEY, None)
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, _("Welcome: you have access as %(role)s.") % {
                "role": role_word(invitation.role, invitation.engagement)})
            return redirect("engagement-detail", invitation.engagement.name)
    return render(request, "acceptance/people_invitation.html", {
        "invitation": invitation, "form": form,
        "role": role_word(invitation.role, invitation.engagement),
    }, status=400 if request.method == "POST" else 200)
