"""API routes (under /api/): read-only collections, the gates nested under their engagement,
two write actions, and the OpenAPI schema at /api/schema/ (logged-in only; no browsable UI: it
would need a CDN or drf-spectacular-sidecar)."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.routers import DefaultRouter

from acceptance.api import setup, views
from business.api import BusinessCaseView


class Router(DefaultRouter):
    # Engagement names may contain dots: no ".json"-style format suffixes.
    include_format_suffixes = False


router = Router()
router.register("engagements", views.EngagementViewSet, basename="api-engagement")
router.register("criteria", views.CriterionViewSet, basename="api-criterion")
router.register("gate-runs", views.GateRunViewSet, basename="api-gate-run")
router.register("node-jobs", views.NodeJobViewSet, basename="api-node-job")
router.register("probe-runs", views.ProbeRunViewSet, basename="api-probe-run")
router.register("measurements", views.MeasurementViewSet, basename="api-measurement")
router.register("decisions", views.DecisionViewSet, basename="api-decision")
router.register("reports", views.ReportViewSet, basename="api-report")
router.register("audit", views.AuditEntryViewSet, basename="api-audit")

ENGAGEMENT = r"engagements/(?P<engagement_name>[A-Za-z0-9][A-Za-z0-9._-]{0,62})"
GATE = ENGAGEMENT + r"/gates/(?P<code>[A-Za-z0-9]{1,4})"

urlpatterns = [
    # for logged-in people only (token or session): the map of the API is not public
    path("schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]),
         name="api-schema"),
    re_path(ENGAGEMENT + r"/gates/$", views.GateViewSet.as_view({"get": "list"}),
            name="api-gate-list"),
    re_path(GATE + r"/$", views.GateViewSet.as_view({"get": "retrieve"}),
            name="api-gate-detail"),
    re_path(GATE + r"/runs/$",
            views.GateViewSet.as_view({"get": "runs_list", "post": "run_start"}),
            name="api-gate-runs"),
    # An engagement's set-up (acceptance/api/setup.py): nodes, the BOM, re-opening.
    re_path(ENGAGEMENT + r"/nodes/$", setup.NodeEnrolView.as_view(), name="api-node-enrol"),
    re_path(ENGAGEMENT + r"/bom/$", setup.BomUploadView.as_view(), name="api-bom-upload"),
    re_path(ENGAGEMENT + r"/bom/(?P<position>[0-9]{1,6})/tick/$", setup.BomTickView.as_view(),
            name="api-bom-tick"),
    re_path(ENGAGEMENT + r"/reopen/$", setup.ReopenView.as_view(), name="api-reopen"),
    re_path(ENGAGEMENT + r"/business-case/$", BusinessCaseView.as_view(),
            name="api-business-case"),
    *router.urls,
]
