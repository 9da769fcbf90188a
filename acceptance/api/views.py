"""The REST API: read-only views of the evidence ledger (measurements, decisions and the audit
trail also as CSV: ``?format=csv``, ``acceptance.api.csv``) and its actions (start, cancel,
re-run a run; change a criterion's threshold, project managers).

Permissions are the pages' (``acceptance.permissions``): every queryset is filtered through
``engagements_for(request.user)``, so an object of an engagement the user may not see answers
404 and never appears in a list; project managers and engineers see every engagement, a
customer only their organisation's, someone without a role nothing. Starting and cancelling a
run is for engineers (and superusers): anyone else who may see the run gets 403.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.viewsets import ReadOnlyModelViewSet

from acceptance.api import serializers as s
from acceptance.api.csv import CSVListMixin
from acceptance.api.engagement_create import EngagementCreateMixin
from acceptance.api.errors import Conflict, ServiceUnavailable
from acceptance.api.pagination import LedgerCursorPagination
from acceptance.models import AuditEntry, Engagement
from acceptance.permissions import (
    Role,
    engagement_for,
    engagements_for,
    has_role,
    sees_every_engagement,
)
from gates.models import Criterion, CriterionVerdict, Decision, Gate
from gates.services import GateRefused, ThresholdInvalid, criterion_threshold_edit
from reports.api import ReportActionsMixin, ReportVersionSerializer
from reports.models import Report
from reports.services import download_record
from runners import exports
from runners.control import gate_run_cancel
from runners.dispatch import ConfirmationRequired
from runners.doorbell import BrokerUnavailable
from runners.launch import LaunchInvalid, gate_launch
from runners.live import output_read
from runners.models import GateRun, Measurement, NodeJob, ProbeRun

CANCEL_WAIT_S = 5.0  # how long a cancel request waits for the run's workers to stop
OUTPUT_LIMIT = 1 << 20  # at most this many bytes of raw output per request

_TYPES = {int: OpenApiTypes.INT, str: OpenApiTypes.STR, bool: OpenApiTypes.BOOL}
# Ids and offsets are 64-bit signed integers in every database we use: a larger number is the
# client's mistake (400), not the database's overflow (500).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


class ReportFileMismatch(APIException):
    status_code = status.HTTP_500_INTERNAL_SERVER_ERROR
    default_detail = "the report file on disk does not match its recorded sha256"
    default_code = "report_file_mismatch"


def _require_engineer(request) -> None:
    if not has_role(request.user, Role.ENGINEER):
        raise PermissionDenied("only engineers may start or cancel gate runs")


def _query_value(request, name: str, kind: type):
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ValidationError({name: f"expected an integer, not {raw!r}"}) from None
        if not INT_MIN <= value <= INT_MAX:
            raise ValidationError({name: f"{value} is out of range (at most {INT_MAX})"})
        return value
    if kind is bool:
        if raw.lower() in ("true", "1", "yes"):
            return True
        if raw.lower() in ("false", "0", "no"):
            return False
        raise ValidationError({name: f"expected true or false, not {raw!r}"})
    return raw


def filtered(**params: tuple):
    """Class decorator: list filters ``?name=value`` → ``queryset.filter(lookup=value)`` (or
    ``lookup(queryset, value)`` when it is a function), documented in the schema.
    ``params``: name → (lookup, type, description)."""

    def decorate(cls):
        cls.list_filters = params
        parameters = [OpenApiParameter(name, _TYPES[kind], description=text)
                      for name, (_, kind, text) in params.items()]
        return extend_schema_view(list=extend_schema(parameters=parameters))(cls)

    return decorate


class ScopedViewSet(ReadOnlyModelViewSet):
    """A read-only viewset whose rows belong to engagements the user may see.

    ``engagement_path``: the lookup from the model to its engagement.
    """

    engagement_path = "engagement"
    list_filters: dict[str, tuple] = {}

    def base_queryset(self) -> QuerySet:
        raise NotImplementedError

    def scope(self, queryset: QuerySet, visible: QuerySet[Engagement]) -> QuerySet:
        """``queryset`` limited to the rows of the ``visible`` engagements."""
        return queryset.filter(**{f"{self.engagement_path}__in": visible})

    def get_queryset(self) -> QuerySet:
        queryset = self.base_queryset()
        if not sees_every_engagement(self.request.user):
            # For staff the filter is true of every row, but its joins (up to the engagement)
            # let the planner start from the runs and sort what it found: with a million
            # measurements a filtered cursor page read every row of the matching runs
            # (25 000 at 1 M) instead of walking the primary key to its 101 rows.
            queryset = self.scope(queryset, engagements_for(self.request.user))
        if self.action == "list":
            for name, (lookup, kind, _) in self.list_filters.items():
                value = _query_value(self.request, name, kind)
                if value is not None:
                    queryset = (lookup(queryset, value) if callable(lookup)
                                else queryset.filter(**{lookup: value}))
        return queryset


_gate_filters = {
    "engagement": ("gate__engagement__name", str, "engagement name"),
    "gate": ("gate__code__iexact", str, "gate code (G1 … G4)"),
}


@extend_schema(tags=["engagements"])
@filtered(state=("state", str, "active, stopped or accepted"))
class EngagementViewSet(EngagementCreateMixin, ScopedViewSet):
    """Engagements the user may see, by name, with their gates' states; POST creates one
    (project managers)."""

    serializer_class = s.EngagementSerializer
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
    engagement_path = "pk"

    def base_queryset(self):
        # Only the columns the answer shows: a gate's plan (JSON) and description were decoded
        # for every gate of every engagement and never shown (issue 17: the API's CPU).
        return (Engagement.objects.select_related("customer").only(*s.ENGAGEMENT_COLUMNS)
                .order_by("name"))

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        if page is None:  # no pagination class: DRF's own list
            return super().list(request, *args, **kwargs)
        context = {**self.get_serializer_context(), "gates": s.gate_summaries(page)}
        return self.get_paginated_response(
            s.EngagementSerializer(page, many=True, context=context).data)


ENGAGEMENT_NAME = OpenApiParameter("engagement_name", OpenApiTypes.STR, OpenApiParameter.PATH,
                                   description="engagement name")
GATE_CODE = OpenApiParameter("code", OpenApiTypes.STR, OpenApiParameter.PATH,
                             description="gate code (G1 … G4)")


@extend_schema(tags=["gates"], parameters=[ENGAGEMENT_NAME])
class GateViewSet(ScopedViewSet):
    """The gates of one engagement (``/api/engagements/NAME/gates/CODE/``) with their criteria;
    ``…/runs/`` lists the gate's runs (GET) or starts one (POST, engineers)."""

    serializer_class = s.GateSerializer
    lookup_field = "code"

    def base_queryset(self):
        engagement = engagement_for(self.request.user, self.kwargs["engagement_name"])
        return (Gate.objects.filter(engagement=engagement).select_related("engagement")
                .prefetch_related("criteria").order_by("order"))

    def get_object(self):
        queryset = self.get_queryset()
        try:
            return queryset.get(code__iexact=self.kwargs["code"])
        except Gate.DoesNotExist:
            raise NotFound("no such gate") from None

    @extend_schema(parameters=[GATE_CODE], responses=s.GateRunSerializer(many=True),
                   summary="runs of the gate, newest first")
    def runs_list(self, request, engagement_name: str, code: str):
        gate = self.get_object()
        runs = gate.runs.select_related("gate__engagement", "decision").order_by("-attempt")
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(
            s.GateRunSerializer(page, many=True, context=self.get_serializer_context()).data)

    @extend_schema(
        parameters=[GATE_CODE], request=s.GateRunStartBodySerializer,
        responses={201: s.GateRunSerializer,
                   400: OpenApiResponse(description="invalid probe timeouts; a passed gate "
                                                    "without confirm: true and a reason"),
                   403: OpenApiResponse(description="not an engineer"),
                   404: OpenApiResponse(description="no such engagement or gate (or not "
                                                    "visible to you)"),
                   409: OpenApiResponse(description="the gate may not run now; the "
                                                    "message says why"),
                   503: OpenApiResponse(description="the task broker is not answering: "
                                                    "nothing was started")},
        summary="start a run of the gate (engineers)")
    def run_start(self, request, engagement_name: str, code: str):
        gate = self.get_object()
        _require_engineer(request)
        body = s.GateRunStartBodySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            gate_run = gate_launch(gate=gate, started_by=request.user.get_username(),
                                   probe_timeouts=body.validated_data["probe_timeouts"],
                                   reason=body.validated_data["reason"],
                                   confirmed=body.validated_data["confirm"])
        except LaunchInvalid as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except ConfirmationRequired as refusal:
            raise ValidationError({"confirm": [str(refusal)]}) from None
        except GateRefused as refusal:
            raise Conflict(str(refusal)) from None
        except BrokerUnavailable as refusal:
            raise ServiceUnavailable(f"refused: {refusal}") from None
        gate_run = GateRun.objects.select_related("gate__engagement").get(pk=gate_run.pk)
        data = s.GateRunSerializer(gate_run, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED,
                        headers={"Location": reverse("api-gate-run-detail",
                                                     kwargs={"pk": gate_run.pk})})


