"""Probe runs and the measurements read from them: the evidence ledger.

A ``GateRun`` is one attempt at a gate; it fans out as one ``NodeJob`` per node (a Celery task
each), and each job records one ``ProbeRun`` per command with its raw output and sha256 *before*
parsing. ``Measurement`` rows carry metric, value, unit and labels; derived figures (line
efficiency, baseline deviation) are measurements too, linked to their inputs. G3 comparison arms
and G4 soak samples are measurements with ``arm`` / ``sampled_at`` set, so they fit unchanged.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from acceptance.models import Engagement, Node
from runners import outputs


class GateRun(models.Model):
    """One attempt at a gate. ``state`` moves queued → running → evaluating → done | failed.

    ``failed`` means the run did not produce the evidence needed to decide (unreachable node,
    timeout, unparseable output): never a pass, never a stop.
    """

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        EVALUATING = "evaluating"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Origin(models.TextChoices):
        SSH = "ssh", "collected over SSH"
        IMPORTED = "imported", "imported evidence bundle"

    gate = models.ForeignKey("gates.Gate", on_delete=models.PROTECT, related_name="runs")
    attempt = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.SSH)
    started_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    probe_timeouts = models.JSONField(
        default=dict, blank=True, help_text="per-run timeout overrides: {probe: seconds}"
    )
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.CharField(max_length=150, blank=True)
    rerun_of = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="reruns",
        help_text="the finished attempt whose other nodes' evidence this one-node re-run carries")
    rerun_node = models.ForeignKey(
        Node, on_delete=models.PROTECT, null=True, blank=True, related_name="reruns",
        help_text="the one node a per-node re-run ran again (empty: every node ran)")
    reason = models.TextField(blank=True, help_text="why a person re-ran (audited)")
    evaluation_sent_at = models.DateTimeField(
        null=True, blank=True, help_text="when its evaluation task was last sent (empty while "
        "evaluating: the broker refused it, the sweep sends it again)")
    evaluation_sends = models.PositiveIntegerField(
        default=0, help_text="how many times its evaluation task was sent (bounded)")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["gate", "attempt"], name="gate_run_attempt_unique")
        ]

    def __str__(self) -> str:
        return f"{self.gate} run #{self.attempt}"

    @property
    def engagement(self) -> Engagement:
        return self.gate.engagement

    def carried_sources(self) -> dict[int, list[int]]:
        """Gate run id → node ids whose evidence this (per-node re-run) carries from that run."""
        sources: dict[int, list[int]] = {}
        for run_id, node_id in NodeJob.objects.filter(
                gate_run=self, carried_from__isnull=False).values_list(
                "carried_from__gate_run_id", "node_id"):
            sources.setdefault(run_id, []).append(node_id)
        return sources

    def evidence_probe_runs(self) -> models.QuerySet[ProbeRun]:
        """Every probe run a decision of this run rests on: its own, plus — in a per-node
        re-run — the other nodes' runs it carries from the attempt that ran them."""
        where = Q(gate_run=self)
        for run_id, nodes in self.carried_sources().items():
            where |= Q(gate_run_id=run_id, node_id__in=nodes)
        return ProbeRun.objects.filter(where)

    def evidence_measurement_sources(self) -> list[Q]:
        """``evidence_measurements`` as disjoint filters, one per gate run (this run's first):
        each is a range of the indexes that start with the gate run, which the run page walks
        a page at a time (an ``OR`` of them is not one)."""
        return [Q(gate_run_id=self.id)] + [
            Q(gate_run_id=run_id, node_id__in=nodes, derived=False, probe_run__isnull=False)
            for run_id, nodes in self.carried_sources().items()]

    def evidence_measurements(self) -> models.QuerySet[Measurement]:
        """The measurements this run is judged on: its own (read and derived) plus the read
        measurements of the carried probe runs (their derived figures are computed again)."""
        where = Q()
        for source in self.evidence_measurement_sources():
            where |= source
        return Measurement.objects.filter(where)


