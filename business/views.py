"""The business-case page of an engagement: everyone who may see the engagement sees it; the
project manager and the engagement's customer enter the parameters (audited)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from acceptance.permissions import Role, engagement_for, has_role
from business.presentation import LABELS, business_page
from business.services import ParameterInvalid, parameters_save


@login_required
@require_http_methods(["GET", "POST"])
def business_case_view(request, name: str):
    engagement = engagement_for(request.user, name)
    can_edit = has_role(request.user, Role.PROJECT_MANAGER, Role.CUSTOMER)
    if request.method == "POST":
        if not can_edit:
            return render(request, "403.html", status=403)
        # only the fields the form sent: one it left out keeps its stored value (never erased)
        data = {field: request.POST[field] for field in LABELS if field in request.POST}
        try:
            parameters_save(engagement=engagement, actor=request.user.get_username(), data=data)
        except ParameterInvalid as refusal:
            context = business_page(engagement, can_edit=can_edit)
            text = str(refusal)
            for f in context["fields"]:
                # the field as the form labels it ("resume_share: …" named the API's key)
                if text.startswith(f["name"] + ":"):
                    text = f["label"] + text[len(f["name"]):]
                # the form shows what was typed; the Inputs table keeps what is stored
                f["input"] = data.get(f["name"], f["input"])
            messages.error(request, text)
            return render(request, "business/case.html", context, status=400)
        return redirect("business-case", name=engagement.name)
    return render(request, "business/case.html", business_page(engagement, can_edit=can_edit))
