from django.contrib import admin

from reports import models

admin.site.register(models.Report)
admin.site.register(models.SignOff)
admin.site.register(models.ReportDownload)
admin.site.register(models.CustomerCertificate)