class NodeJob(models.Model):
    """The part of a gate run executed on one node, as one Celery task that claims it."""

    class State(models.TextChoices):
        QUEUED = "queued"
        CONNECTING = "connecting"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out", "timed out"

    ACTIVE = (State.CONNECTING, State.RUNNING)
    TERMINAL = (State.DONE, State.FAILED, State.CANCELLED, State.TIMED_OUT)

    gate_run = models.ForeignKey(GateRun, on_delete=models.CASCADE, related_name="node_jobs")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="jobs")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="when its task was sent (concurrency bound)"
    )
    sends = models.PositiveIntegerField(
        default=0, help_text="how many times its task was sent: re-sent while never claimed "
        "(runners.control.unclaimed_jobs_resend), up to RUNS_RESEND_MAX")
    lease = models.CharField(
        max_length=32, blank=True, help_text="token written when a worker claimed it; every "
        "step of that worker is a conditional update on it (runners.lease)")
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life of the worker executing it"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error_kind = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    carried_from = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="carried_into",
        help_text="in a per-node re-run: the earlier job whose evidence this node contributes "
                  "by reference (always the job that ran on the node, never a carried one)")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gate_run", "node"], name="node_job_unique")
        ]

    def __str__(self) -> str:
        return f"{self.gate_run} on {self.node.name}: {self.state}"


