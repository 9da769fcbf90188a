"""The report endpoints of the REST API (mixed into ``acceptance.api.views.ReportViewSet``):
``…/versions/`` every version of the report's series, ``…/signoffs/`` list (GET) and sign off
(POST: the vendor's project manager or a customer of the engagement's organisation),
``…/downloads/`` the download log (project managers), ``…/countersigned/`` upload the customer's
countersigned copy (multipart field ``pdf``; the engagement's customer only), and the download
itself is logged. Same permissions as the pages: invisible objects 404 (the viewset's queryset),
wrong role 403.
"""

from __future__ import annotations

from pathlib import Path

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from acceptance.api.errors import Conflict
from acceptance.api.schema import Unpaginated
from acceptance.api.throttles import UPLOAD_THROTTLES
from acceptance.permissions import Role, has_role
from reports import services
from reports.forms import max_verify_bytes, too_large_message
from reports.models import Report, ReportDownload, SignOff


class SignOffSerializer(serializers.ModelSerializer):
    report_version = serializers.IntegerField(source="report.version", read_only=True)

    class Meta:
        model = SignOff
        fields = ["id", "report", "report_version", "party", "name", "role", "comment", "at"]
        read_only_fields = fields


class SignOffCreateSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                    default="")


class ReportDownloadSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReportDownload
        fields = ["id", "report", "username", "at", "via"]
        read_only_fields = fields


class ReportVersionSerializer(serializers.ModelSerializer):
    """A report version's metadata: which series (kind, decision), version, what it replaces."""

    engagement = serializers.CharField(source="engagement.name", read_only=True)
    gate = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()
    file_name = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Report
        fields = ["id", "engagement", "kind", "decision", "about", "gate", "outcome", "version",
                  "replaces", "reason", "origin", "signoff_complete", "issued_by", "file_name",
                  "sha256", "size_bytes", "signer", "signed_at", "simulated", "download_url"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_gate(self, report: Report) -> str | None:
        return report.about.gate.code if report.about_id else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_outcome(self, report: Report) -> str | None:
        return report.about.outcome if report.about_id else None

    @extend_schema_field(OpenApiTypes.STR)
    def get_file_name(self, report: Report) -> str:
        return Path(report.path).name

    @extend_schema_field(OpenApiTypes.URI)
    def get_download_url(self, report: Report) -> str:
        path = reverse("api-report-download", kwargs={"pk": report.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class ReportActionsMixin(Unpaginated):
    """Actions of the report viewset (``get_object`` gives only visible reports)."""

    unpaginated_actions = frozenset({"versions", "signoffs", "downloads"})
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    @extend_schema(responses=ReportVersionSerializer(many=True),
                   summary="every version of this report's series, oldest first")
    @action(detail=True, methods=["get"])
    def versions(self, request, pk=None):
        report = self.get_object()
        rows = report.series().select_related("engagement", "about__gate")
        return Response(ReportVersionSerializer(rows, many=True,
                                                context=self.get_serializer_context()).data)

    @extend_schema(
        methods=["GET"], responses=SignOffSerializer(many=True),
        summary="sign-offs recorded on this report's series")
    @extend_schema(
        methods=["POST"], request=SignOffCreateSerializer,
        responses={201: SignOffSerializer,
                   403: OpenApiResponse(description="neither the vendor's project manager nor "
                                                    "a customer of this engagement"),
                   409: OpenApiResponse(description="your party has already signed off")},
        summary="sign off the decision as your party; the second party's sign-off issues a "
                "new version (header X-New-Report)")
    @action(detail=True, methods=["get", "post"])
    def signoffs(self, request, pk=None):
        report = self.get_object()
        if request.method == "GET":
            rows = SignOff.objects.filter(report__in=report.series()).select_related("report")
            return Response(SignOffSerializer(rows, many=True).data)
        if services.signoff_party(request.user, report.engagement) is None:
            raise PermissionDenied("only the vendor's project manager or a customer of this "
                                   "engagement's organisation may sign off")
        body = SignOffCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            signoff, new = services.signoff_record(report=report, user=request.user,
                                                   comment=body.validated_data["comment"])
        except services.ReportRefused as refusal:
            raise Conflict(str(refusal)) from None
        headers = {"X-New-Report": str(new.pk)} if new is not None else {}
        return Response(SignOffSerializer(signoff).data, status=status.HTTP_201_CREATED,
                        headers=headers)

    @extend_schema(responses={200: ReportDownloadSerializer(many=True),
                              403: OpenApiResponse(description="not a project manager")},
                   summary="who downloaded this report version, newest first (project managers)")
    @action(detail=True, methods=["get"])
    def downloads(self, request, pk=None):
        report = self.get_object()
        if not has_role(request.user, Role.PROJECT_MANAGER):
            raise PermissionDenied("only project managers see the download log")
        return Response(ReportDownloadSerializer(report.downloads.all(), many=True).data)

    @extend_schema(
        request={"multipart/form-data": {"type": "object",
                                         "properties": {"pdf": {"type": "string",
                                                                "format": "binary"}}}},
        responses={201: ReportVersionSerializer,
                   400: OpenApiResponse(description="no file, or the file is refused: the "
                                                    "message says which check failed"),
                   403: OpenApiResponse(description="not the engagement's customer"),
                   429: OpenApiResponse(description="too many uploads: Retry-After says "
                                                    "when to try again")},
        summary="upload the customer's countersigned copy of this (latest) version")
    @action(detail=True, methods=["post"], throttle_classes=UPLOAD_THROTTLES)
    def countersigned(self, request, pk=None):
        report = self.get_object()
        # only the customer: a PM uploading "the customer's" copy could forge it
        if services.signoff_party(request.user, report.engagement) != SignOff.Party.CUSTOMER:
            raise PermissionDenied("only the customer of this engagement may upload a "
                                   "countersigned report")
        upload = request.FILES.get("pdf")
        if upload is None:
            raise ValidationError({"pdf": ["send the countersigned PDF as multipart field pdf"]})
        if upload.size > max_verify_bytes():
            raise ValidationError({"pdf": [too_large_message()]})
        try:
            new = services.countersigned_store(report=report, data=upload.read(),
                                               uploaded_by=request.user.get_username())
        except services.ReportRefused as refusal:
            raise ValidationError({"pdf": [str(refusal)]}) from None
        return Response(ReportVersionSerializer(new, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)
