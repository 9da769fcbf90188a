"""Browser pages of runs (engineers)."""

from django.urls import path

from runners import views

urlpatterns = [
    path("engagements/<slug:name>/gates/<str:code>/evidence/", views.gate_evidence,
         name="gate-evidence"),
    path("engagements/<slug:name>/gates/<str:code>/collect/<slug:node>.py",
         views.collection_script_download, name="collection-script"),
]
