"""An engagement's set-up through the REST API, as on its pages: a node enrolled (engineers), the
bill of materials uploaded as CSV and an item ticked, a stopped engagement re-opened (project
managers). The same services: another organisation's engagement answers 404, the wrong role
403, a refusal naming a field 400 ``{field: [message]}``, any other refusal 409.

Enrolling a node reads the host key ``address:port`` presents and pins it only if it is the
``fingerprint`` the caller read on the node's console (``ssh-keygen -lf …``), then checks the
login — one call for the page's two steps. Jump hosts are enrolled on the page.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import Http404
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from acceptance.api.errors import Conflict
from acceptance.bom import CsvRefused, bom_csv_import
from acceptance.models import Credential, Engagement, Node
from acceptance.permissions import Role, engagement_for, has_role
from acceptance.services import (
    EnrolmentRefused,
    bom_item_tick,
    engagement_reopen,
    host_key_fetch,
    node_enrol,
    node_fields_check,
)
from runners.transport import AuthenticationFailed, TransportError, private_key_type

MAX_PRIVATE_KEY_CHARS = 16 * 1024
MAX_BOM_BYTES = 1 << 20


def _engagement(request, name: str, role: str) -> Engagement:
    engagement = engagement_for(request.user, name)  # 404 when not the visitor's to see
    if not has_role(request.user, role):
        raise PermissionDenied(f"only a {role.replace('_', ' ')} may do this")
    return engagement


class NodeEnrolSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63)
    role = serializers.ChoiceField(
        choices=Node.Role.choices,
        error_messages={"invalid_choice": '"{input}" is not a node role: one of '
                        + ", ".join(Node.Role.values) + "."})
    address = serializers.CharField(max_length=253)
    port = serializers.IntegerField(min_value=1, max_value=65535, default=22)
    fingerprint = serializers.CharField(
        max_length=100, help_text="SHA256:… of the node's host key, read on its console")
    ssh_user = serializers.CharField(max_length=32)
    private_key = serializers.CharField(max_length=MAX_PRIVATE_KEY_CHARS, trim_whitespace=False,
                                        write_only=True, help_text="OpenSSH private key text")
    passphrase = serializers.CharField(required=False, default="", allow_blank=True,
                                       trim_whitespace=False, write_only=True)
    array = serializers.CharField(required=False, default="", allow_blank=True,
                                  help_text="serial number of the engagement's array")
    interface = serializers.CharField(required=False, default="", allow_blank=True)
    fio_target = serializers.CharField(required=False, default="", allow_blank=True)
    use_sudo = serializers.BooleanField(required=False, default=False)


class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    role = serializers.CharField()
    address = serializers.CharField()
    port = serializers.IntegerField()
    ssh_user = serializers.CharField()
    host_key_fingerprint = serializers.CharField()
    array = serializers.CharField(source="array.serial", allow_null=True, default=None)


class BomItemSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    description = serializers.CharField()
    quantity = serializers.IntegerField()
    part_number = serializers.CharField()
    serials = serializers.JSONField()
    ticked_by = serializers.CharField()
    ticked_at = serializers.DateTimeField(allow_null=True)


class ReopenSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)


def _field_errors(error: DjangoValidationError) -> ValidationError:
    if hasattr(error, "error_dict"):
        return ValidationError(error.message_dict)
    return ValidationError({"non_field_errors": error.messages})


_NO = {403: OpenApiResponse(description="not of the role that may do this"),
       404: OpenApiResponse(description="no such engagement, or not yours to see")}


class NodeEnrolView(APIView):
    @extend_schema(tags=["set-up"], request=NodeEnrolSerializer,
                   responses={201: NodeSerializer,
                              400: OpenApiResponse(description="a field refused, named"),
                              409: OpenApiResponse(description="the node presents another host "
                                                               "key, or the login failed"),
                              **_NO},
                   summary="enrol a node: its host key pinned when it matches the fingerprint "
                           "read on its console, the login checked (engineers)")
    @sensitive_variables("body", "data", "credential")
    def post(self, request, engagement_name: str):
        engagement = _engagement(request, engagement_name, Role.ENGINEER)
        body = NodeEnrolSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            private_key_type(data["private_key"], data["passphrase"] or None)
        except AuthenticationFailed:
            raise ValidationError({"private_key": [
                "does not open as an Ed25519, ECDSA or RSA private key (with this "
                "passphrase)"]}) from None
        array = None
        if data["array"]:
            array = engagement.arrays.filter(serial=data["array"]).first()
            if array is None:
                raise ValidationError({"array": [f"{engagement.name} has no array with serial "
                                                 f"{data['array']}"]})
        if engagement.nodes.filter(name=data["name"]).exists():
            raise ValidationError({"name": [f"{engagement.name} has a node named "
                                            f"{data['name']} already"]})
        credential_name = f"{engagement.name}-{data['name']}"
        if Credential.objects.filter(name=credential_name).exists():
            raise ValidationError({"name": [f"a stored key named {credential_name} exists "
                                            f"already: choose another node name"]})
        fields = {"engagement": engagement, "name": data["name"], "role": data["role"],
                  "address": data["address"], "port": data["port"],
                  "ssh_user": data["ssh_user"], "jump_host": None, "array": array,
                  "interface": data["interface"], "fio_target": data["fio_target"],
                  "use_sudo": data["use_sudo"]}
        try:
            node_fields_check(**fields)
        except DjangoValidationError as error:
            raise _field_errors(error) from None
        try:
            host_key = host_key_fetch(address=data["address"], port=data["port"])
        except TransportError as error:
            raise Conflict(f"{data['address']}:{data['port']}: the host key could not be "
                           f"read ({error.kind}): {error}") from None
        credential = Credential.from_secret(credential_name, data["private_key"],
                                            data["passphrase"])
        try:
            node = node_enrol(**fields, credential=credential, host_key=host_key,
                              confirmed_fingerprint=data["fingerprint"],
                              actor=request.user.get_username())
        except EnrolmentRefused as refusal:
            raise Conflict(str(refusal)) from None
        except DjangoValidationError as error:
            raise _field_errors(error) from None
        return Response(NodeSerializer(node).data, status=status.HTTP_201_CREATED)


class BomUploadView(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(tags=["set-up"],
                   request={"multipart/form-data": {
                       "type": "object", "properties": {"file": {"type": "string",
                                                                 "format": "binary"}}}},
                   responses={201: BomItemSerializer(many=True),
                              400: OpenApiResponse(description="the CSV refused whole: the "
                                                               "line and column named"),
                              409: OpenApiResponse(description="the engagement is accepted"),
                              **_NO},
                   summary="append the items of a BOM CSV file (description, quantity, part "
                           "number, serials), all or none (project managers)")
    def post(self, request, engagement_name: str):
        engagement = _engagement(request, engagement_name, Role.PROJECT_MANAGER)
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": ["a CSV file is required"]})
        if upload.size > MAX_BOM_BYTES:
            raise ValidationError({"file": [f"larger than {MAX_BOM_BYTES >> 20} MiB"]})
        try:
            items = bom_csv_import(engagement=engagement, raw=upload.read(),
                                   filename=upload.name, actor=request.user.get_username())
        except CsvRefused as refusal:
            raise ValidationError({"file": [f"refused, nothing was added: {refusal}"]}) from None
        except ValueError as refusal:
            raise Conflict(str(refusal)) from None
        return Response(BomItemSerializer(items, many=True).data, status=status.HTTP_201_CREATED)


class BomTickView(APIView):
    @extend_schema(tags=["set-up"], request=None,
                   responses={200: BomItemSerializer,
                              409: OpenApiResponse(description="the engagement is accepted"),
                              **_NO},
                   summary="tick a BOM item as delivered and checked (project managers)")
    def post(self, request, engagement_name: str, position: str):
        engagement = _engagement(request, engagement_name, Role.PROJECT_MANAGER)
        item = engagement.bom_items.filter(position=position).first()
        if item is None:
            raise Http404(f"{engagement.name} has no BOM item {position}")
        try:
            item = bom_item_tick(item=item, actor=request.user.get_username())
        except ValueError as refusal:
            raise Conflict(str(refusal)) from None
        return Response(BomItemSerializer(item).data)


class ReopenView(APIView):
    parser_classes = [JSONParser, FormParser]

    @extend_schema(tags=["set-up"], request=ReopenSerializer,
                   responses={200: OpenApiResponse(description="re-opened: its state"),
                              400: OpenApiResponse(description="no reason given"),
                              409: OpenApiResponse(description="the engagement is not stopped"),
                              **_NO},
                   summary="re-open a stopped engagement with a reason (project managers)")
    def post(self, request, engagement_name: str):
        engagement = _engagement(request, engagement_name, Role.PROJECT_MANAGER)
        body = ReopenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            with transaction.atomic():
                engagement = engagement_reopen(engagement=engagement,
                                               actor=request.user.get_username(),
                                               reason=body.validated_data["reason"])
        except ValueError as refusal:
            raise Conflict(str(refusal)) from None
        return Response({"name": engagement.name, "state": engagement.state})
