from django.contrib import admin

from runners import models


@admin.register(models.ProbeRun)
class ProbeRunAdmin(admin.ModelAdmin):
    list_display = ["probe", "node", "gate_run", "state", "exit_code", "simulated", "started_at"]
    exclude = ["stdout", "stderr"]


admin.site.register([models.GateRun, models.NodeJob, models.Measurement])
