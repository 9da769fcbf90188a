"""A gate run of many nodes built from one real run, for the report-size test and benchmark.

``scaled_run(first, count)`` takes a finished G2 run of one lab node (real sshd, the lab's
stand-ins) and writes the run of ``count`` nodes as the ledger holds it after its last node
job: nodes enrolled beside ``lab-inference-1`` on its array (rows only: they never connect),
each node's job done and its probe runs kept (``raw_output_keep``: content-addressed files,
sha256) and parsed by the real parser. The plan is G2's: one node per array reads the array,
every node runs the benchmark. Node k's outputs end in k newlines (the parsers ignore them),
so every raw output differs and an attachment mixed up between nodes would show. The run is
left ``evaluating``: ``gate_run_decide`` and ``report_issue`` are the caller's to time.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from acceptance.models import Node
from runners.intake import raw_output_keep, raw_output_parse
from runners.models import GateRun, NodeJob, ProbeRun
from runners.outputs import output_bytes

FIRST = "lab-inference-1"


def _index(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def scaled_nodes(engagement, count: int) -> list[Node]:
    """lab-inference-1 … -``count``: the missing ones added as copies of the first."""
    model = engagement.nodes.get(name=FIRST)
    have = {n.name for n in engagement.nodes.all()}
    for i in range(2, count + 1):
        if f"lab-inference-{i}" not in have:
            node = Node.objects.get(pk=model.pk)
            node.pk, node.name, node.port = None, f"lab-inference-{i}", 40000 + i
            node.save()
    nodes = engagement.nodes.filter(role=Node.Role.INFERENCE, name__startswith="lab-inference-")
    return sorted(nodes, key=lambda n: _index(n.name))[:count]


@transaction.atomic
def scaled_run(first: GateRun, count: int) -> GateRun:
    """The ``evaluating`` run of ``count`` nodes built from ``first`` (see the module)."""
    gate = first.gate
    gate.state = "pending"
    gate.save(update_fields=["state"])
    run = GateRun.objects.create(gate=gate, attempt=gate.runs.count() + 1,
                                 state=GateRun.State.EVALUATING, started_by="lab scale")
    real = list(first.probe_runs.filter(node__name=FIRST).order_by("started_at", "id"))
    # what every node runs: the probes the plan gives every node (not "first_per_array")
    everyone = {step["probe"] for step in gate.probe_plan
                if step.get("nodes") != "first_per_array"}
    outputs = {r.pk: (output_bytes(r, "stdout"), output_bytes(r, "stderr")) for r in real}
    for k, node in enumerate(scaled_nodes(gate.engagement, count), start=1):
        NodeJob.objects.create(gate_run=run, node=node, state=NodeJob.State.DONE)
        for source in real:
            if k > 1 and source.probe not in everyone:
                continue
            copy = ProbeRun.objects.get(pk=source.pk)
            stdout, stderr = outputs[source.pk]
            copy.pk, copy.gate_run, copy.node = None, run, node
            copy.state, copy.started_at = ProbeRun.State.PARSING, timezone.now()
            raw_output_keep(copy, stdout=stdout + b"\n" * k, stderr=stderr,
                            simulated=source.simulated)
            copy.save()
            raw_output_parse(copy)
    for source in first.probe_runs.filter(node__isnull=True):  # the service's own (BOM)
        copy = ProbeRun.objects.get(pk=source.pk)
        copy.pk, copy.gate_run, copy.state = None, run, ProbeRun.State.PARSING
        copy.save()
        raw_output_parse(copy)
    return run
