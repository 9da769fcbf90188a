"""Reports in the admin: the signed reports, their sign-offs and downloads are ledger
(view-only); the customers' certificates stay editable."""

from django.contrib import admin

from acceptance.admin import LedgerAdmin
from reports import models

for model in (models.Report, models.SignOff, models.ReportDownload):
    admin.site.register(model, LedgerAdmin)
admin.site.register(models.CustomerCertificate)
