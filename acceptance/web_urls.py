"""Browser pages of engagements (project managers, customers).

Engagement names may contain dots (``acceptance.models.name_validator``), hence ``str``.
"""

from django.urls import path

from acceptance import bom_views, engagement_views, views
from business.views import business_case_view

urlpatterns = [
    # Setting an engagement up (before the engagement page: "new" is a reserved name).
    path("engagements/new/", engagement_views.engagement_new, name="engagement-new"),
    path("engagements/<str:name>/reference-profile/", engagement_views.reference_profile_edit,
         name="reference-profile-edit"),
    path("engagements/<str:name>/gates/<str:code>/due-date/", engagement_views.gate_due_date_edit,
         name="gate-due-date"),
    path("engagements/<str:name>/bom/add/", bom_views.bom_add, name="bom-add"),
    path("engagements/<str:name>/bom/upload/", bom_views.bom_upload, name="bom-upload"),
    path("engagements/<str:name>/bom/<int:position>/edit/", bom_views.bom_item_edit_view,
         name="bom-edit"),
    path("engagements/<str:name>/bom/<int:position>/remove/", bom_views.bom_item_remove_view,
         name="bom-remove"),
    # (end of the set-up block)
    path("", views.home, name="home"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("portal/", views.portal, name="portal"),
    path("engagements/<str:name>/", views.engagement_detail, name="engagement-detail"),
    path("engagements/<str:name>/business-case/", business_case_view, name="business-case"),
    path("engagements/<str:name>/bom/<int:position>/tick/", views.bom_tick, name="bom-tick"),
    path("engagements/<str:name>/reopen/", views.engagement_reopen_view,
         name="engagement-reopen"),
    path("engagements/<str:name>/gates/<str:code>/criteria/<slug:key>/edit/",
         views.criterion_edit, name="criterion-edit"),
    path("engagements/<str:name>/gates/<str:code>/accept-review/", views.gate_accept_review,
         name="gate-accept-review"),
]
