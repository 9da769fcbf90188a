"""The soak's REST API (under /api/, token or session authentication, in /api/schema/).

* ``GET /api/soaks/`` — soaks the user may see (``?engagement=NAME``, ``?state=running``);
* ``GET /api/soaks/{id}/`` — state, progress (real and plan seconds), each steady-state check,
  fault windows with their per-phase checks and verdict, collection gaps, plan sha256;
* ``GET /api/soaks/{id}/series/?metric=ttft_p99[&node=NAME]`` — one time series:
  ``[{metric, value, unit, node, time}]`` (400 for an unknown metric);
* ``POST /api/soaks/{id}/pause/`` ``{"reason"}``, ``…/resume/``, ``…/abort/`` ``{"reason"}`` —
  engineers only (403 for others who may see it; 409 when the soak is not in a state for it).

Permissions are the pages': a soak of an engagement the user may not see is 404 and absent
from lists.
"""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from acceptance.api.schema import Unpaginated
from acceptance.permissions import Role, engagements_for, has_role
from runners.soak import presentation, queries
from runners.soak.driver import soak_abort, soak_pause, soak_resume
from runners.soak.models import Soak
from runners.transport import TransportError

ABORT_WAIT_S = 5.0


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "conflict"
    default_code = "conflict"


class ProgressSerializer(serializers.Serializer):
    loaded_s = serializers.FloatField(help_text="real seconds of load collected")
    duration_s = serializers.FloatField(help_text="planned load, real seconds")
    remaining_s = serializers.FloatField(help_text="real seconds")
    percent = serializers.FloatField()
    plan_duration_s = serializers.FloatField(help_text="plan seconds (72 h = 259200)")
    plan_elapsed_s = serializers.FloatField(help_text="plan seconds")
    time_compression = serializers.FloatField(help_text="plan seconds per real second")
    paused_s = serializers.FloatField(help_text="real seconds paused")
    windows_planned = serializers.IntegerField()
    windows_collected = serializers.IntegerField()


class CheckSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField(source="description")
    requirement = serializers.CharField()
    state = serializers.CharField(source="verdict", help_text="pass, fail, insufficient or waiting")
    value = serializers.FloatField(source="measured", allow_null=True)
    unit = serializers.CharField()
    explanation = serializers.CharField(allow_blank=True)


class PhaseCheckSerializer(serializers.Serializer):
    check = serializers.CharField()
    metric = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()
    verdict = serializers.CharField()
    explanation = serializers.CharField()


class PhasesSerializer(serializers.Serializer):
    before = PhaseCheckSerializer(many=True)
    during = PhaseCheckSerializer(many=True)
    after = PhaseCheckSerializer(many=True)


class FaultSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    node = serializers.CharField()
    target = serializers.CharField(source="target_text")
    state = serializers.CharField()
    planned_start = serializers.DateTimeField(allow_null=True)
    planned_end = serializers.DateTimeField(allow_null=True)
    injected_at = serializers.DateTimeField(allow_null=True)
    healed_at = serializers.DateTimeField(allow_null=True)
    heal_armed_at = serializers.DateTimeField(allow_null=True)
    heal_verified_at = serializers.DateTimeField(allow_null=True)
    heal_method = serializers.CharField(allow_blank=True)
    heal_how = serializers.CharField(allow_blank=True)
    checks = PhasesSerializer()
    verdict = serializers.CharField()


class GapSerializer(serializers.Serializer):
    node = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    seconds = serializers.FloatField(allow_null=True)
    reason = serializers.CharField()


class SoakSerializer(serializers.ModelSerializer):
    """A soak with its progress, checks, fault windows and gaps."""

    engagement = serializers.CharField(source="gate_run.gate.engagement.name")
    gate = serializers.CharField(source="gate_run.gate.code")
    gate_run = serializers.IntegerField(source="gate_run_id")
    attempt = serializers.IntegerField(source="gate_run.attempt")
    simulated = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    checks = serializers.SerializerMethodField()
    faults = serializers.SerializerMethodField()
    gaps = serializers.SerializerMethodField()
    decision = serializers.SerializerMethodField()

    class Meta:
        model = Soak
        fields = ["id", "engagement", "gate", "gate_run", "attempt", "state", "simulated",
                  "plan_sha256", "started_at", "finished_at", "stop_reason", "error",
                  "progress", "checks", "faults", "gaps", "decision"]

    def get_simulated(self, soak) -> bool:
        return presentation.is_simulated(soak)

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, soak) -> dict:
        return ProgressSerializer(queries.soak_progress(soak)).data

    @extend_schema_field(CheckSerializer(many=True))
    def get_checks(self, soak) -> list:
        return CheckSerializer(presentation.check_rows(soak), many=True).data

    @extend_schema_field(FaultSerializer(many=True))
    def get_faults(self, soak) -> list:
        if self.context.get("brief"):
            return []
        return FaultSerializer(presentation.fault_table(soak), many=True).data

    @extend_schema_field(GapSerializer(many=True))
    def get_gaps(self, soak) -> list:
        return GapSerializer(queries.soak_gaps(soak), many=True).data

    def get_decision(self, soak) -> dict | None:
        view = presentation.decision_view(soak)
        return None if view is None else {"outcome": view["outcome"],
                                          "sentence": view["sentence"]}


