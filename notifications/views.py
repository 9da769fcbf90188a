"""Notification pages. Who gets what and the webhook (project managers), the deliveries list
(project managers), a person's own mutes and calendar feed (anyone with a role), and the feed
itself (anyone holding its secret URL; revoked or unknown: 404).

Engagement pages find the engagement through ``engagement_for`` (404 when not visible) before
checking the role (403). Bad input answers 400 with the field named.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.permissions import Role, engagement_for, engagements_for, has_role, role_of
from notifications import calendar, queries, services
from notifications.forms import MuteForm, SubscriptionsForm, WebhookForm
from notifications.kinds import KINDS, ROLE_WORDS, ROLES
from notifications.models import CalendarFeed, Mute, Webhook


def _pm_engagement(request, name: str):
    engagement = engagement_for(request.user, name)
    if not has_role(request.user, Role.PROJECT_MANAGER):
        raise PermissionDenied("only project managers change notifications")
    return engagement


def _settings_page(request, engagement, *, subscriptions=None, webhook_form=None,
                   status=200):
    grid = services.subscription_grid(engagement)
    hook = Webhook.objects.filter(engagement=engagement).first()
    subscriptions = subscriptions or SubscriptionsForm(grid=grid)
    rows = [{"words": kind.words,
             "cells": [subscriptions[f"{kind.name}__{role}"] for role in ROLES]}
            for kind in KINDS.values()]
    webhook_form = webhook_form or WebhookForm(initial={
        "url": hook.url if hook else "",
        "kinds": hook.kinds if hook else list(KINDS)})
    return render(request, "notifications/settings.html", {
        "engagement": engagement, "rows": rows, "roles": [ROLE_WORDS[r] for r in ROLES],
        "subscriptions": subscriptions, "webhook_form": webhook_form, "hook": hook,
    }, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def notification_settings(request, name: str):
    engagement = _pm_engagement(request, name)
    if request.method == "GET":
        return _settings_page(request, engagement)
    if request.POST.get("form") == "subscriptions":
        form = SubscriptionsForm(request.POST, grid=services.subscription_grid(engagement))
        if not form.is_valid():
            return _settings_page(request, engagement, subscriptions=form, status=400)
        services.subscriptions_save(engagement=engagement, chosen=form.chosen())
        messages.success(request, gettext("Who gets what was saved."))
    elif request.POST.get("form") == "webhook":
        form = WebhookForm(request.POST)
        if not form.is_valid():
            return _settings_page(request, engagement, webhook_form=form, status=400)
        try:
            services.webhook_save(engagement=engagement, url=form.cleaned_data["url"],
                                  secret=form.cleaned_data["secret"],
                                  kinds=form.cleaned_data["kinds"],
                                  actor=request.user.get_username())
        except services.SettingsRefused as error:
            field, _, text = str(error).partition(": ")
            form.add_error(field if field in form.fields else None, text or str(error))
            return _settings_page(request, engagement, webhook_form=form, status=400)
        messages.success(request, gettext("The webhook was saved; its secret is not shown again."))
    elif request.POST.get("form") == "webhook_remove":
        services.webhook_remove(engagement=engagement, actor=request.user.get_username())
        messages.success(request, gettext("The webhook was removed."))
    else:
        return HttpResponse(gettext("form: say which settings to save (subscriptions, "
                                    "webhook or webhook_remove)"),
                            status=400, content_type="text/plain")
    return redirect("notification-settings", name=engagement.name)


@login_required
@require_GET
def notification_deliveries(request, name: str):
    engagement = _pm_engagement(request, name)
    return render(request, "notifications/deliveries.html", {
        "engagement": engagement, "deliveries": list(queries.deliveries_of(engagement))})


@login_required
@require_POST
def notification_mute(request, name: str):
    """Mute or unmute an engagement (or one kind of it) for the person asking."""
    engagement = engagement_for(request.user, name)
    if role_of(request.user) is None:
        raise Http404("no such engagement")
    form = MuteForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
        return HttpResponse(errors, status=400, content_type="text/plain")
    services.mute_set(user=request.user, engagement=engagement, kind=form.cleaned_data["kind"],
                      muted=form.cleaned_data["muted"])
    return redirect("my-notifications")


@login_required
@require_GET
def my_notifications(request):
    if role_of(request.user) is None:
        raise PermissionDenied("no role yet")
    mutes = {(m.engagement_id, m.kind) for m in Mute.objects.filter(user=request.user)}
    rows = [{"engagement": e, "muted_all": (e.id, "") in mutes,
             "muted_kinds": [KINDS[k].words for (eid, k) in sorted(mutes)
                             if eid == e.id and k]}
            for e in engagements_for(request.user).order_by("name")]
    feed = CalendarFeed.objects.filter(user=request.user, revoked_at__isnull=True).first()
    return render(request, "notifications/mine.html", {
        "rows": rows, "mute_form": MuteForm(), "feed": feed,
        "email": request.user.email})


@login_required
@require_POST
def calendar_manage(request):
    """Make a new secret calendar URL (the old one stops working) or revoke it."""
    if role_of(request.user) is None:
        raise PermissionDenied("no role yet")
    action = request.POST.get("action")
    if action == "revoke":
        services.calendar_feed_revoke(user=request.user)
        messages.success(request, gettext("Your calendar URL was revoked; it now answers 404."))
        return redirect("my-notifications")
    if action != "renew":
        return HttpResponse(gettext("action: renew or revoke"), status=400,
                            content_type="text/plain")
    token = services.calendar_feed_renew(user=request.user)
    rows = [{"engagement": e, "url": request.build_absolute_uri(
        reverse("calendar-feed-engagement", args=[token, e.name]))}
        for e in engagements_for(request.user).order_by("name")]
    return render(request, "notifications/calendar_new.html", {
        "all_url": request.build_absolute_uri(reverse("calendar-feed", args=[token])),
        "rows": rows})


@require_GET
def calendar_feed(request, token: str, name: str | None = None):
    user = services.calendar_feed_user(token)
    if user is None:
        raise Http404("no such calendar")
    if name is not None and not engagements_for(user).filter(name=name).exists():
        raise Http404("no such calendar")
    response = HttpResponse(calendar.feed_ical(user, engagement_name=name),
                            content_type="text/calendar; charset=utf-8")
    response["Cache-Control"] = "private, no-store"
    return response
