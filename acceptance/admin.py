"""The admin: people's roles, inventory, and a view-only window on the ledger.

The ledger (audit trail, decisions and verdicts, measurements, probe runs, reports, sign-offs,
downloads) changes only through the audited services, so its admin pages show and never add,
change or delete (``LedgerAdmin``; a POST to change or delete answers 403). An engagement's
state and stop reason are read-only here too: they move through decisions and a re-opening
with a reason. An engagement added here gets G1–G4 seeded as on the "New engagement" page.
"""

from django.contrib import admin, messages
from django.db import transaction

from acceptance import models
from gates.services import engagement_seed


class LedgerAdmin(admin.ModelAdmin):
    """View-only: rows of the ledger are written by the services, never by hand."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ArrayInline(admin.TabularInline):
    model = models.Array
    extra = 1


@admin.register(models.Engagement)
class EngagementAdmin(admin.ModelAdmin):
    list_display = ["name", "customer", "start_date", "state", "is_lab"]
    list_filter = ["state", "is_lab"]
    readonly_fields = ["state", "stopped_reason"]
    inlines = [ArrayInline]
    actions = ["gates_seed_action"]

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)  # its arrays first
        if not change:
            engagement_seed(engagement=form.instance, actor=request.user.get_username(),
                            via="in the admin")

    @admin.action(description="Seed the default gates G1–G4 (engagements without gates)")
    def gates_seed_action(self, request, queryset) -> None:
        seeded = []
        with transaction.atomic():
            for engagement in queryset.filter(gates__isnull=True).distinct():
                engagement_seed(engagement=engagement, actor=request.user.get_username(),
                                via="in the admin", action="gates seeded")
                seeded.append(engagement.name)
        self.message_user(request, f"G1–G4 seeded for: {', '.join(seeded)}" if seeded
                          else "every selected engagement has its gates already",
                          messages.SUCCESS if seeded else messages.WARNING)


@admin.register(models.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "engagement", "role", "address", "port", "host_key_fingerprint"]


@admin.register(models.Credential)
class CredentialAdmin(admin.ModelAdmin):
    # The encrypted secret is never shown or edited here.
    fields = ["name"]
    list_display = ["name", "created_at"]


@admin.register(models.AuditEntry)
class AuditEntryAdmin(LedgerAdmin):
    list_display = ["at", "engagement", "actor", "action"]
    list_filter = ["action"]
    search_fields = ["engagement__name", "actor", "reason"]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Roles are for superusers to give here (people management itself has its own pages)."""

    list_display = ["user", "role", "organisation"]
    list_filter = ["role", "organisation"]
    search_fields = ["user__username", "user__email"]

    def has_module_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    has_add_permission = has_module_permission
    has_change_permission = has_view_permission
    has_delete_permission = has_view_permission


admin.site.register([models.Organisation, models.Array, models.BomItem])


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
