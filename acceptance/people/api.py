"""The People page through the REST API (under /api/engagements/NAME/people/): list members and
invitations (project managers and engineers), invite, change a role, remove access and revoke
an invitation (project managers). The same services and permissions as the page: another
organisation's engagement answers 404, a customer 403; a refusal naming a field answers 400
``{field: [message]}``, any other refusal 409. The invitation's link only ever goes by mail.
"""

from __future__ import annotations

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from acceptance.api.errors import Conflict
from acceptance.models import Engagement, Invitation, Membership
from acceptance.people.services import (
    PeopleRefused,
    engagement_member,
    engagement_members,
    invitation_revoke,
    member_remove,
    member_role_change,
    person_invite,
)
from acceptance.permissions import STAFF_ROLES, Role, engagement_for, has_role

FIELDS = ("email", "role")


class MemberSerializer(serializers.Serializer):
    user_id = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="user.username")
    email = serializers.EmailField(source="user.email")
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    organisation = serializers.CharField(source="organisation.name", allow_null=True,
                                         default=None)


class InvitationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Membership.Role.choices)
    invited_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    status = serializers.SerializerMethodField()

    def get_status(self, invitation: Invitation) -> str:
        return invitation.status(self.context["now"])


class PeopleSerializer(serializers.Serializer):
    members = MemberSerializer(many=True)
    invitations = InvitationSerializer(many=True)


class InviteSerializer(serializers.Serializer):
    email = serializers.EmailField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class InviteResultSerializer(serializers.Serializer):
    email = serializers.EmailField()
    invited = serializers.BooleanField(help_text="true: a link was mailed; false: the account "
                                                 "existed and has the role now")
    invitation = InvitationSerializer(allow_null=True)
    member = MemberSerializer(allow_null=True)


class RoleSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


def _refusal(refusal: PeopleRefused) -> Exception:
    message = str(refusal)
    for field in FIELDS:  # the services' messages name the field first ("email: …")
        if message.startswith((f"{field}:", f"{field}：")):
            return ValidationError({field: [message]})
    return Conflict(message)


class _PeopleView(APIView):
    def engagement(self, request, name: str, *, manage: bool) -> Engagement:
        engagement = engagement_for(request.user, name)
        if not has_role(request.user, *STAFF_ROLES):
            raise PermissionDenied("only the vendor's project managers and engineers see who "
                                   "works on an engagement")
        if manage and not has_role(request.user, Role.PROJECT_MANAGER):
            raise PermissionDenied("only a project manager may do this")
        return engagement

    def context(self) -> dict:
        return {"now": timezone.now()}


_NO = {403: OpenApiResponse(description="not a project manager (or a customer)"),
       404: OpenApiResponse(description="no such engagement, or not yours to see")}


class PeopleView(_PeopleView):
    @extend_schema(tags=["people"], responses={200: PeopleSerializer, **_NO},
                   summary="the engagement's members and invitations (staff)")
    def get(self, request, name: str):
        engagement = self.engagement(request, name, manage=False)
        data = {"members": list(engagement_members(engagement).order_by("user__username")),
                "invitations": list(engagement.invitations.all())}
        return Response(PeopleSerializer(data, context=self.context()).data)

    @extend_schema(tags=["people"], request=InviteSerializer,
                   responses={201: InviteResultSerializer,
                              400: OpenApiResponse(description="a bad address or role, a "
                                                               "person who has a role already"),
                              409: OpenApiResponse(description="the mail could not be sent"),
                              **_NO},
                   summary="invite someone by e-mail (project managers)")
    def post(self, request, name: str):
        engagement = self.engagement(request, name, manage=True)
        body = InviteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            outcome = person_invite(
                engagement=engagement, email=body.validated_data["email"],
                role=body.validated_data["role"], actor=request.user.get_username(),
                site_url=request.build_absolute_uri("/").rstrip("/"))
        except PeopleRefused as refusal:
            raise _refusal(refusal) from None
        result = {"email": outcome.email, "invited": outcome.invitation is not None,
                  "invitation": outcome.invitation, "member": outcome.membership}
        return Response(InviteResultSerializer(result, context=self.context()).data,
                        status=status.HTTP_201_CREATED)


class MemberView(_PeopleView):
    def member(self, engagement: Engagement, user_id: int) -> Membership:
        membership = engagement_member(engagement, user_id)
        if membership is None:
            raise Http404("no such member of this engagement")
        return membership

    @extend_schema(tags=["people"], request=None,
                   responses={204: None, 409: OpenApiResponse(description="the last project "
                                                                          "manager"), **_NO},
                   summary="remove a person's access (project managers)")
    def delete(self, request, name: str, user_id: int):
        engagement = self.engagement(request, name, manage=True)
        try:
            member_remove(engagement=engagement, membership=self.member(engagement, user_id),
                          actor=request.user.get_username())
        except PeopleRefused as refusal:
            raise _refusal(refusal) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemberRoleView(MemberView):
    @extend_schema(tags=["people"], request=RoleSerializer,
                   responses={200: MemberSerializer,
                              400: OpenApiResponse(description="a bad or unchanged role, a "
                                                               "customer role for someone "
                                                               "not of the organisation"),
                              409: OpenApiResponse(description="the last project manager"),
                              **_NO},
                   summary="change a person's role (project managers)")
    def post(self, request, name: str, user_id: int):
        engagement = self.engagement(request, name, manage=True)
        body = RoleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            membership = member_role_change(
                engagement=engagement, membership=self.member(engagement, user_id),
                role=body.validated_data["role"], actor=request.user.get_username())
        except PeopleRefused as refusal:
            raise _refusal(refusal) from None
        return Response(MemberSerializer(membership).data)


class InvitationRevokeView(_PeopleView):
    @extend_schema(tags=["people"], request=None,
                   responses={200: InvitationSerializer,
                              409: OpenApiResponse(description="not pending"), **_NO},
                   summary="revoke a pending invitation (project managers)")
    def post(self, request, name: str, invitation_id: int):
        engagement = self.engagement(request, name, manage=True)
        invitation = engagement.invitations.filter(pk=invitation_id).first()
        if invitation is None:
            raise Http404("no such invitation of this engagement")
        try:
            invitation = invitation_revoke(invitation=invitation,
                                           actor=request.user.get_username())
        except PeopleRefused as refusal:
            raise _refusal(refusal) from None
        return Response(InvitationSerializer(invitation, context=self.context()).data)
