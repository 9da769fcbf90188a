"""Browser pages of the engagement domain. Every view checks the user's role and, for an
engagement, that the user may see that engagement (``acceptance.permissions``)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from acceptance.permissions import STAFF_ROLES, Role, engagements_for, has_role, role_of


@login_required
@require_GET
def home(request):
    """Send each person to their start page."""
    if has_role(request.user, *STAFF_ROLES):
        return redirect("dashboard")
    if role_of(request.user) == Role.CUSTOMER:
        return redirect("portal")
    raise PermissionDenied("your account has no role yet: ask the project manager")


@login_required
@require_GET
def dashboard(request):
    if not has_role(request.user, *STAFF_ROLES):
        raise PermissionDenied
    engagements = engagements_for(request.user).select_related("customer").order_by("name")
    return render(request, "acceptance/dashboard.html", {"engagements": engagements})


@login_required
@require_GET
def portal(request):
    if role_of(request.user) not in (Role.CUSTOMER, "superuser"):
        raise PermissionDenied
    engagements = engagements_for(request.user).select_related("customer").order_by("name")
    return render(request, "acceptance/portal.html", {"engagements": engagements})
