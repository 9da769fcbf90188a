"""What the API shows of each object. Read-only everywhere: the API changes state only through
its two actions (start a gate run, cancel one), which call the same services as the commands.

Measurements follow METRICS.md's JSON exactly — ``{"metric", "value", "unit", "labels"}`` —
plus the ids that place them in the evidence ledger. Secrets (credentials, the remote process
token) and server paths are never shown.
"""

from pathlib import Path

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from acceptance.models import AuditEntry, Engagement
from gates.evaluation import threshold_text
from gates.models import Criterion, CriterionVerdict, Decision, Gate, gate_due_date
from gates.presentation import criterion_text
from gates.services import criterion_spec
from reports.models import Report
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.probes import PROBES


def _absolute(serializer: serializers.Serializer, path: str) -> str:
    request = serializer.context.get("request")
    return request.build_absolute_uri(path) if request is not None else path


class GateSummarySerializer(serializers.ModelSerializer):
    due_date = serializers.DateField(read_only=True)
    # Plain text here (the full gate shows the enum): one choice set, one schema name.
    state = serializers.CharField(read_only=True,
                                  help_text="pending, passed, stopped or review")

    class Meta:
        model = Gate
        fields = ["code", "name", "order", "due_week", "due_date", "state"]


# The columns an engagement's answer reads (``EngagementViewSet`` loads only these).
ENGAGEMENT_COLUMNS = ("name", "customer__name", "start_date", "state", "stopped_reason",
                      "report_language", "is_lab", "max_parallel_nodes", "created_at")


def _gate_summary(code, name, order, due_week, due_date, state) -> dict:
    """One gate as ``GateSummarySerializer`` shows it (its fields, in its order)."""
    return {"code": str(code), "name": str(name), "order": int(order),
            "due_week": int(due_week), "due_date": due_date.isoformat(), "state": str(state)}


def gate_summaries(engagements) -> dict[int, list[dict]]:
    """The gates of a page of engagements as the answer shows them, by engagement id: one
    query of plain values (four model instances per engagement and their prefetch were a
    third of the list's CPU, issue 17). ``EngagementSerializer`` reads it from its context's
    ``"gates"``."""
    starts = {e.id: e.start_date for e in engagements}
    shown: dict[int, list[dict]] = {e.id: [] for e in engagements}
    for engagement_id, code, name, order, week, moved, state in Gate.objects.filter(
            engagement_id__in=starts).order_by("engagement_id", "order").values_list(
            "engagement_id", "code", "name", "order", "due_week", "rescheduled_due_date",
            "state"):
        shown[engagement_id].append(_gate_summary(
            code, name, order, week, gate_due_date(starts[engagement_id], week, moved), state))
    return shown


class EngagementSerializer(serializers.ModelSerializer):
    customer = serializers.CharField(source="customer.name", read_only=True)
    end_date = serializers.DateField(read_only=True)
    gates = GateSummarySerializer(many=True, read_only=True)

    class Meta:
        model = Engagement
        fields = ["name", "customer", "start_date", "end_date", "state", "stopped_reason",
                  "report_language", "is_lab", "max_parallel_nodes", "created_at", "gates"]

    def to_representation(self, engagement: Engagement) -> dict:
        """The fields above, written out: DRF's walk over them (a source lookup, a None check
        and a conversion per field, again for each of the four gates) was most of the list's
        CPU — 50 engagements are 1750 fields (issue 17). The same JSON, key for key
        (``tests/api/test_engagement_list_answer.py``): text as ``str``, dates ISO 8601, the
        creation time in DRF's own form (time zone, ``Z``)."""
        return {
            "name": str(engagement.name), "customer": str(engagement.customer.name),
            "start_date": engagement.start_date.isoformat(),
            "end_date": engagement.end_date.isoformat(), "state": str(engagement.state),
            "stopped_reason": str(engagement.stopped_reason),
            "report_language": str(engagement.report_language),
            "is_lab": bool(engagement.is_lab),
            "max_parallel_nodes": int(engagement.max_parallel_nodes),
            "created_at": self.fields["created_at"].to_representation(engagement.created_at),
            "gates": self.context["gates"][engagement.id] if "gates" in self.context else [
                _gate_summary(g.code, g.name, g.order, g.due_week, g.due_date, g.state)
                for g in engagement.gates.order_by("order")],
        }


class CriterionSerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="gate.engagement.name", read_only=True)
    gate = serializers.CharField(source="gate.code", read_only=True)
    requirement = serializers.SerializerMethodField(
        help_text="the requirement from the stored bounds: '>= 24', '0.29 … 0.4'")
    description_text = serializers.SerializerMethodField(
        help_text="the description with the stored bounds in it, in the active language")

    class Meta:
        model = Criterion
        fields = ["id", "engagement", "gate", "key", "position", "description",
                  "description_text", "requirement", "metric",
                  "label_filter", "aggregation", "operator", "threshold", "threshold_high",
                  "reference_value", "tolerance", "above_range_verdict", "unit", "source",
                  "min_samples", "blocking"]

    def get_requirement(self, criterion) -> str:
        return threshold_text(criterion_spec(criterion))

    def get_description_text(self, criterion) -> str:
        return criterion_text(criterion)


class CriterionThresholdSerializer(serializers.Serializer):
    """A threshold change: the bounds of the criterion's operator and the reason (audited)."""

    reason = serializers.CharField(allow_blank=True, trim_whitespace=True)
    threshold = serializers.FloatField(required=False)
    threshold_high = serializers.FloatField(required=False)
    reference_value = serializers.FloatField(required=False)
    tolerance = serializers.FloatField(required=False)


class GateCriterionSerializer(CriterionSerializer):
    class Meta(CriterionSerializer.Meta):
        fields = [f for f in CriterionSerializer.Meta.fields if f not in ("engagement", "gate")]


class GateSerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="engagement.name", read_only=True)
    due_date = serializers.DateField(read_only=True)
    criteria = GateCriterionSerializer(many=True, read_only=True)

    class Meta:
        model = Gate
        fields = ["engagement", "code", "name", "order", "due_week", "due_date", "state",
                  "description", "probe_plan", "criteria"]


class GateRunSerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="gate.engagement.name", read_only=True)
    gate = serializers.CharField(source="gate.code", read_only=True)
    decision = serializers.SerializerMethodField()
    rerun_node = serializers.CharField(
        source="rerun_node.name", read_only=True, allow_null=True, default=None,
        help_text="the one node a per-node re-run ran again (null: every node ran); the other "
                  "nodes' evidence is carried from ``rerun_of`` (see node-jobs' "
                  "``carried_from_gate_run``)")

    class Meta:
        model = GateRun
        fields = ["id", "engagement", "gate", "attempt", "state", "origin", "started_by",
                  "created_at", "finished_at", "error", "probe_timeouts",
                  "cancel_requested_at", "cancel_requested_by", "decision", "rerun_of",
                  "rerun_node", "reason"]

    @extend_schema_field(serializers.IntegerField(
        allow_null=True, help_text="The id of the run's decision (null while none was recorded)."))
    def get_decision(self, run: GateRun) -> int | None:
        """The id of the run's decision (null while none was recorded)."""
        try:
            return run.decision.id
        except Decision.DoesNotExist:
            return None


class GateRunStartSerializer(serializers.Serializer):
    """Body of a run start: optional per-run probe timeout overrides, ``{probe: seconds}``."""

    probe_timeouts = serializers.DictField(
        child=serializers.IntegerField(min_value=1, max_value=7 * 24 * 3600), required=False,
        default=dict, help_text="override a probe's timeout for this run, e.g. "
                                "{\"fio_seqread\": 120} (seconds, 1 … 604800)")

    def validate_probe_timeouts(self, value: dict) -> dict:
        unknown = sorted(set(value) - set(PROBES))
        if unknown:
            raise serializers.ValidationError(
                f"unknown probe(s) {', '.join(unknown)} (probes: {', '.join(sorted(PROBES))})")
        return value


class _ConfirmReasonFields(serializers.Serializer):
    reason = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=2000,
        help_text="why (audited); required for a one-node re-run and for re-running a gate "
                  "that has passed")
    confirm = serializers.BooleanField(
        required=False, default=False,
        help_text="must be true to re-run a gate that has passed (its new decision replaces "
                  "the pass)")


class GateRunStartBodySerializer(GateRunStartSerializer, _ConfirmReasonFields):
    """Body of a run start: probe timeout overrides, and reason + confirm for a passed gate."""


class GateRunRerunSerializer(_ConfirmReasonFields):
    """Body of a re-run of a finished attempt: ``node`` re-runs that node alone (the other
    nodes' evidence carried by reference); without it every node runs again."""

    node = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=64,
        help_text="node name: re-run this node alone; empty: re-run the whole gate")


class GateRunCancelSerializer(serializers.Serializer):
    gate_run = GateRunSerializer(read_only=True)
    killed = serializers.ListField(child=serializers.CharField(), read_only=True,
                                   help_text="one line per remote command killed (confirmed)")


class NodeJobSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", read_only=True)
    carried_from_gate_run = serializers.IntegerField(
        source="carried_from.gate_run_id", read_only=True, allow_null=True, default=None,
        help_text="in a per-node re-run: the gate run whose evidence of this node is carried "
                  "(null: the node ran in this gate run)")

    class Meta:
        model = NodeJob
        fields = ["id", "gate_run", "node", "state", "dispatched_at", "heartbeat_at",
                  "started_at", "finished_at", "error_kind", "error", "carried_from_gate_run"]