class PointSerializer(serializers.Serializer):
    metric = serializers.CharField()
    value = serializers.FloatField()
    unit = serializers.CharField()
    node = serializers.CharField()
    time = serializers.DateTimeField(source="at")
    window = serializers.CharField(allow_null=True)


class ReasonSerializer(serializers.Serializer):
    # A missing or empty reason is the service's refusal (409, "no reason"); a body that is not
    # an object, or a reason that is not text, is 400.
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


def _reason(request) -> str:
    body = ReasonSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return body.validated_data["reason"]


def _require_engineer(request) -> None:
    if not has_role(request.user, Role.ENGINEER):
        raise PermissionDenied("only engineers may do this")


class SoakViewSet(Unpaginated, ReadOnlyModelViewSet):
    """G4 soaks the user may see, newest first."""

    unpaginated_actions = frozenset({"series"})

    serializer_class = SoakSerializer

    def get_queryset(self):
        rows = Soak.objects.filter(
            gate_run__gate__engagement__in=engagements_for(self.request.user)
        ).select_related("gate_run__gate__engagement").order_by("-id")
        if self.action == "list":
            if self.request.query_params.get("engagement"):
                rows = rows.filter(
                    gate_run__gate__engagement__name=self.request.query_params["engagement"])
            if self.request.query_params.get("state"):
                rows = rows.filter(state=self.request.query_params["state"])
        return rows

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "brief": self.action == "list"}

    @extend_schema(
        parameters=[OpenApiParameter("metric", str, required=True,
                                     description=f"one of {', '.join(queries.SERIES)}"),
                    OpenApiParameter("node", str, description="node name")],
        responses={200: PointSerializer(many=True),
                   400: OpenApiResponse(description="unknown metric")},
        summary="one metric's time series: metric, value, unit, node, time")
    def series(self, request, pk=None):
        soak = self.get_object()
        metric = request.query_params.get("metric", "")
        try:
            series = queries.soak_series(soak, metric,
                                         node=request.query_params.get("node") or None)
        except ValueError as error:
            raise ValidationError({"metric": str(error)}) from None
        points = [{**p, "metric": metric, "unit": series["unit"],
                   "window": None if p["window"] is None else str(p["window"])}
                  for p in series["points"]]
        return Response(PointSerializer(points, many=True).data)

    def _act(self, request, do):
        soak = self.get_object()
        _require_engineer(request)
        try:
            soak = do(soak)
        except ValueError as error:
            raise Conflict(str(error)) from None
        except TransportError as error:
            raise Conflict(f"a node could not be told: {error}") from None
        return Response(SoakSerializer(soak, context=self.get_serializer_context()).data)

    @extend_schema(request=ReasonSerializer, responses={
        200: SoakSerializer, 403: OpenApiResponse(description="not an engineer"),
        409: OpenApiResponse(description="not running, or no reason")},
        summary="pause the load (engineers); the pause is excluded from the soak time")
    def pause(self, request, pk=None):
        # the body is read after the soak is found and the engineer checked: a customer who
        # may not see it gets 404 whatever they send
        return self._act(request, lambda soak: soak_pause(
            soak=soak, actor=request.user.get_username(), reason=_reason(request)))

    @extend_schema(request=None, responses={
        200: SoakSerializer, 403: OpenApiResponse(description="not an engineer"),
        409: OpenApiResponse(description="not paused")},
        summary="resume a paused soak (engineers)")
    def resume(self, request, pk=None):
        return self._act(request, lambda soak: soak_resume(
            soak=soak, actor=request.user.get_username()))

    @extend_schema(request=ReasonSerializer, responses={
        200: SoakSerializer, 403: OpenApiResponse(description="not an engineer"),
        409: OpenApiResponse(description="already over, or no reason")},
        summary="abort (engineers): faults healed first, agents stopped, no decision")
    def abort(self, request, pk=None):
        return self._act(request, lambda soak: soak_abort(
            soak=soak, actor=request.user.get_username(), reason=_reason(request),
            wait_s=ABORT_WAIT_S))


urlpatterns = [
    path("soaks/", SoakViewSet.as_view({"get": "list"}), name="api-soak-list"),
    path("soaks/<int:pk>/", SoakViewSet.as_view({"get": "retrieve"}), name="api-soak-detail"),
    path("soaks/<int:pk>/series/", SoakViewSet.as_view({"get": "series"}),
         name="api-soak-series"),
    path("soaks/<int:pk>/pause/", SoakViewSet.as_view({"post": "pause"}), name="api-soak-pause"),
    path("soaks/<int:pk>/resume/", SoakViewSet.as_view({"post": "resume"}),
         name="api-soak-resume"),
    path("soaks/<int:pk>/abort/", SoakViewSet.as_view({"post": "abort"}), name="api-soak-abort"),
]
