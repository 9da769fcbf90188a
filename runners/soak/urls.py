"""Pages of the G4 soak (the soak page of a run, the soak plan of a soak gate) and its API
under /api/soaks/ (``runners.soak.api``)."""

from django.urls import include, path

from runners.soak import api, views

page_urlpatterns = [
    path("engagements/<str:name>/gates/<str:code>/soak/", views.soak_plan, name="soak-plan"),
    path("engagements/<str:name>/gates/<str:code>/soak/edit/", views.soak_plan_edit_view,
         name="soak-plan-edit"),
    path("engagements/<str:name>/gates/<str:code>/soak/targets/", views.soak_target_mark,
         name="soak-target-mark"),
    path("engagements/<str:name>/gates/<str:code>/soak/start/", views.soak_start_view,
         name="soak-start"),
    path("soaks/<int:soak_id>/", views.soak_detail, name="soak-detail"),
    path("soaks/<int:soak_id>/live/", views.soak_live, name="soak-live"),
    path("soaks/<int:soak_id>/pause/", views.soak_pause_view, name="soak-pause"),
    path("soaks/<int:soak_id>/resume/", views.soak_resume_view, name="soak-resume"),
    path("soaks/<int:soak_id>/abort/", views.soak_abort_view, name="soak-abort"),
]

urlpatterns = [
    *page_urlpatterns,
    path("api/", include(api.urlpatterns)),
]