class ProbeRun(models.Model):
    """One command run for a probe, with its raw output stored before anything is parsed.

    ``node`` is empty for evidence the service itself holds (the BOM checklist snapshot).
    ``simulated`` is set when a lab stand-in tool produced the output; ``origin`` says whether it
    came over SSH or in an imported bundle.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        PARSING = "parsing"
        PARSED = "parsed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class ErrorKind(models.TextChoices):
        NONE = "", "none"
        UNREACHABLE = "unreachable"
        AUTHENTICATION = "authentication"
        HOST_KEY = "host_key", "host key mismatch or unknown"
        TIMEOUT = "timeout"
        EXIT_STATUS = "exit_status", "non-zero exit status"
        COMMAND_NOT_FOUND = "command_not_found", "command not found"
        PARSE = "parse", "unparseable output"
        PARAMETERS = "parameters", "invalid probe parameters"
        CANCELLED = "cancelled"
        LOST = "lost", "lost (the worker running it stopped)"
        OUTPUT_CAP = "output_cap", "output larger than the stored cap"
        DATABASE = "database", "the database connection was lost or it refused a write"
        STORAGE = "storage", "the raw output could not be written (outputs directory)"
        INTERNAL = "internal", "the service failed (its log has the traceback)"

    gate_run = models.ForeignKey(GateRun, on_delete=models.CASCADE, related_name="probe_runs")
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, null=True, blank=True, related_name="probe_runs"
    )
    probe = models.CharField(max_length=64)
    parser = models.CharField(max_length=64)
    parser_version = models.CharField(max_length=16)
    command = models.TextField()
    parameters = models.JSONField(default=dict, blank=True)
    labels = models.JSONField(default=dict, blank=True,
                              help_text="added to every measurement of this run (plan step)")
    arm = models.CharField(max_length=32, blank=True, help_text="G3 tier arm of this run")
    tool_version = models.CharField(max_length=200, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stdout = models.BinaryField(default=b"")
    stderr = models.BinaryField(default=b"")
    stdout_sha256 = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    error = models.TextField(blank=True)
    simulated = models.BooleanField(default=False)
    origin = models.CharField(max_length=16, default=GateRun.Origin.SSH)
    remote_token = models.CharField(
        max_length=64, blank=True, help_text="names the run's process-group file on the node"
    )
    progress = models.FloatField(null=True, blank=True, help_text="percent, where the tool says")
    stdout_size = models.BigIntegerField(default=0)
    stderr_size = models.BigIntegerField(default=0)
    host = models.CharField(max_length=253, blank=True,
                            help_text="host name the node reported (imported bundles)")
    stdout_file = models.CharField(
        max_length=80, blank=True, help_text="content-addressed file of stdout under "
        "OUTPUTS_DIR (runners.outputs); empty: the bytes are in stdout (rows before files)")
    stderr_file = models.CharField(max_length=80, blank=True,
                                   help_text="content-addressed file of stderr, as stdout_file")
    stderr_sha256 = models.CharField(max_length=64, blank=True)
    output_cap = models.BigIntegerField(
        null=True, blank=True, help_text="bytes stored at most per stream when it ran (the "
        "stated cap; kind output_cap when more came)")
    stdout_pruned_at = models.DateTimeField(
        null=True, blank=True, help_text="when retention removed stdout from the database (a "
        "signed report embeds it; sha256 and size kept): runners.retention")

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.probe} on {self.node.name if self.node else 'service'}"

    def raw(self, stream: str = "stdout") -> bytes:
        """The stored ``stream`` whole (its file, or the bytes of an older row; b"" when
        pruned). Callers that may meet a large output read ranges: ``runners.outputs``."""
        return outputs.output_bytes(self, stream)


class Measurement(models.Model):
    """One figure with its unit: read from a probe run, or derived from other measurements.

    ``probe_run`` is set for read figures (node, command, tool version and raw-output hash come
    from it); ``inputs`` for derived ones. ``arm`` names a G3 tier configuration, ``sampled_at``
    places a G4 soak sample in its time series.
    """

    gate_run = models.ForeignKey(GateRun, on_delete=models.CASCADE, related_name="measurements")
    probe_run = models.ForeignKey(
        ProbeRun, on_delete=models.CASCADE, null=True, blank=True, related_name="measurements"
    )
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, null=True, blank=True, related_name="measurements"
    )
    metric = models.CharField(max_length=64)
    value = models.FloatField()
    unit = models.CharField(max_length=8)
    labels = models.JSONField(default=dict)
    arm = models.CharField(max_length=32, blank=True)
    sampled_at = models.DateTimeField(null=True, blank=True)
    derived = models.BooleanField(default=False)
    inputs = models.ManyToManyField("self", symmetrical=False, related_name="derivations")

    class Meta:
        indexes = [models.Index(fields=["gate_run", "metric"]),
                   # the run page's order: a deep page of 100 000 is an index walk, not a sort
                   models.Index(fields=["gate_run", "metric", "node", "id"],
                                name="measurement_run_page"),
                   # the API's cursor pages filtered by metric or by run: ``WHERE metric = …
                   # AND id > … ORDER BY id`` is a range of one index whatever the planner's
                   # statistics say (before ANALYZE had seen a bulk insert, a filtered deep
                   # page at 1 M rows sorted 25 000 rows: 50–140 ms in the database)
                   models.Index(fields=["metric", "id"], name="measurement_metric_keyset"),
                   models.Index(fields=["gate_run", "id"], name="measurement_run_keyset")]

    def __str__(self) -> str:
        return f"{self.metric}={self.value:g} {self.unit} {self.labels}"


class OutputChunk(models.Model):
    """Output of a running probe, stored as it arrives so a reader can follow it from any
    byte offset. Rows of runs recorded before the live files of ``runners.outputs``; still read."""

    probe_run = models.ForeignKey(ProbeRun, on_delete=models.CASCADE, related_name="chunks")
    stream = models.CharField(max_length=6)  # stdout | stderr
    offset = models.BigIntegerField()
    end = models.BigIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["probe_run", "stream", "offset"]
        constraints = [models.UniqueConstraint(fields=["probe_run", "stream", "offset"],
                                               name="output_chunk_unique")]

    def __str__(self) -> str:
        return f"{self.probe_run_id} {self.stream} [{self.offset}, {self.end})"


class BarrierArrival(models.Model):
    """A node job reached a plan step that every node of its role starts at the same time
    (``runners.barrier``): the step starts on each node once all have arrived."""

    gate_run = models.ForeignKey(GateRun, on_delete=models.CASCADE, related_name="arrivals")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=32)
    arrived_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["gate_run", "node", "name"],
                                               name="barrier_arrival_unique")]

    def __str__(self) -> str:
        return f"{self.gate_run_id} {self.name} {self.node_id}"
