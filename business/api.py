"""``GET /api/engagements/NAME/business-case/``: the case; ``POST``: a what-if (not stored).

Permissions are the pages': a customer sees only their own engagement (404 for another)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from acceptance.permissions import engagement_for
from business.services import ParameterInvalid, case_dict, case_for


class BusinessCaseView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(tags=["business case"], request=None, responses={200: OpenApiResponse(
        OpenApiTypes.OBJECT, description="the case, or established=false with the reason"),
        404: OpenApiResponse(description="no such engagement (or not visible to you)")},
        summary="the engagement's business case")
    def get(self, request, engagement_name: str):
        engagement = engagement_for(request.user, engagement_name)
        return Response(case_dict(case_for(engagement)))

    @extend_schema(tags=["business case"], request=OpenApiTypes.OBJECT, responses={
        200: OpenApiResponse(OpenApiTypes.OBJECT, description="the what-if case (not stored)"),
        400: OpenApiResponse(description="a parameter out of range: the field named")},
        summary="compute a what-if with other parameters, without storing them")
    def post(self, request, engagement_name: str):
        engagement = engagement_for(request.user, engagement_name)
        if not isinstance(request.data, dict):
            raise ValidationError({"detail": "the body must be a JSON object of parameters"})
        try:
            return Response(case_dict(case_for(engagement, dict(request.data))))
        except ParameterInvalid as refusal:
            raise ValidationError({"detail": str(refusal)}) from None
