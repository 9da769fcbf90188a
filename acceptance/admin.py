from django.contrib import admin

from acceptance import models


@admin.register(models.Engagement)
class EngagementAdmin(admin.ModelAdmin):
    list_display = ["name", "customer", "start_date", "state", "is_lab"]
    list_filter = ["state", "is_lab"]


@admin.register(models.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "engagement", "role", "address", "port", "host_key_fingerprint"]


@admin.register(models.Credential)
class CredentialAdmin(admin.ModelAdmin):
    # The encrypted secret is never shown or edited here.
    fields = ["name"]
    list_display = ["name", "created_at"]


admin.site.register([models.Organisation, models.Array, models.BomItem, models.AuditEntry])


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # Only the sha256 is stored; neither it nor any key is shown. Tokens are made on the
    # "API tokens" page or with manage.py api_token (the key is shown once, there).
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at"]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "expires_at",
                    "revoked_at"]
    list_filter = ["revoked_at"]

    def has_add_permission(self, request):
        return False
