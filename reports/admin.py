from django.contrib import admin

from reports import models

admin.site.register(models.Report)
