"""Forms of the People page, the invitation's password and the password reset request."""

from __future__ import annotations

import unicodedata

from django import forms
from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm
from django.contrib.auth.models import User
from django.utils.translation import gettext_lazy as _

from acceptance.models import Engagement, Membership

Role = Membership.Role


def role_choices(engagement: Engagement) -> list[tuple[str, str]]:
    return [
        (Role.PROJECT_MANAGER, _("project manager (every engagement)")),
        (Role.ENGINEER, _("engineer (every engagement)")),
        (Role.CUSTOMER, _("customer of %(organisation)s (its engagements only)") % {
            "organisation": engagement.customer.name}),
    ]


class InviteForm(forms.Form):
    email = forms.EmailField(label=_("E-mail address"), max_length=150)
    role = forms.ChoiceField(label=_("Role"))

    def __init__(self, *args, engagement: Engagement, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = role_choices(engagement)


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"))

    def __init__(self, *args, engagement: Engagement, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = role_choices(engagement)


class InvitationPasswordForm(SetPasswordForm):
    """The invitee's password, checked by the configured password validators."""


def form_error_line(form: forms.Form) -> str:
    """Every error of a bound form on one line, each after its field's label."""
    parts = []
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else ""
        parts += [f"{label}: {e}" if label else str(e) for e in errors]
    return "; ".join(parts)


def _same_address(a: str, b: str) -> bool:
    """As Django's own reset form compares them: NFKC, case-folded."""
    return (unicodedata.normalize("NFKC", a).casefold()
            == unicodedata.normalize("NFKC", b).casefold())


class PasswordResetRequestForm(PasswordResetForm):
    """Django's reset form, which also reaches people who never had a password: an account made
    by ``manage.py member_add --create-user`` has a role and no usable password yet."""

    def get_users(self, email):
        users = User._default_manager.filter(email__iexact=email, is_active=True)
        return (u for u in users
                if (u.has_usable_password() or Membership.objects.filter(user=u).exists())
                and _same_address(email, u.email))