class ProbeRunSerializer(serializers.ModelSerializer):
    """A probe run's metadata; its raw output is read through ``…/output/``."""

    node = serializers.CharField(source="node.name", read_only=True, allow_null=True)
    output_url = serializers.SerializerMethodField()

    class Meta:
        model = ProbeRun
        fields = ["id", "gate_run", "node", "probe", "parser", "parser_version", "command",
                  "parameters", "labels", "arm", "tool_version", "exit_code", "stdout_sha256",
                  "stdout_size", "stderr_size", "started_at", "finished_at", "state",
                  "error_kind", "error", "simulated", "origin", "progress", "host", "output_url"]

    @extend_schema_field(OpenApiTypes.URI)
    def get_output_url(self, run: ProbeRun) -> str:
        return _absolute(self, reverse("api-probe-run-output", kwargs={"pk": run.pk}))


_SAMPLED_AT = serializers.DateTimeField()  # renders ``sampled_at`` as the declared field does


class MeasurementSerializer(serializers.ModelSerializer):
    """METRICS.md's ``{"metric", "value", "unit", "labels"}`` plus ids: the gate run, the probe
    run it was read from (null for derived figures), the node (by name), and for derived
    figures the ids of their inputs."""

    value = serializers.FloatField(read_only=True)
    node = serializers.CharField(source="node.name", read_only=True, allow_null=True)
    inputs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Measurement
        fields = ["id", "metric", "value", "unit", "labels", "gate_run", "probe_run", "node",
                  "derived", "inputs", "arm", "sampled_at"]

    def to_representation(self, instance: Measurement) -> dict:
        """The fields above, written directly (a page of 1000 rows through DRF's per-field
        machinery was most of the API's CPU); the same JSON as the declared fields give
        (``tests/api/test_measurement_paging.py`` compares the two)."""
        m = instance
        return {
            "id": m.id, "metric": m.metric, "value": float(m.value), "unit": m.unit,
            "labels": m.labels, "gate_run": m.gate_run_id, "probe_run": m.probe_run_id,
            "node": m.node.name if m.node_id is not None else None, "derived": m.derived,
            "inputs": [i.pk for i in m.inputs.all()], "arm": m.arm,
            "sampled_at": None if m.sampled_at is None
            else _SAMPLED_AT.to_representation(m.sampled_at),
        }

    def declared_representation(self, instance: Measurement) -> dict:
        """DRF's own rendering of the declared fields (what ``to_representation`` matches)."""
        return dict(super().to_representation(instance))


class VerdictSerializer(serializers.ModelSerializer):
    key = serializers.CharField(source="criterion.key", read_only=True)
    metric = serializers.CharField(source="criterion.metric", read_only=True)
    measurements = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = CriterionVerdict
        fields = ["position", "criterion", "key", "metric", "criterion_snapshot",
                  "measured_value", "unit", "verdict", "explanation", "measurements"]


class DecisionSerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="gate.engagement.name", read_only=True)
    gate = serializers.CharField(source="gate.code", read_only=True)
    verdicts = VerdictSerializer(many=True, read_only=True)
    report = serializers.SerializerMethodField()

    class Meta:
        model = Decision
        fields = ["id", "engagement", "gate", "gate_run", "outcome", "sentence", "decided_by",
                  "decided_at", "verdicts", "report"]

    @extend_schema_field(serializers.IntegerField(
        allow_null=True, help_text="The id of the decision's signed report (null until it is "
                                   "issued)."))
    def get_report(self, decision: Decision) -> int | None:
        """The id of the decision's signed report (null until it is issued)."""
        try:
            return decision.report.id
        except Report.DoesNotExist:
            return None


class ReportSerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="decision.gate.engagement.name", read_only=True)
    gate = serializers.CharField(source="decision.gate.code", read_only=True)
    outcome = serializers.CharField(source="decision.outcome", read_only=True)
    file_name = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Report
        fields = ["id", "decision", "engagement", "gate", "outcome", "file_name", "sha256",
                  "size_bytes", "signer", "signed_at", "simulated", "download_url"]

    @extend_schema_field(OpenApiTypes.STR)
    def get_file_name(self, report: Report) -> str:
        return Path(report.path).name

    @extend_schema_field(OpenApiTypes.URI)
    def get_download_url(self, report: Report) -> str:
        return _absolute(self, reverse("api-report-download", kwargs={"pk": report.pk}))


class AuditEntrySerializer(serializers.ModelSerializer):
    engagement = serializers.CharField(source="engagement.name", read_only=True)

    class Meta:
        model = AuditEntry
        fields = ["id", "engagement", "at", "actor", "action", "reason", "details"]
