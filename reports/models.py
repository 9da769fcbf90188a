"""Signed reports, their versions, sign-offs, download log and customer trust anchors.

A report file is written once and never changed. Re-issuing a report (after both parties
signed off, or when the customer uploads a countersigned copy) makes a new ``Report`` row with
the next ``version`` of the same series, naming the row it ``replaces`` and why.

A series is either the report of one gate decision (``about`` = that decision) or the final
acceptance report of an engagement (``kind`` final, ``about`` empty). ``decision`` stays the
one-to-one link of the version issued automatically at decision time (version 1), so
``decision.report`` keeps meaning "the report issued when the gate was decided".
"""

from django.conf import settings
from django.db import models


class Report(models.Model):
    """One signed PDF version: its file, hash and signer. Never rewritten once signed."""

    class Kind(models.TextChoices):
        GATE = "gate", "gate report"
        FINAL = "final", "final acceptance report"

    class Origin(models.TextChoices):
        SERVICE = "service", "signed by the service"
        COUNTERSIGNED = "countersigned", "countersigned by the customer (uploaded)"

    engagement = models.ForeignKey("acceptance.Engagement", on_delete=models.CASCADE,
                                   related_name="reports")
    decision = models.OneToOneField("gates.Decision", on_delete=models.PROTECT, null=True,
                                    blank=True, related_name="report",
                                    help_text="set on the version issued at decision time")
    about = models.ForeignKey("gates.Decision", on_delete=models.RESTRICT, null=True, blank=True,
                              related_name="report_versions",
                              help_text="the decision a gate report is about (every version)")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.GATE)
    version = models.PositiveIntegerField(default=1)
    replaces = models.OneToOneField("self", on_delete=models.RESTRICT, null=True, blank=True,
                                    related_name="replaced_by")
    reason = models.TextField(blank=True, help_text="why this version was issued")
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.SERVICE)
    signoff_complete = models.BooleanField(
        default=False, help_text="its sign-off page names both parties' approvals")
    issued_by = models.CharField(max_length=150, blank=True)
    path = models.CharField(max_length=500)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField()
    signer = models.CharField(max_length=300)
    signed_at = models.DateTimeField()
    simulated = models.BooleanField(default=False)
    outcome = models.CharField(
        max_length=16, blank=True,
        help_text="what the report states: passed, stopped or review (a final report: the "
                  "engagement's); empty on final reports issued before it was recorded")
    created_at = models.DateTimeField(auto_now_add=True, null=True)
    signing_seconds = models.FloatField(
        null=True, blank=True, help_text="time spent signing it (the metrics read it)")

    class Meta:
        ordering = ["engagement_id", "kind", "about_id", "version"]
        # One row per version of a series: two issued at once cannot both be "version N"
        # (the second is refused, reports.services); the backstop where row locks are not.
        constraints = [
            models.UniqueConstraint(fields=["about", "version"], condition=models.Q(kind="gate"),
                                    name="report_gate_version_unique"),
            models.UniqueConstraint(fields=["engagement", "version"],
                                    condition=models.Q(kind="final"),
                                    name="report_final_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.series_title} v{self.version}"

    def save(self, *args, **kwargs) -> None:
        # The version issued at decision time names its engagement and subject by its decision.
        if self.decision_id is not None:
            if self.engagement_id is None:
                self.engagement_id = self.decision.gate.engagement_id
            if self.about_id is None:
                self.about_id = self.decision_id
        super().save(*args, **kwargs)

    @property
    def series_title(self) -> str:
        if self.kind == self.Kind.FINAL:
            return f"{self.engagement.name} final acceptance report"
        return f"{self.engagement.name} {self.about.gate.code if self.about else '?'} report"

    def series(self) -> models.QuerySet:
        """Every version of this report's series, oldest first."""
        return Report.objects.filter(engagement_id=self.engagement_id, kind=self.kind,
                                     about_id=self.about_id).order_by("version")

    def is_latest(self) -> bool:
        return not self.series().filter(version__gt=self.version).exists()


class SignOff(models.Model):
    """One party's approval of a report's decision: the vendor's project manager or a
    representative of the customer organisation. Recorded once per party and report series."""

    class Party(models.TextChoices):
        VENDOR = "vendor", "vendor (project manager)"
        CUSTOMER = "customer", "customer representative"

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="signoffs",
                               help_text="the version that was approved")
    party = models.CharField(max_length=8, choices=Party.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             related_name="report_signoffs")
    name = models.CharField(max_length=150)
    role = models.CharField(max_length=150)
    comment = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        constraints = [models.UniqueConstraint(fields=["report", "party"],
                                               name="signoff_one_per_party")]

    def __str__(self) -> str:
        return f"{self.get_party_display()}: {self.name} at {self.at:%Y-%m-%d %H:%M}"


class ReportDownload(models.Model):
    """Who downloaded which report version, when and through what (append-only)."""

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="downloads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             related_name="report_downloads")
    username = models.CharField(max_length=150)
    at = models.DateTimeField(auto_now_add=True)
    via = models.CharField(max_length=8)  # "web" or "api"

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.username} downloaded {self.report_id} at {self.at:%Y-%m-%d %H:%M}"


class CustomerCertificate(models.Model):
    """A public certificate the customer uses to countersign reports of one engagement: a trust
    anchor for their signatures. Only public certificates are stored, never a private key."""

    engagement = models.ForeignKey("acceptance.Engagement", on_delete=models.CASCADE,
                                   related_name="customer_certificates")
    pem = models.TextField()
    subject = models.CharField(max_length=300)
    sha256_fingerprint = models.CharField(max_length=64)
    not_after = models.DateTimeField()
    uploaded_by = models.CharField(max_length=150)
    uploaded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["uploaded_at", "id"]
        constraints = [models.UniqueConstraint(fields=["engagement", "sha256_fingerprint"],
                                               name="customer_certificate_unique")]

    def __str__(self) -> str:
        return f"{self.subject} ({self.sha256_fingerprint[:16]}…)"
