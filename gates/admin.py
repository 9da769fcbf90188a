from django.contrib import admin

from gates import models

admin.site.register([models.Gate, models.Criterion, models.Decision, models.CriterionVerdict])
