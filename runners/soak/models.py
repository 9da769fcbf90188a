"""The G4 soak: a long run of steady load on the inference nodes with faults injected on
schedule, as rows the live page and the report read (``runners.soak.queries``).

One ``Soak`` belongs to one G4 ``GateRun``; it carries the plan it ran (a snapshot with its
sha256, see ``runners.soak.plan``), its state and time accounting. The samples themselves are
``runners.Measurement`` rows of that gate run (metric, value, unit, node, ``sampled_at``,
labels ``{"soak_window": i}``), each linked to the ``ProbeRun`` that collected the raw bytes
(command, tool version, sha256 of the collected bytes). Around them:

* ``SoakAgent`` — the load-and-sampling agent detached on one node (it survives the service),
  with the byte offsets up to which its output files have been collected;
* ``FaultWindow`` — one planned fault: when, what, where; the heal armed on the node (how,
  verified when), injected and healed times, the safety checks run, and its outcome;
* ``CollectionGap`` — a span in which the service was not collecting (worker restart, node
  unreachable), recorded explicitly, never hidden;
* ``SoakEvent`` — the soak's log: started, paused, resumed, fault armed/injected/healed,
  aborted, re-attached …;
* ``FaultTarget`` — a node interface or array drive an engineer marked as allowed for fault
  injection, with the explicit confirmation (who, when, the words). No fault runs elsewhere.

Times: ``*_at`` fields are wall-clock (UTC) times; ``*_s`` fields in a plan are *plan seconds*
(the 72 h plan), divided by ``Soak.time_compression`` to get real seconds in the lab (factor 1
on customer nodes).
"""

from __future__ import annotations

from django.db import models

from acceptance.models import Engagement, Node


class FaultTarget(models.Model):
    """A fault-injection target an engineer explicitly allowed: a node's interface for
    ``link_down`` (``target`` = interface name, optionally ``netns/interface`` in the lab) or an
    array drive for ``drive_out`` (``target`` = drive index as text) on the array's controller
    node. ``confirmation`` holds the words the engineer confirmed with."""

    class Kind(models.TextChoices):
        LINK_DOWN = "link_down", "single link down"
        DRIVE_OUT = "drive_out", "single drive out of the array"

    engagement = models.ForeignKey(Engagement, on_delete=models.CASCADE,
                                   related_name="fault_targets")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="fault_targets")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    target = models.CharField(max_length=128)
    confirmed_by = models.CharField(max_length=150)
    confirmed_at = models.DateTimeField()
    confirmation = models.TextField()
    argv = models.JSONField(default=dict, blank=True,
                            help_text="the exact commands confirmed: {inject, heal, status}")
    argv_sha256 = models.CharField(max_length=64, blank=True)
    plan_sha256 = models.CharField(max_length=64, blank=True,
                                   help_text="the soak plan confirmed against; void after an edit")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "kind", "target"],
                                               name="fault_target_unique")]

    def __str__(self) -> str:
        return f"{self.node.name} {self.kind} {self.target}"


