"""Report pages: verify an uploaded PDF (any logged-in user)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_http_methods


@login_required
@require_http_methods(["GET", "POST"])
def report_verify(request):
    return render(request, "reports/verify.html", {})
