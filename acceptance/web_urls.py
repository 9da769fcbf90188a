"""Browser pages of engagements (project managers, customers).

Engagement names may contain dots (``acceptance.models.name_validator``), hence ``str``.
"""

from django.urls import path

from acceptance import views

urlpatterns = [
    path("", views.home, name="home"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("portal/", views.portal, name="portal"),
    path("engagements/<str:name>/", views.engagement_detail, name="engagement-detail"),
    path("engagements/<str:name>/bom/<int:position>/tick/", views.bom_tick, name="bom-tick"),
    path("engagements/<str:name>/reopen/", views.engagement_reopen_view,
         name="engagement-reopen"),
    path("engagements/<str:name>/gates/<str:code>/criteria/<slug:key>/edit/",
         views.criterion_edit, name="criterion-edit"),
    path("engagements/<str:name>/gates/<str:code>/accept-review/", views.gate_accept_review,
         name="gate-accept-review"),
]