@extend_schema(tags=["gates"])
@filtered(**_gate_filters, metric=("metric", str, "metric name (METRICS.md)"))
class CriterionViewSet(ScopedViewSet):
    """Criteria as data: what each gate requires, as configured for the engagement."""

    serializer_class = s.CriterionSerializer
    engagement_path = "gate__engagement"

    def base_queryset(self):
        return (Criterion.objects.select_related("gate__engagement")
                .order_by("gate__engagement__name", "gate__order", "position"))

    @extend_schema(
        request=s.CriterionThresholdSerializer,
        responses={200: s.CriterionSerializer,
                   400: OpenApiResponse(description="a bound the criterion's rule refuses "
                                                    "(named: threshold, threshold_high, "
                                                    "reference_value, tolerance) or no reason"),
                   403: OpenApiResponse(description="not a project manager"),
                   409: OpenApiResponse(description="the engagement is accepted, a run of "
                                                    "the gate is in progress, or nothing "
                                                    "would change")},
        summary="change a criterion's bounds (project managers), audited with the reason")
    @action(detail=True, methods=["post"])
    def threshold(self, request, pk=None):
        criterion = self.get_object()
        if not has_role(request.user, Role.PROJECT_MANAGER):
            raise PermissionDenied("only project managers may change a threshold")
        body = s.CriterionThresholdSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = {k: v for k, v in body.validated_data.items() if k != "reason"}
        try:
            criterion_threshold_edit(criterion=criterion, actor=request.user.get_username(),
                                     reason=body.validated_data["reason"], values=values)
        except ThresholdInvalid as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except ValueError as refusal:
            raise Conflict(str(refusal)) from None
        criterion = self.base_queryset().get(pk=criterion.pk)
        return Response(s.CriterionSerializer(criterion,
                                              context=self.get_serializer_context()).data)


