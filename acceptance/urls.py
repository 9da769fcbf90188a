"""URL configuration: pages per app, the API under /api/, admin, login and language switch."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from acceptance import account_views, health
from acceptance.metrics import metrics_view

urlpatterns = [
    # Health (issue 14): no login, for the orchestrator; exempt from the HTTPS redirect.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/tokens/", account_views.api_tokens, name="api-tokens"),
    path("accounts/tokens/<int:token_id>/revoke/", account_views.api_token_revoke_view,
         name="api-token-revoke"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/", include("acceptance.api.urls")),
    path("", include("acceptance.web_urls")),
    path("", include("acceptance.people.urls")),  # People, invitations, password reset
    path("", include("runners.urls")),
    path("", include("runners.lab.urls")),  # the lab harness (stand-in nodes), by name
    path("", include("runners.soak.urls")),
    path("", include("reports.urls")),
    path("", include("notifications.urls")),  # notifications and calendar feeds
    path("metrics", metrics_view, name="metrics"),  # Prometheus (token or staff only)
]
