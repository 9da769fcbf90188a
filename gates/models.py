"""Gates, their criteria (as data) and the decisions taken on them.

Each engagement gets its own copy of the four gates G1–G4 with the default criteria of
DOMAIN.md (``gates.defaults``); editing a threshold changes only that engagement's copy and is
recorded in the audit trail. Evaluation is a pure function (``gates.evaluation``).
"""

import math
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext, gettext_noop

from acceptance.models import Engagement


def gate_due_date(start_date, due_week: int, rescheduled_due_date=None):
    """When a gate is due: the date a person moved it to, else the end of week ``due_week``
    of an engagement that starts on ``start_date`` (``Gate.due_date``; the API's list reads
    the three as plain values)."""
    if rescheduled_due_date is not None:
        return rescheduled_due_date
    return start_date + timedelta(weeks=due_week)


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
        return gate_due_date(self.engagement.start_date, self.due_week,
                             self.rescheduled_due_date)

    @property
    def is_soak(self) -> bool:
        """True when the probe plan is a soak (a step ``{"expand": "soak", ...}``, G4 by
        default): data decides, not the gate code. A soak starts only as a soak."""
        return any(step.get("expand") == "soak" for step in self.probe_plan)

    def previous_gates(self):
        return self.engagement.gates.filter(order__lt=self.order)


@dataclass(frozen=True)
class ThresholdRule:
    """What a bound of a criterion may be, by what it measures (METRICS.md units): ``low`` …
    ``high`` (None: unbounded; ``low_open``: the low end itself is not allowed), a whole
    number when ``integer``; ``text`` says it in words for a refusal."""

    text: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    integer: bool = False

    def allows(self, value: float) -> bool:
        if not math.isfinite(value) or (self.integer and not float(value).is_integer()):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or value <= self.high


#: By canonical unit (METRICS.md); ``METRIC_THRESHOLD_RULES`` overrides for figures whose
#: formula allows more (a gain or a deviation may be negative) or less (a drive count).
UNIT_THRESHOLD_RULES = {
    "ratio": ThresholdRule(gettext_noop("a ratio between 0 and 1 (0.83 means 83 %)"), 0, 1),
    "s": ThresholdRule(gettext_noop("a time in seconds above 0"), 0, low_open=True),
    "1": ThresholdRule(gettext_noop("a count: a whole number of at least 0"), 0, integer=True),
    "%": ThresholdRule(gettext_noop("a percentage between 0 and 100"), 0, 100),
    "K": ThresholdRule(gettext_noop("a temperature in kelvin above 0"), 0, low_open=True),
    "B/s": ThresholdRule(gettext_noop("a rate in B/s above 0"), 0, low_open=True),
    "B": ThresholdRule(gettext_noop("a size in bytes above 0"), 0, low_open=True),
    "1/s": ThresholdRule(gettext_noop("a rate per second above 0"), 0, low_open=True),
    "tok/s": ThresholdRule(gettext_noop("a rate in tok/s above 0"), 0, low_open=True),
}
METRIC_THRESHOLD_RULES = {
    "drive_count": ThresholdRule(gettext_noop("a drive count: a whole number of at least 1"), 1,
                                 integer=True),
    "throughput_gain": ThresholdRule(gettext_noop("a gain ratio above −1 (0.29 means +29 %)"), -1,
                                     low_open=True),
    "baseline_deviation": ThresholdRule(
        gettext_noop("a deviation ratio above −1 (−0.10 means 10 % below the reference)"), -1,
        low_open=True),
}
TOLERANCE_RULE = ThresholdRule(
    gettext_noop("a ratio above 0 and at most 1 (0.10 means ±10 %)"), 0, 1, low_open=True)
#: The bounds each operator needs (the rest of a criterion is its definition).
OPERATOR_BOUNDS = {
    ">=": ("threshold",),
    "<=": ("threshold",),
    "between": ("threshold", "threshold_high"),
    "within": ("reference_value", "tolerance"),
}


def threshold_rule(metric: str, unit: str) -> ThresholdRule | None:
    """The rule for a bound of ``metric`` in ``unit``; None for a unit METRICS.md lacks."""
    return METRIC_THRESHOLD_RULES.get(metric) or UNIT_THRESHOLD_RULES.get(unit)


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
    reference_figure = models.CharField(
        max_length=64, blank=True,
        help_text="the reference figure its bounds come from (acceptance_core.profiles.FIGURES); "
                  "empty: its bounds are its own")
    reference_profile = models.CharField(
        max_length=64, blank=True,
        help_text="the reference profile whose figure the bounds hold (the engagement's)")

    class Meta:
        ordering = ["gate", "position"]
        constraints = [
            models.UniqueConstraint(fields=["gate", "key"], name="criterion_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.gate.code} {self.key}"

    def clean(self) -> None:
        """Refuse bounds that cannot mean what the criterion measures, each error naming the
        field and the rule: a ratio 0 … 1, a time above 0, a drive count a whole number ≥ 1,
        ``between`` low ≤ high, a ``within`` tolerance 0 < t ≤ 1 around a non-zero reference.
        The page, the API (``gates.services.criterion_threshold_edit``) and the admin (its
        ModelForm calls this) share it."""
        errors: dict[str, str] = {}
        rule = threshold_rule(self.metric, self.unit)
        for name in OPERATOR_BOUNDS.get(self.operator, ()):
            value = getattr(self, name)
            if value is None:
                errors[name] = gettext("%(field)s: operator %(operator)s needs it") % {
                    "field": name, "operator": self.operator}
                continue
            field_rule = TOLERANCE_RULE if name == "tolerance" else rule
            if field_rule is not None and not field_rule.allows(value):
                what = gettext("the tolerance") if name == "tolerance" else self.metric
                errors[name] = gettext("%(field)s: %(what)s is %(rule)s; %(value)s is not") % {
                    "field": name, "what": what, "rule": gettext(field_rule.text),
                    "value": f"{value:g}"}
        if self.operator == "between" and not errors and self.threshold > self.threshold_high:
            errors["threshold"] = gettext(
                "threshold: the low threshold is above the high one (%(low)s > %(high)s)") % {
                    "low": f"{self.threshold:g}", "high": f"{self.threshold_high:g}"}
        if self.operator == "within" and "reference_value" not in errors \
                and self.reference_value == 0:
            errors["reference_value"] = gettext(
                "reference_value: the reference value must not be 0")
        if errors:
            raise ValidationError(errors)


class DecisionQuerySet(models.QuerySet):
    def reported(self) -> "DecisionQuerySet":
        """Decisions whose signed report (version 1) exists: only these count for a gate (a
        decision and its signed report are one outcome; a decision whose report is missing is
        found by recovery, ``runners.launch.runs_recover``)."""
        return self.filter(report__isnull=False)

    def unreported(self) -> "DecisionQuerySet":
        return self.filter(report__isnull=True)


class Decision(models.Model):
    """The outcome of a gate run: passed or stopped, with every criterion's verdict and evidence.

    Decisions are append-only: a re-run makes a new decision; the signed report of an older one
    stays as it was. A decision moves its gate (``gates.services.decision_settle``) only
    together with its signed report, in the report's transaction.
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

    objects = DecisionQuerySet.as_manager()

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
