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
