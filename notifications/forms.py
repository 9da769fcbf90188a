"""Forms of the notification pages: who gets what, the webhook, a person's mutes."""

from __future__ import annotations

from django import forms
from django.core.validators import URLValidator

from notifications.kinds import KINDS, ROLE_WORDS, ROLES

KIND_CHOICES = [(k.name, k.words) for k in KINDS.values()]


def field_name(kind: str, role: str) -> str:
    return f"{kind}__{role}"


class SubscriptionsForm(forms.Form):
    """One checkbox per event kind and role: people of that role get the e-mail."""

    def __init__(self, *args, grid: dict[str, set[str]], **kwargs):
        super().__init__(*args, **kwargs)
        for kind in KINDS.values():
            for role in ROLES:
                self.fields[field_name(kind.name, role)] = forms.BooleanField(
                    required=False, initial=role in grid.get(kind.name, set()),
                    label=f"{kind.words}: {ROLE_WORDS[role]}")

    def chosen(self) -> set[tuple[str, str]]:
        return {(kind, role) for kind in KINDS for role in ROLES
                if self.cleaned_data.get(field_name(kind, role))}


class WebhookForm(forms.Form):
    url = forms.CharField(
        label="Webhook URL", max_length=500,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="JSON POSTs with X-Acceptance-Signature: sha256=<HMAC-SHA256 of the body> "
                  "and X-Acceptance-Delivery: <uuid>")
    secret = forms.CharField(
        label="Secret", required=False, min_length=16, max_length=200, strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="at least 16 characters; stored encrypted and never shown again (leave "
                  "empty to keep the stored one)")
    kinds = forms.MultipleChoiceField(
        label="Events posted", choices=KIND_CHOICES, required=False,
        widget=forms.CheckboxSelectMultiple)


class MuteForm(forms.Form):
    kind = forms.ChoiceField(label="What", required=False,
                             choices=[("", "everything of this engagement"), *KIND_CHOICES])
    muted = forms.BooleanField(label="Muted", required=False)
