"""Gates and criteria in the admin; decisions and their verdicts are ledger: view-only. A gate's
state moves through decisions, a re-opening or an accepted review, never by hand here."""

from django.contrib import admin

from acceptance.admin import LedgerAdmin
from gates import models


@admin.register(models.Gate)
class GateAdmin(admin.ModelAdmin):
    list_display = ["engagement", "code", "name", "state", "due_week", "rescheduled_due_date"]
    list_filter = ["state", "code"]
    readonly_fields = ["state", "defaults_sha256", "rescheduled_due_date"]


@admin.register(models.Decision)
class DecisionAdmin(LedgerAdmin):
    list_display = ["gate", "outcome", "decided_at", "decided_by"]
    list_filter = ["outcome"]


@admin.register(models.CriterionVerdict)
class CriterionVerdictAdmin(LedgerAdmin):
    list_display = ["decision", "criterion", "verdict", "measured_value", "unit"]
    list_filter = ["verdict"]


admin.site.register(models.Criterion)
