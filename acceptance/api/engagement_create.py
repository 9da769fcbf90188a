"""``POST /api/engagements/``: create an engagement with its arrays, G1–G4 seeded from the
defaults (``gates.services.engagement_create``, as the page and the command do).

Project managers and superusers (token or session); anyone else gets 403. Bad input answers 400
with the field named (``{"name": ["…"]}``; an array's by its index from 0, as DRF does for
lists: ``{"arrays": {"1": {"serial": ["…"]}}}``), and nothing is stored.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from acceptance.api.serializers import EngagementSerializer
from acceptance.models import DEFAULT_REFERENCE_PROFILE, REFERENCE_PROFILES, Array, Engagement
from acceptance.permissions import Role, has_role
from gates.services import engagement_create


class ArrayInputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Array
        fields = ["model", "serial", "expected_drive_count", "drive_model", "link_speed_mbps",
                  "layout"]


class EngagementCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63,
                                 help_text="letters, digits, '.', '_' or '-', e.g. acme-prod")
    customer = serializers.CharField(max_length=200,
                                     help_text="the customer organisation (created if new)")
    start_date = serializers.DateField(help_text="G1–G4 are due at the end of weeks 2, 4, 7, 10")
    report_language = serializers.ChoiceField(choices=Engagement.Language.choices,
                                              default=Engagement.Language.ENGLISH)
    reference_profile = serializers.ChoiceField(choices=list(REFERENCE_PROFILES.items()),
                                                default=DEFAULT_REFERENCE_PROFILE)
    arrays = ArrayInputSerializer(many=True, required=False, default=list)

    def validate_arrays(self, arrays: list[dict]) -> list[dict]:
        seen: dict[str, int] = {}
        errors: dict[int, dict] = {}
        for index, array in enumerate(arrays):
            serial = array["serial"]
            if serial in seen:
                errors[index] = {"serial": [f"arrays[{seen[serial]}] has serial {serial} already"]}
            seen.setdefault(serial, index)
        if errors:
            raise ValidationError(errors)
        return arrays


ARRAY_KEY = re.compile(r"arrays\[(\d+)\]\.?(.*)")


def _api_errors(error: DjangoValidationError) -> dict:
    """The service's ``arrays[i].field`` keys (i from 1) in the shape DRF gives lists."""
    found: dict = {}
    nested: dict[int, dict] = {}
    for key, messages in error.message_dict.items():
        match = ARRAY_KEY.fullmatch(key)
        if match:
            index = int(match.group(1)) - 1
            nested.setdefault(index, {})[match.group(2) or "non_field_errors"] = messages
        else:
            found[key] = messages
    if nested:
        found["arrays"] = nested
    return found


class EngagementCreateMixin:
    """The ``create`` action of the engagements' viewset."""

    @extend_schema(
        request=EngagementCreateSerializer,
        responses={201: EngagementSerializer,
                   400: OpenApiResponse(description="a field is missing or invalid; the answer "
                                                    "names it, and nothing was created"),
                   403: OpenApiResponse(description="not a project manager")},
        summary="create an engagement with its arrays; G1–G4 seeded (project managers)")
    def create(self, request, *args, **kwargs):
        if not has_role(request.user, Role.PROJECT_MANAGER):
            raise PermissionDenied("only project managers may create engagements")
        body = EngagementCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            engagement = engagement_create(
                name=data["name"], customer=data["customer"], start_date=data["start_date"],
                report_language=data["report_language"],
                reference_profile=data["reference_profile"], arrays=data["arrays"],
                actor=request.user.get_username(), via="through the API")
        except DjangoValidationError as error:
            raise ValidationError(_api_errors(error)) from None
        created = self.base_queryset().get(pk=engagement.pk)
        return Response(EngagementSerializer(created, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)