@extend_schema(tags=["runs"])
@filtered(**_gate_filters, state=("state", str, "queued, running, evaluating, done, failed "
                                                "or cancelled"))
class GateRunViewSet(ScopedViewSet):
    """Gate runs (attempts), newest first; ``…/cancel/`` cancels one (engineers)."""

    serializer_class = s.GateRunSerializer
    engagement_path = "gate__engagement"

    def base_queryset(self):
        return (GateRun.objects.select_related("gate__engagement", "decision", "rerun_node")
                .order_by("-created_at", "-id"))

    @extend_schema(
        request=None,
        responses={200: s.GateRunCancelSerializer,
                   403: OpenApiResponse(description="not an engineer"),
                   409: OpenApiResponse(description="the run is already over")},
        summary="cancel the run (engineers): kills its remote commands, waits briefly")
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        gate_run = self.get_object()
        _require_engineer(request)
        if gate_run.state in (GateRun.State.DONE, GateRun.State.FAILED, GateRun.State.CANCELLED):
            raise Conflict(f"gate run {gate_run.pk} is already over ({gate_run.state})")
        report = gate_run_cancel(gate_run=gate_run, cancelled_by=request.user.get_username(),
                                 wait_s=CANCEL_WAIT_S)
        if report.already_over:
            raise Conflict(f"gate run {gate_run.pk} is already over ({gate_run.state})")
        gate_run = self.base_queryset().get(pk=gate_run.pk)
        return Response(s.GateRunCancelSerializer(
            {"gate_run": gate_run, "killed": report.killed},
            context=self.get_serializer_context()).data)


    @extend_schema(
        request=s.GateRunRerunSerializer,
        responses={201: s.GateRunSerializer,
                   400: OpenApiResponse(description="a reason is missing, or the gate has "
                                                    "passed and confirm is not true"),
                   403: OpenApiResponse(description="not an engineer"),
                   409: OpenApiResponse(description="it may not be re-run now (not over, "
                                                    "superseded, another node's evidence "
                                                    "incomplete, …); the message says why"),
                   503: OpenApiResponse(description="the task broker is not answering: "
                                                    "nothing was started")},
        summary="re-run a finished attempt (engineers): one node alone, or every node")
    @action(detail=True, methods=["post"])
    def rerun(self, request, pk=None):
        gate_run = self.get_object()
        _require_engineer(request)
        body = s.GateRunRerunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node, reason = body.validated_data["node"], body.validated_data["reason"].strip()
        confirmed = body.validated_data["confirm"]
        if node and not reason:
            raise ValidationError({"reason": ["re-running one node needs a reason (audited)"]})
        who = request.user.get_username()
        try:
            new_run = gate_launch(gate=gate_run.gate, started_by=who, reason=reason,
                                  confirmed=confirmed, node=node, rerun_of=gate_run)
        except LaunchInvalid as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except ConfirmationRequired as refusal:
            raise ValidationError({"confirm": [str(refusal)]}) from None
        except GateRefused as refusal:
            raise Conflict(str(refusal)) from None
        except BrokerUnavailable as refusal:
            raise ServiceUnavailable(f"refused: {refusal}") from None
        new_run = self.base_queryset().get(pk=new_run.pk)
        return Response(s.GateRunSerializer(new_run, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED,
                        headers={"Location": reverse("api-gate-run-detail",
                                                     kwargs={"pk": new_run.pk})})


@extend_schema(tags=["runs"])
@filtered(gate_run=("gate_run_id", int, "gate run id"),
          node=("node__name", str, "node name"),
          state=("state", str, "job state"))
class NodeJobViewSet(ScopedViewSet):
    """The part of a gate run executed on one node."""

    serializer_class = s.NodeJobSerializer
    engagement_path = "gate_run__gate__engagement"

    def base_queryset(self):
        return NodeJob.objects.select_related("node", "carried_from").order_by("id")


def _evidence_of(model):
    """``?evidence_of=GATE_RUN``: what that gate run was decided on — its own rows plus, in a
    per-node re-run, the other nodes' rows it carries from the attempt that ran them."""
    def rows(gate_run: GateRun) -> QuerySet:
        if model is ProbeRun:
            return gate_run.evidence_probe_runs()
        return gate_run.evidence_measurements()

    def lookup(queryset, gate_run_id: int):
        gate_run = GateRun.objects.filter(pk=gate_run_id).first()
        if gate_run is None:
            return queryset.none()
        return queryset.filter(id__in=rows(gate_run).values("id"))

    return lookup


_EVIDENCE_OF_TEXT = ("gate run id: the rows its decision rests on, carried ones of a per-node "
                     "re-run included")


@extend_schema(tags=["evidence"])
@filtered(gate_run=("gate_run_id", int, "gate run id"),
          evidence_of=(_evidence_of(ProbeRun), int, _EVIDENCE_OF_TEXT),
          node=("node__name", str, "node name"),
          probe=("probe", str, "probe name"),
          state=("state", str, "probe run state"))
class ProbeRunViewSet(ScopedViewSet):
    """Probe runs: the command, tool version, exit status and the sha256 of the raw stdout.
    The raw output itself is read through ``…/output/``."""

    serializer_class = s.ProbeRunSerializer
    engagement_path = "gate_run__gate__engagement"

    def base_queryset(self):
        return (ProbeRun.objects.select_related("node").defer("stdout", "stderr", "remote_token")
                .order_by("started_at", "id"))

    @extend_schema(
        parameters=[
            OpenApiParameter("stream", OpenApiTypes.STR, enum=["stdout", "stderr"],
                             description="which stream (default stdout)"),
            OpenApiParameter("offset", OpenApiTypes.INT,
                             description="byte offset to read from (default 0)"),
            OpenApiParameter("limit", OpenApiTypes.INT,
                             description=f"at most this many bytes (default and maximum "
                                         f"{OUTPUT_LIMIT})"),
        ],
        responses={(200, "application/octet-stream"): OpenApiResponse(
            response=OpenApiTypes.BINARY,
            description="the raw bytes from offset; headers X-Next-Offset (where to read "
                        "next), X-Output-Finished (true when no more will come), "
                        "X-Output-Pruned-At (when retention pruned it) and "
                        "X-Probe-Run-State")},
        summary="raw output of the probe run, from a byte offset (live while it runs)")
    @action(detail=True, methods=["get"])
    def output(self, request, pk=None):
        run = self.get_object()
        stream = request.query_params.get("stream", "stdout")
        offset = _query_value(request, "offset", int)
        limit = _query_value(request, "limit", int)
        offset = 0 if offset is None else offset
        limit = OUTPUT_LIMIT if limit is None else limit
        if not 1 <= limit <= OUTPUT_LIMIT:
            raise ValidationError({"limit": f"must be 1 … {OUTPUT_LIMIT}"})
        try:
            piece = output_read(run.pk, stream=stream, offset=offset, limit=limit)
        except ValueError as error:
            raise ValidationError({"detail": str(error)}) from None
        response = HttpResponse(piece.data, content_type="application/octet-stream")
        response["X-Output-Offset"] = str(offset)
        response["X-Next-Offset"] = str(piece.next_offset)
        response["X-Output-Finished"] = "true" if piece.finished else "false"
        if piece.pruned_at is not None:  # retention: the signed report embeds these bytes
            response["X-Output-Pruned-At"] = piece.pruned_at.isoformat()
        response["X-Probe-Run-State"] = piece.state
        return response


@extend_schema(tags=["evidence"])
@filtered(gate_run=("gate_run_id", int, "gate run id"),
          evidence_of=(_evidence_of(Measurement), int, _EVIDENCE_OF_TEXT),
          metric=("metric", str, "metric name (METRICS.md)"),
          probe_run=("probe_run_id", int, "probe run id"),
          node=("node__name", str, "node name"),
          derived=("derived", bool, "true: derived figures only; false: read figures only"))
class MeasurementViewSet(CSVListMixin, ScopedViewSet):
    """Measurements in METRICS.md's JSON (metric, value, unit, labels) plus ids, in id order,
    a page at a time by cursor (``next``/``previous`` links, ``?limit=`` up to 1000); the list
    also as CSV (``?format=csv``: every filtered row, unit and value text included)."""

    serializer_class = s.MeasurementSerializer
    engagement_path = "gate_run__gate__engagement"
    csv_name = "measurements"
    pagination_class = LedgerCursorPagination  # keyset on id: no count, no offset walk

    @staticmethod
    def csv_rows(queryset):
        return exports.MEASUREMENT_HEADER, exports.measurement_rows(queryset)

    def scope(self, queryset, visible):
        # The visible runs' ids first (a customer has a few runs), then the list: joined up to
        # the engagement, or as a semi-join, the planner (before ANALYZE has seen a bulk
        # insert) read every row of those runs and sorted them (first page at 1 M rows
        # 450-600 ms, a deep one 50 ms); with the ids it walks the key (0.1 ms).
        runs = GateRun.objects.filter(gate__engagement__in=visible)
        return queryset.filter(gate_run_id__in=list(runs.values_list("id", flat=True)))

    def base_queryset(self):
        return (Measurement.objects.select_related("node")
                .prefetch_related(Prefetch("inputs", queryset=Measurement.objects.only("id")))
                .order_by("id"))


@extend_schema(tags=["decisions"])
@filtered(**_gate_filters, gate_run=("gate_run_id", int, "gate run id"),
          outcome=("outcome", str, "passed, stopped or review"))
class DecisionViewSet(CSVListMixin, ScopedViewSet):
    """Decisions with every criterion's verdict and the measurements it used; the list also
    as CSV (``?format=csv``: one row per verdict)."""

    serializer_class = s.DecisionSerializer
    engagement_path = "gate__engagement"
    csv_name = "decisions"

    @staticmethod
    def csv_rows(queryset):
        return exports.DECISION_HEADER, exports.decision_rows(
            CriterionVerdict.objects.filter(decision__in=queryset.values("id")))

    def base_queryset(self):
        verdicts = (CriterionVerdict.objects.select_related("criterion")
                    .prefetch_related(Prefetch("measurements",
                                               queryset=Measurement.objects.only("id")))
                    .order_by("position"))
        return (Decision.objects.select_related("gate__engagement", "report")
                .prefetch_related(Prefetch("verdicts", queryset=verdicts))
                .order_by("-decided_at", "-id"))


@extend_schema(tags=["engagements"])
@filtered(engagement=("engagement__name", str, "engagement name"),
          gate_run=("details__gate_run", int, "gate run id the entry names"),
          action=("action", str, "what was done (criterion threshold changed, node re-run …)"))
class AuditEntryViewSet(CSVListMixin, ScopedViewSet):
    """The audit trail: who did what, when and why, oldest first; also as CSV."""

    serializer_class = s.AuditEntrySerializer
    csv_name = "audit"

    def base_queryset(self):
        return AuditEntry.objects.select_related("engagement").order_by("at", "id")

    @staticmethod
    def csv_rows(queryset):
        return exports.AUDIT_HEADER, exports.audit_rows(queryset)


@extend_schema(tags=["reports"])
@filtered(engagement=("engagement__name", str, "engagement name"),
          gate=("about__gate__code__iexact", str, "gate code (G1 … G4)"),
          decision=("about_id", int, "decision id (every version of its report)"),
          kind=("kind", str, "gate or final"))
class ReportViewSet(ReportActionsMixin, ScopedViewSet):
    """Signed PDF reports, every version: metadata, the file through ``…/download/`` (logged),
    the series through ``…/versions/``, sign-offs through ``…/signoffs/``, the download log
    through ``…/downloads/`` and the customer's countersigned copy through
    ``…/countersigned/``."""

    serializer_class = ReportVersionSerializer
    engagement_path = "engagement"

    def base_queryset(self):
        return Report.objects.select_related("engagement", "about__gate").order_by("-id")

    @extend_schema(responses={(200, "application/pdf"): OpenApiTypes.BINARY},
                   summary="the signed PDF")
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        report = self.get_object()
        path = Path(report.path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound("the report file is missing on the server") from None
        if hashlib.sha256(data).hexdigest() != report.sha256:
            raise ReportFileMismatch()
        download_record(report=report, user=request.user, via="api")
        response = HttpResponse(data, content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="{path.name}"'
        response["X-Report-SHA256"] = report.sha256
        return response

