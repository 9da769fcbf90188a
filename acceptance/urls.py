"""URL configuration."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from runners import views as runner_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("engagements/<slug:name>/gates/<str:code>/evidence/", runner_views.gate_evidence,
         name="gate-evidence"),
    path("engagements/<slug:name>/gates/<str:code>/collect/<slug:node>.py",
         runner_views.collection_script_download, name="collection-script"),
]
