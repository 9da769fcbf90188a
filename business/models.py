"""The customer's business-case parameters, one row per engagement (empty = not given)."""

from __future__ import annotations

from django.db import models

from acceptance.models import Engagement
from business.case import ARRAY_PRICE_DEFAULT


class BusinessParameters(models.Model):
    engagement = models.OneToOneField(Engagement, on_delete=models.CASCADE,
                                      related_name="business_parameters")
    currency = models.CharField(max_length=3, blank=True, default="CNY")
    nodes = models.PositiveIntegerField(null=True, blank=True)
    gpus_per_node = models.PositiveIntegerField(null=True, blank=True)
    gpu_cost_per_hour = models.FloatField(null=True, blank=True)
    gpu_purchase_price = models.FloatField(null=True, blank=True)
    gpu_depreciation_years = models.FloatField(null=True, blank=True)
    hosting_per_node_year = models.FloatField(null=True, blank=True)
    tokens_per_day = models.FloatField(null=True, blank=True)
    resume_share = models.FloatField(null=True, blank=True)
    cache_hit_share = models.FloatField(null=True, blank=True)
    switches_per_hour = models.FloatField(null=True, blank=True)
    array_price = models.FloatField(null=True, blank=True, default=ARRAY_PRICE_DEFAULT,
                                    help_text="default: the FX100 vendor figure")
    arrays = models.PositiveIntegerField(null=True, blank=True)
    horizon_years = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return f"business parameters of {self.engagement}"
