"""Gates, their criteria (as data) and the decisions taken on them.

Each engagement gets its own copy of the four gates G1–G4 with the default criteria of
DOMAIN.md (``gates.defaults``); editing a threshold changes only that engagement's copy and is
recorded in the audit trail. Evaluation is a pure function (``gates.evaluation``).
"""

from datetime import timedelta

from django.db import models

from acceptance.models import Engagement


class Gate(models.Model):
    """One stop/go gate of an engagement, due at the end of week ``due_week`` (or on the
    ``rescheduled_due_date`` a person set with a reason).

    ``state``: pending (not run or last run produced no decision), passed, stopped (criteria not
    met: the engagement stops), review (a figure outside the reference range awaits a person).
    """

    class State(models.TextChoices):
        PENDING = "pending"
        PASSED = "passed"
        STOPPED = "stopped"
        REVIEW = "review"

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE, related_name="gates")
    code = models.CharField(max_length=4)
    name = models.CharField(max_length=100)
    order = models.PositiveSmallIntegerField()
    due_week = models.PositiveSmallIntegerField()
    rescheduled_due_date = models.DateField(
        null=True, blank=True,
        help_text="the due date a person moved it to, with a reason (audit trail); empty: the "
                  "end of week due_week",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    description = models.TextField(blank=True)
    probe_plan = models.JSONField(
        default=list,
        help_text="the probes this gate runs: [{probe, role, params, for_each}] (gates.defaults)",
    )
    defaults_sha256 = models.CharField(
        max_length=64, help_text="hash of the default definition this gate was copied from"
    )

    class Meta:
        ordering = ["engagement", "order"]
        constraints = [
            models.UniqueConstraint(fields=["engagement", "code"], name="gate_code_unique")
        ]

    def __str__(self) -> str:
        return f"{self.engagement.name} {self.code}"

    @property
    def due_date(self):
        if self.rescheduled_due_date is not None:
            return self.rescheduled_due_date
        return self.engagement.start_date + timedelta(weeks=self.due_week)

    @property
    def is_soak(self) -> bool:
        """True when the probe plan is a soak (a step ``{"expand": "soak", ...}``, G4 by
        default): data decides, not the gate code. A soak starts only as a soak."""
        return any(step.get("expand") == "soak" for step in self.probe_plan)

    def previous_gates(self):
        return self.engagement.gates.filter(order__lt=self.order)


class Criterion(models.Model):
    """One figure a gate requires, as data.

    ``operator``: ``>=`` / ``<=`` against ``threshold``; ``between`` ``threshold`` …
    ``threshold_high`` (below fails; above gives ``above_range_verdict``); ``within``
    ±``tolerance`` (a ratio) of ``reference_value``. ``aggregation`` says how several samples
    (nodes, drives) combine; ``each`` requires every sample to meet the criterion. ``source``
    says where the figure comes from.
    """

    class Operator(models.TextChoices):
        AT_LEAST = ">=", "at least"
        AT_MOST = "<=", "at most"
        BETWEEN = "between", "between"
        WITHIN = "within", "within ± of reference"

    class Aggregation(models.TextChoices):
        EACH = "each"
        MIN = "min"
        MAX = "max"
        SUM = "sum"
        MEAN = "mean"

    gate = models.ForeignKey(Gate, on_delete=models.CASCADE, related_name="criteria")
    key = models.SlugField(max_length=64)
    position = models.PositiveSmallIntegerField()
    description = models.CharField(max_length=300)
    metric = models.CharField(max_length=64)
    label_filter = models.JSONField(default=dict, blank=True)
    aggregation = models.CharField(max_length=8, choices=Aggregation.choices)
    operator = models.CharField(max_length=8, choices=Operator.choices)
    threshold = models.FloatField(null=True, blank=True)
    threshold_high = models.FloatField(null=True, blank=True)
    reference_value = models.FloatField(null=True, blank=True)
    tolerance = models.FloatField(null=True, blank=True)
    above_range_verdict = models.CharField(max_length=8, default="fail")
    unit = models.CharField(max_length=8)
    source = models.CharField(max_length=200)
    min_samples = models.PositiveSmallIntegerField(default=1)
    blocking = models.BooleanField(default=True)

    class Meta:
        ordering = ["gate", "position"]
        constraints = [
            models.UniqueConstraint(fields=["gate", "key"], name="criterion_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.gate.code} {self.key}"


class Decision(models.Model):
    """The outcome of a gate run: passed or stopped, with every criterion's verdict and evidence.

    Decisions are append-only: a re-run makes a new decision; the signed report of an older one
    stays as it was.
    """

    class Outcome(models.TextChoices):
        PASSED = "passed"
        STOPPED = "stopped"
        REVIEW = "review"

    gate = models.ForeignKey(Gate, on_delete=models.CASCADE, related_name="decisions")
    gate_run = models.OneToOneField(
        "runners.GateRun", on_delete=models.PROTECT, related_name="decision"
    )
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    sentence = models.TextField()
    decided_by = models.CharField(max_length=150)
    decided_at = models.DateTimeField()

    class Meta:
        ordering = ["-decided_at"]

    def __str__(self) -> str:
        return f"{self.gate}: {self.outcome}"


class CriterionVerdict(models.Model):
    """One criterion as judged in a decision: a snapshot of the criterion (it may be edited later),
    the measured value, the verdict and the measurements it used."""

    class Verdict(models.TextChoices):
        PASS = "pass"  # noqa: S105 (a verdict, not a password)
        FAIL = "fail"
        REVIEW = "review"
        INSUFFICIENT = "insufficient"

    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="verdicts")
    criterion = models.ForeignKey(Criterion, on_delete=models.PROTECT, related_name="verdicts")
    position = models.PositiveSmallIntegerField()
    criterion_snapshot = models.JSONField()
    measured_value = models.FloatField(null=True)
    unit = models.CharField(max_length=8)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    explanation = models.TextField()
    measurements = models.ManyToManyField("runners.Measurement", related_name="verdicts")

    class Meta:
        ordering = ["decision", "position"]

    def __str__(self) -> str:
        return f"{self.criterion.key}: {self.verdict}"
