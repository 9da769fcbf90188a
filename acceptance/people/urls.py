"""URLs of the People pages (login required) and their API (under /api/), the invitation's
link and password reset (both without login, under /accounts/ beside the login page)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from acceptance.people import api, views
from acceptance.people.forms import PasswordResetRequestForm

urlpatterns = [
    path("api/engagements/<str:name>/people/", api.PeopleView.as_view(), name="api-people"),
    path("api/engagements/<str:name>/people/<int:user_id>/", api.MemberView.as_view(),
         name="api-people-member"),
    path("api/engagements/<str:name>/people/<int:user_id>/role/", api.MemberRoleView.as_view(),
         name="api-people-role"),
    path("api/engagements/<str:name>/invitations/<int:invitation_id>/revoke/",
         api.InvitationRevokeView.as_view(), name="api-invitation-revoke"),
    path("engagements/<str:name>/people/", views.people, name="people"),
    path("engagements/<str:name>/people/invite/", views.people_invite, name="people-invite"),
    path("engagements/<str:name>/people/<int:user_id>/role/", views.people_role,
         name="people-role"),
    path("engagements/<str:name>/people/<int:user_id>/remove/", views.people_remove,
         name="people-remove"),
    path("engagements/<str:name>/invitations/<int:invitation_id>/revoke/",
         views.people_invitation_revoke, name="invitation-revoke"),
    path("accounts/invitation/<str:token>/", views.invitation_open, name="invitation-open"),
    path("accounts/invitation/", views.invitation_accept_view, name="invitation-accept"),
    path("accounts/password-reset/",
         auth_views.PasswordResetView.as_view(form_class=PasswordResetRequestForm),
         name="password_reset"),
    path("accounts/password-reset/sent/", auth_views.PasswordResetDoneView.as_view(),
         name="password_reset_done"),
    path("accounts/reset/<uidb64>/<token>/", auth_views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("accounts/reset/done/", auth_views.PasswordResetCompleteView.as_view(),
         name="password_reset_complete"),
]
