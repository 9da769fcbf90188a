"""Deliveries in the admin: the record of what was sent, view-only."""

from django.contrib import admin

from notifications.models import Delivery


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "engagement", "event", "channel", "recipient", "status",
                    "attempts", "status_code")
    list_filter = ("status", "channel", "event")
    exclude = ("body",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
