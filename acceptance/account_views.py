"""Account pages: "API tokens", where a logged-in person makes (the key shown once), lists and
revokes their own REST API tokens (someone else's token answers 404); and the page a login
locked out by django-axes gets (429, in the layout)."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from acceptance.tokens import ApiToken, api_token_create, api_token_revoke

MAX_DAYS = 365


class TokenCreateForm(forms.Form):
    name = forms.CharField(label=pgettext_lazy("the name of a thing, not a person", "Name"),
                           max_length=100, strip=True,
                           help_text=_("What the token is for, e.g. the script that uses it."))
    days = forms.IntegerField(label=_("Expires after (days)"), min_value=1, max_value=MAX_DAYS)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        default = settings.API_TOKEN_EXPIRY_DAYS
        self.fields["days"].initial = min(default, MAX_DAYS) if default else MAX_DAYS


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request):
    form = TokenCreateForm()
    new_key = None
    status = 200
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            token, new_key = api_token_create(user=request.user,
                                              name=form.cleaned_data["name"],
                                              days=form.cleaned_data["days"])
            form = TokenCreateForm()
            status = 201
        else:
            status = 400
    tokens = [{"id": t.id, "name": t.name, "prefix": t.prefix, "created_at": t.created_at,
               "last_used_at": t.last_used_at, "expires_at": t.expires_at, "state": t.state,
               "active": t.state == "active"}
              for t in ApiToken.objects.filter(user=request.user)]
    response = render(request, "accounts/tokens.html",
                      {"form": form, "tokens": tokens, "new_key": new_key}, status=status)
    if new_key:
        response["Cache-Control"] = "no-store"  # the key must not stay in a cache
    return response


@login_required
@require_POST
def api_token_revoke_view(request, token_id: int):
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    if api_token_revoke(token=token):
        messages.success(request, gettext("Token “%(name)s” revoked: it no longer works.")
                         % {"name": token.name})
    return redirect("api-tokens")


def login_locked_out(request, original_response=None, credentials=None):
    """django-axes' AXES_LOCKOUT_CALLABLE: the lockout page, 429."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return render(request, "registration/locked_out.html", {"cooloff_minutes": minutes},
                  status=429)
