"""Report downloads and verification pages."""

from django.urls import path

from reports import views

urlpatterns = [
    path("reports/verify/", views.report_verify, name="report-verify"),
    path("reports/<int:report_id>/download/", views.report_download, name="report-download"),
]
