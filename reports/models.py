"""Signed gate reports."""

from django.db import models


class Report(models.Model):
    """A signed PDF gate report: its file, hash and signer. Never rewritten once signed."""

    decision = models.OneToOneField("gates.Decision", on_delete=models.PROTECT,
                                    related_name="report")
    path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField()
    signer = models.CharField(max_length=300)
    signed_at = models.DateTimeField()
    simulated = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.path
