"""Runs in the admin; probe runs and measurements are ledger (raw output, its sha256, parsed
figures): view-only."""

from django.contrib import admin

from acceptance.admin import LedgerAdmin
from runners import models


@admin.register(models.ProbeRun)
class ProbeRunAdmin(LedgerAdmin):
    list_display = ["probe", "node", "gate_run", "state", "exit_code", "simulated", "started_at"]
    exclude = ["stdout", "stderr"]


@admin.register(models.Measurement)
class MeasurementAdmin(LedgerAdmin):
    list_display = ["metric", "value", "unit", "node", "probe_run"]
    list_filter = ["metric"]


admin.site.register([models.GateRun, models.NodeJob])
