"""Report downloads, verification, an engagement's reports and the sign-off actions."""

from django.urls import path

from reports import views

urlpatterns = [
    path("reports/verify/", views.report_verify, name="report-verify"),
    path("reports/<int:report_id>/redecide/", views.report_redecide, name="report-redecide"),
    path("reports/<int:report_id>/download/", views.report_download, name="report-download"),
    path("reports/<int:report_id>/signoff/", views.report_signoff, name="report-signoff"),
    path("reports/<int:report_id>/countersigned/", views.report_countersigned,
         name="report-countersigned"),
    path("engagements/<str:name>/reports/", views.engagement_reports, name="engagement-reports"),
    path("engagements/<str:name>/reports/final/", views.report_final, name="report-final"),
    path("engagements/<str:name>/reports/certificate/", views.report_certificate,
         name="report-certificate"),
]
