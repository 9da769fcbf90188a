"""Browser pages that set an engagement up: creating one with its arrays (G1–G4 seeded),
moving a gate's due date with a reason, and choosing its reference profile with a reason
(``gates.reference.engagement_profile_set``).

Who may create an engagement: a project manager (``Membership`` role) or a superuser — the
people who may tick its BOM and change its thresholds. Django's ``is_staff`` alone (admin
access) is not enough: the admin is not where engagements are run. Creating one records the
creator in its audit trail; project managers work on every engagement
(``acceptance.permissions``), so the creator is its project manager from the first page on.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from acceptance.forms import (
    ArrayFormSet,
    DueDateForm,
    EngagementCreateForm,
    ReferenceProfileForm,
    form_errors_add,
)
from acceptance.pages.words import day, gate_title
from acceptance.permissions import Role, engagement_for, has_role
from acceptance_core.profiles import FIGURES, PROFILES
from gates.reference import ProfileRefused, engagement_profile_set
from gates.services import engagement_create, gate_due_date_move

# The service's error keys → the page's fields.
CREATE_FIELDS = {"name": "name", "customer": "new_organisation", "start_date": "start_date",
                 "report_language": "report_language", "reference_profile": "reference_profile"}


def posted(request):
    """The POST data when posted (even empty, so the form says what is missing), else None."""
    return request.POST if request.method == "POST" else None


def manager_only(request) -> None:
    if not has_role(request.user, Role.PROJECT_MANAGER):
        raise PermissionDenied(_("Only a project manager may do this."))


def detail_url(name: str, anchor: str = "") -> str:
    return reverse("engagement-detail", args=[name]) + (f"#{anchor}" if anchor else "")


@login_required
@require_http_methods(["GET", "POST"])
def engagement_new(request):
    manager_only(request)
    form = EngagementCreateForm(posted(request))
    arrays = ArrayFormSet(posted(request), prefix="arrays")
    status = 200
    if request.method == "POST":
        if form.is_valid() and arrays.is_valid():
            try:
                engagement = engagement_create(
                    name=form.cleaned_data["name"], customer=form.customer(),
                    start_date=form.cleaned_data["start_date"],
                    report_language=form.cleaned_data["report_language"],
                    reference_profile=form.cleaned_data["reference_profile"],
                    arrays=arrays.arrays(), actor=request.user.get_username(),
                    via="on the engagement page")
            except ValidationError as error:
                form_errors_add(form, error, CREATE_FIELDS)
            else:
                messages.success(request, _(
                    "%(name)s is created with G1–G4 from the defaults; add its bill of "
                    "materials, then its nodes.") % {"name": engagement.name})
                return redirect(detail_url(engagement.name))
        status = 400
    return render(request, "acceptance/engagement_create.html",
                  {"form": form, "arrays": arrays}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def gate_due_date_edit(request, name: str, code: str):
    engagement = engagement_for(request.user, name)
    gate = get_object_or_404(engagement.gates, code=code.upper())
    manager_only(request)
    form = DueDateForm(posted(request), initial={"due_date": gate.due_date})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                gate_due_date_move(gate=gate, due_date=form.cleaned_data["due_date"],
                                   actor=request.user.get_username(),
                                   reason=form.cleaned_data["reason"])
            except ValueError as error:
                form.add_error(None, str(error))
            else:
                messages.success(request, _("%(gate)s is now due %(date)s; the audit trail "
                                            "records the old date and your reason.") % {
                    "gate": gate_title(gate), "date": day(form.cleaned_data["due_date"])})
                return redirect(detail_url(name, f"gate-{gate.code}"))
        status = 400
    return render(request, "acceptance/due_date_edit.html", {
        "engagement": engagement, "gate_title": gate_title(gate), "due_date": day(gate.due_date),
        "due_week": gate.due_week, "passed": gate.state == gate.State.PASSED, "form": form,
        "back_url": detail_url(name, f"gate-{gate.code}"),
    }, status=status)


def _figure_rows(profile) -> list[dict]:
    rows = []
    for figure, value in profile.figures.items():
        words, unit = FIGURES[figure]
        text = (f"{value[0] * 100:+g} % … {value[1] * 100:+g} %" if isinstance(value, tuple)
                else f"{value:g} {unit}")
        rows.append({"figure": words, "value": text})
    return rows


@login_required
@require_http_methods(["GET", "POST"])
def reference_profile_edit(request, name: str):
    engagement = engagement_for(request.user, name)
    manager_only(request)
    form = ReferenceProfileForm(posted(request), initial={"profile": engagement.reference_profile})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                engagement_profile_set(engagement=engagement,
                                       profile=form.cleaned_data["profile"],
                                       actor=request.user.get_username(),
                                       reason=form.cleaned_data["reason"])
            except ProfileRefused as error:
                form.add_error(None, str(error))
            else:
                messages.success(request, _("%(name)s is now compared with %(profile)s; the audit "
                                            "trail records the old and new figures.") % {
                    "name": engagement.name, "profile": form.cleaned_data["profile"]})
                return redirect(detail_url(name))
        status = 400
    profiles = [{"key": key, "title": profile.title, "workload": profile.workload,
                 "figures": _figure_rows(profile),
                 "chosen": key == engagement.reference_profile}
                for key, profile in PROFILES.items()]
    return render(request, "acceptance/reference_profile_edit.html", {
        "engagement": engagement, "profiles": profiles, "form": form,
        "accepted": engagement.state == engagement.State.ACCEPTED,
        "back_url": detail_url(name),
    }, status=status)
