"""Browser pages of nodes and runs (engineers; runs readable by everyone who may see the
engagement)."""

from django.urls import path

from runners import views

urlpatterns = [
    path("engagements/<str:name>/nodes/", views.node_list, name="node-list"),
    path("engagements/<str:name>/nodes/register/", views.node_register, name="node-register"),
    path("engagements/<str:name>/nodes/<str:node>/host-key/", views.node_repin,
         name="node-repin"),
    path("engagements/<str:name>/gates/<str:code>/run/", views.gate_run_launch,
         name="gate-run-start"),
    path("engagements/<str:name>/gates/<str:code>/evidence/", views.gate_evidence,
         name="gate-evidence"),
    path("engagements/<str:name>/gates/<str:code>/collect/<slug:node>.py",
         views.collection_script_download, name="collection-script"),
    path("runs/<int:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<int:run_id>/live/", views.run_live, name="run-live"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<int:run_id>/rerun/", views.run_rerun, name="run-rerun"),
    path("engagements/<str:name>/runs/", views.run_list, name="run-list"),
    path("engagements/<str:name>/export/<slug:kind>.csv", views.engagement_export_csv,
         name="engagement-export"),
    path("runs/<int:run_id>/export/<slug:kind>.csv", views.run_export_csv, name="run-export"),
]