class Soak(models.Model):
    """The soak of one G4 gate run.

    ``state``: starting → running ⇄ paused → collecting (load finished, last bytes and heals
    being settled) → evaluating → done; or aborted (by a person, by cancel, or on timeout:
    every injected fault healed first) or failed (no evidence to decide: the reason in
    ``error``). ``plan`` is the plan as run (``plan_sha256`` its canonical hash);
    ``loaded_s`` the real seconds of load collected so far; ``paused_s`` the real seconds spent
    paused (excluded from the schedule). ``driver_token`` names the worker loop that owns the
    soak (a restarted worker takes over with a new token, the old loop stops).
    ``stop_reason`` says, for a stopped G4, which fault window and which check failed.
    """

    class State(models.TextChoices):
        STARTING = "starting"
        RUNNING = "running"
        PAUSED = "paused"
        COLLECTING = "collecting"
        EVALUATING = "evaluating"
        DONE = "done"
        ABORTED = "aborted"
        FAILED = "failed"

    ACTIVE = (State.STARTING, State.RUNNING, State.PAUSED, State.COLLECTING)

    gate_run = models.OneToOneField("runners.GateRun", on_delete=models.CASCADE,
                                    related_name="soak")
    state = models.CharField(max_length=16, choices=State.choices, default=State.STARTING)
    plan = models.JSONField(help_text="the soak plan as run (runners.soak.plan)")
    plan_sha256 = models.CharField(max_length=64)
    time_compression = models.FloatField(default=1.0,
                                         help_text="plan seconds per real second (lab only)")
    started_at = models.DateTimeField(null=True, blank=True)
    load_started_at = models.DateTimeField(null=True, blank=True,
                                           help_text="node time of the agents' start")
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True,
                                       help_text="after this the soak aborts (healing first)")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    driver_token = models.CharField(max_length=32, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_s = models.FloatField(default=0.0)
    loaded_s = models.FloatField(default=0.0)
    pause_requested = models.BooleanField(default=False)
    abort_requested_at = models.DateTimeField(null=True, blank=True)
    abort_requested_by = models.CharField(max_length=150, blank=True)
    abort_reason = models.TextField(blank=True)
    checks = models.JSONField(default=dict, blank=True,
                              help_text="latest state of each steady-state check: "
                                        "{check: {state, value, unit, window, at}}")
    figures = models.JSONField(default=list, blank=True,
                               help_text="the span figures of the latest driver tick: "
                                         "[{metric, value, unit, labels, node}]")
    fault_checks = models.JSONField(
        null=True, blank=True, help_text="each fault's checks per phase as last judged: "
        "{fault: {phase: [{check, metric, value, unit, verdict, explanation}]}}; null: not "
        "judged since it existed (the page judges the figures itself)")
    chart_bucket_windows = models.PositiveIntegerField(
        default=0, help_text="windows per chart bucket, fixed at the first window folded "
                             "(0: none folded yet); runners.soak.digest")
    stop_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"soak of {self.gate_run}: {self.state}"

    @property
    def duration_s(self) -> float:
        """Planned load in real seconds (the plan's duration ÷ the compression)."""
        return float(self.plan["duration_s"]) / self.time_compression


class SoakAgent(models.Model):
    """The agent running the load and the correctness probes on one node, detached from any
    SSH session (``setsid``), writing JSON lines into ``remote_dir``; the service collects them
    by byte offset (``offsets``: file name → bytes collected, always at a line end)."""

    class State(models.TextChoices):
        STARTING = "starting"
        RUNNING = "running"
        FINISHED = "finished"
        STOPPED = "stopped"
        LOST = "lost"

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="agents")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="soak_agents")
    state = models.CharField(max_length=16, choices=State.choices, default=State.STARTING)
    remote_dir = models.CharField(max_length=255)
    token = models.CharField(max_length=64)
    pid = models.IntegerField(null=True, blank=True)
    command = models.TextField(blank=True)
    tool_version = models.CharField(max_length=200, blank=True)
    simulated = models.BooleanField(default=False,
                                    help_text="the node's vLLM is a lab stand-in")
    offsets = models.JSONField(default=dict, blank=True)
    golden = models.JSONField(default=dict, blank=True,
                              help_text="prompt id → known-good text, recorded before the soak")
    golden_probe_run = models.ForeignKey("runners.ProbeRun", on_delete=models.SET_NULL,
                                         null=True, blank=True, related_name="+")
    last_collected_at = models.DateTimeField(null=True, blank=True)
    last_window = models.IntegerField(default=0)
    last_completion_at = models.FloatField(null=True, blank=True,
                                           help_text="node epoch seconds of the last success")
    answers_latest = models.JSONField(
        null=True, blank=True, help_text="per prompt id, the latest answer and the latest "
        "non-exact one, folded at collection: {prompt: {result, mismatch, at, last_mismatch, "
        "last_mismatch_at}} (epoch s); null: collected before it existed")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["soak", "node"],
                                               name="soak_agent_unique")]

    def __str__(self) -> str:
        return f"{self.soak} agent on {self.node.name}: {self.state}"


