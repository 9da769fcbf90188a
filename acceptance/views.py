"""Browser pages of the engagement domain: the project managers' dashboard, the engagement page
with its project-manager actions, and the customers' portal.

Every view checks the user's role and, for an engagement, that the user may see that engagement
(``acceptance.permissions``): an engagement a user may not see answers 404 whatever the action;
an action their role may not take answers 403. Queries and arithmetic live in
``acceptance.pages``; the views are thin doors to it and to ``gates.services``.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import InvalidPage
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from acceptance.data_texts import decision_sentence_text, stopped_reason_text
from acceptance.filters import EngagementFilter
from acceptance.forms import CriterionThresholdForm, ReasonForm
from acceptance.pages.dashboard import dashboard_rows
from acceptance.pages.engagement import bom_line, criterion_requirement, engagement_page
from acceptance.pages.portal import portal_rows
from acceptance.pages.words import gate_title
from acceptance.permissions import (
    STAFF_ROLES,
    Role,
    engagement_for,
    engagements_for,
    has_role,
    role_of,
)
from acceptance.services import bom_item_tick, engagement_reopen
from business.presentation import business_page
from gates.presentation import criterion_text
from gates.services import criterion_threshold_edit, gate_review_accept


@login_required
@require_GET
def home(request):
    """Send each person to their start page."""
    if has_role(request.user, *STAFF_ROLES):
        return redirect("dashboard")
    if role_of(request.user) == Role.CUSTOMER:
        return redirect("portal")
    raise PermissionDenied(_("Your account has no role yet: ask the project manager."))


@login_required
@require_GET
def dashboard(request):
    if not has_role(request.user, *STAFF_ROLES):
        raise PermissionDenied
    today = timezone.localdate()
    engagements_filter = EngagementFilter(request.GET or None,
                                          queryset=engagements_for(request.user))
    refusal = ""
    engagements = engagements_for(request.user).none()
    if engagements_filter.is_bound and not engagements_filter.is_valid():
        refusal = engagements_filter.errors_text()
    else:
        engagements = engagements_filter.qs
    try:
        rows, summary, page = dashboard_rows(engagements, today, page=request.GET.get("page"))
    except InvalidPage as error:
        refusal = refusal or f"page: {error}"
        rows, summary, page = dashboard_rows(engagements, today)
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "acceptance/dashboard.html",
                  {"rows": rows, "summary": summary, "today": today, "page": page,
                   "filter": engagements_filter, "refusal": refusal,
                   "query": query.urlencode(), "filtered": engagements_filter.is_bound},
                  status=400 if refusal else 200)


@login_required
@require_GET
def portal(request):
    if role_of(request.user) not in (Role.CUSTOMER, "superuser"):
        raise PermissionDenied
    rows = portal_rows(engagements_for(request.user), timezone.localdate())
    return render(request, "acceptance/portal.html", {"rows": rows})


def _manager_only(request) -> None:
    if not has_role(request.user, Role.PROJECT_MANAGER):
        raise PermissionDenied(_("Only a project manager may do this."))


def _detail_url(name: str, anchor: str = "") -> str:
    return reverse("engagement-detail", args=[name]) + (f"#{anchor}" if anchor else "")


@login_required
@require_GET
def engagement_detail(request, name: str):
    engagement = engagement_for(request.user, name)
    context = engagement_page(
        engagement, today=timezone.localdate(),
        can_manage=has_role(request.user, Role.PROJECT_MANAGER),
        can_run=has_role(request.user, Role.ENGINEER))
    context["reopen_form"] = ReasonForm(auto_id="reopen_%s")
    context["stopped_reason"] = stopped_reason_text(engagement.stopped_reason)
    # The business case in the page for the two parties whose decision it serves (the
    # project manager, the engagement's customer); others follow the link to its page.
    if has_role(request.user, Role.PROJECT_MANAGER, Role.CUSTOMER):
        context["business"] = business_page(engagement, can_edit=True)
    return render(request, "acceptance/engagement.html", context)


@login_required
@require_POST
def bom_tick(request, name: str, position: int):
    engagement = engagement_for(request.user, name)
    _manager_only(request)
    item = get_object_or_404(engagement.bom_items, position=position)
    try:
        item = bom_item_tick(item=item, actor=request.user.get_username())
    except ValueError as error:
        messages.error(request, str(error))
        return redirect(_detail_url(name, "bom"))
    if request.htmx:
        accepted = engagement.state == engagement.State.ACCEPTED
        return render(request, "acceptance/_bom_row.html",
                      {"line": bom_line(item, engagement_name=name, can_tick=not accepted)})
    messages.success(request, _("Ticked: %(item)s.") % {"item": item})
    return redirect(_detail_url(name, "bom"))


@login_required
@require_http_methods(["GET", "POST"])
def criterion_edit(request, name: str, code: str, key: str):
    engagement = engagement_for(request.user, name)
    gate = get_object_or_404(engagement.gates, code=code.upper())
    criterion = get_object_or_404(gate.criteria, key=key)
    _manager_only(request)
    form = CriterionThresholdForm(request.POST or None, criterion=criterion)
    if request.method == "POST" and form.is_valid():
        try:
            criterion_threshold_edit(criterion=criterion, actor=request.user.get_username(),
                                     reason=form.cleaned_data["reason"], values=form.values())
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("%(gate)s %(key)s changed; the audit trail records the "
                                        "old and new values.") % {"gate": gate.code,
                                                                  "key": criterion.key})
            return redirect(_detail_url(name, f"gate-{gate.code}"))
    return render(request, "acceptance/criterion_edit.html", {
        "engagement": engagement, "gate_title": gate_title(gate), "criterion": criterion,
        "requirement": criterion_requirement(criterion), "form": form,
        "description": criterion_text(criterion),
        "back_url": _detail_url(name, f"gate-{gate.code}"),
    })


def _reason_page(request, *, engagement, title: str, explanation: str, action: str,
                 form: ReasonForm, allowed: bool, refusal: str):
    return render(request, "acceptance/reason_form.html", {
        "engagement": engagement, "title": title, "explanation": explanation,
        "action": action, "form": form, "allowed": allowed, "refusal": refusal,
        "back_url": _detail_url(engagement.name),
    })


@login_required
@require_http_methods(["GET", "POST"])
def engagement_reopen_view(request, name: str):
    engagement = engagement_for(request.user, name)
    _manager_only(request)
    form = ReasonForm(request.POST or None)
    stopped = engagement.state == engagement.State.STOPPED
    if request.method == "POST" and form.is_valid():
        try:
            engagement_reopen(engagement=engagement, actor=request.user.get_username(),
                              reason=form.cleaned_data["reason"])
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("%(name)s is re-opened; the stopped gate is pending "
                                        "again.") % {"name": engagement.name})
            return redirect(_detail_url(name))
    return _reason_page(
        request, engagement=engagement, title=_("Re-open %(name)s") % {"name": name},
        explanation=stopped_reason_text(engagement.stopped_reason),
        action=_("Re-open the engagement"), form=form,
        allowed=stopped,
        refusal=_("%(name)s is %(state)s, not stopped: there is nothing to re-open.") % {
            "name": name, "state": engagement.state})


@login_required
@require_http_methods(["GET", "POST"])
def gate_accept_review(request, name: str, code: str):
    engagement = engagement_for(request.user, name)
    gate = get_object_or_404(engagement.gates, code=code.upper())
    _manager_only(request)
    form = ReasonForm(request.POST or None)
    in_review = gate.state == gate.State.REVIEW
    if request.method == "POST" and form.is_valid():
        try:
            gate_review_accept(gate=gate, actor=request.user.get_username(),
                               reason=form.cleaned_data["reason"])
        except ValueError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, _("%(gate)s accepted after review.") % {
                "gate": gate_title(gate)})
            return redirect(_detail_url(name, f"gate-{gate.code}"))
    latest = gate.decisions.reported().order_by("-decided_at", "-id").first()
    return _reason_page(
        request, engagement=engagement,
        title=_("Accept the review of %(gate)s") % {"gate": gate_title(gate)},
        explanation=decision_sentence_text(latest.sentence) if latest else "",
        action=_("Accept with this reason"),
        form=form, allowed=in_review,
        refusal=_("%(gate)s is not in review.") % {"gate": gate_title(gate)})