class FaultWindow(models.Model):
    """One planned fault of the soak (``position`` in plan order, ``name`` unique in it).

    ``start_s`` / ``duration_s`` are plan seconds after the load started (pauses excluded);
    ``target`` the validated target ({"interface", "netns"?} or {"drive"}); ``node`` where the
    commands run. ``state``: planned → armed (heal armed and verified on the node) → injected →
    healed; or refused (a safety check said no: ``error`` says which), missed (the service was
    not attached when it was due) or failed (a command failed; the heal was still run).
    ``heal_how``: ``timer`` (the armed heal fired on the node), ``service`` (healed by the
    service at the window's end), ``abort`` (healed because the soak stopped).
    """

    class State(models.TextChoices):
        PLANNED = "planned"
        ARMED = "armed"
        INJECTED = "injected"
        HEALED = "healed"
        REFUSED = "refused"
        MISSED = "missed"
        FAILED = "failed"

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="faults")
    position = models.PositiveSmallIntegerField()
    name = models.SlugField(max_length=64)
    kind = models.CharField(max_length=16, choices=FaultTarget.Kind.choices)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="soak_faults")
    target = models.JSONField()
    start_s = models.FloatField()
    duration_s = models.FloatField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PLANNED)
    fault_target = models.ForeignKey(FaultTarget, on_delete=models.PROTECT, null=True,
                                     blank=True, related_name="windows")
    safety = models.JSONField(default=list, blank=True,
                              help_text="[{check, command, said, ok}] run before arming")
    heal_token = models.CharField(max_length=64, blank=True)
    heal_method = models.CharField(max_length=32, blank=True,
                                   help_text="systemd-run or setsid (fallback)")
    heal_command = models.TextField(blank=True)
    inject_command = models.TextField(blank=True)
    heal_armed_at = models.DateTimeField(null=True, blank=True)
    heal_verified_at = models.DateTimeField(null=True, blank=True)
    injected_at = models.DateTimeField(null=True, blank=True)
    healed_at = models.DateTimeField(null=True, blank=True)
    heal_how = models.CharField(max_length=16, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["soak", "position"]
        constraints = [models.UniqueConstraint(fields=["soak", "name"],
                                               name="fault_window_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind} on {self.node.name}): {self.state}"


class CollectionGap(models.Model):
    """A span in which the service was not collecting from a soak (``node`` empty: from any
    node), with the reason. The agents keep running and writing meanwhile, so the samples of
    the span arrive late (collected by byte offset); the gap says the service was away."""

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="gaps")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, null=True, blank=True,
                             related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField()

    class Meta:
        ordering = ["soak", "started_at"]

    def __str__(self) -> str:
        return f"gap {self.started_at:%H:%M:%S}–{self.ended_at or '…'}: {self.reason}"


class SoakEvent(models.Model):
    """One line of the soak's log (what happened, when, by whom)."""

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=32)
    actor = models.CharField(max_length=150, blank=True)
    text = models.TextField()
    fault = models.ForeignKey(FaultWindow, on_delete=models.CASCADE, null=True, blank=True,
                              related_name="events")

    class Meta:
        ordering = ["soak", "at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.kind}: {self.text}"


class SoakWindow(models.Model):
    """One load window of one node as the steady-state figures read it: the aggregate of its
    measurement rows, written once when the window is collected (``runners.soak.collection``),
    so the driver tick, the live page and the evaluation read one row per window instead of
    re-grouping every sample. ``measurement_ids`` are the rows it was folded from (evidence);
    ``metric_ids`` the id of its row of each ``gates.soak_derivations.WINDOW_METRICS`` metric
    in that order (0: none; empty for a window folded before they were kept), so each figure
    links only the rows it used;
    times are node epoch seconds; ``ttft_p99`` s, ``output_throughput`` tok/s,
    ``completion_gap_max`` s, ``completed`` / ``failed`` requests (1)."""

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="windows")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="+")
    index = models.IntegerField()
    start = models.FloatField()
    end = models.FloatField()
    completed = models.FloatField()
    failed = models.FloatField()
    ttft_p99 = models.FloatField(null=True, blank=True)
    output_throughput = models.FloatField(null=True, blank=True)
    completion_gap_max = models.FloatField()
    first_completion = models.FloatField(null=True, blank=True)
    last_completion = models.FloatField(null=True, blank=True)
    measurement_ids = models.JSONField(default=list)
    metric_ids = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["soak", "node", "index"]
        constraints = [models.UniqueConstraint(fields=["soak", "node", "index"],
                                               name="soak_window_unique")]
        indexes = [models.Index(fields=["soak", "end"], name="soak_window_end")]

    def __str__(self) -> str:
        return f"window {self.index} of {self.node_id}"


class SoakChartBucket(models.Model):
    """One bucket of consecutive windows of one node as the soak's charts draw it: for each
    charted metric the bucket's worst window (highest; lowest for throughput) — ``worst``:
    ``{metric: [value, window index, window end (node epoch s), windows with a value]}`` —
    folded once per window at collection (``runners.soak.digest``), so the page and its poll
    read at most about ``CHART_POINTS`` rows whatever the windows and nodes. Window ``i``
    falls in bucket ``(i - 1) // Soak.chart_bucket_windows``."""

    soak = models.ForeignKey(Soak, on_delete=models.CASCADE, related_name="chart_buckets")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="+")
    bucket = models.IntegerField()
    worst = models.JSONField(default=dict)

    class Meta:
        ordering = ["soak", "node", "bucket"]
        constraints = [models.UniqueConstraint(fields=["soak", "node", "bucket"],
                                               name="soak_chart_bucket_unique")]

    def __str__(self) -> str:
        return f"chart bucket {self.bucket} of {self.node_id}"
