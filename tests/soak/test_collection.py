"""Collection by byte offset through the evidence intake: each collected range is one probe
run with its raw bytes and sha256, its rows carry the node time, and a range that cannot be
read fails its run with kind ``parse`` (the offset moves on, the raw bytes stay)."""

import hashlib
from datetime import UTC, datetime

import pytest

from runners.models import Measurement, ProbeRun
from runners.soak.collection import agent_collect
from runners.soak.models import Soak, SoakAgent
from runners.transport import CommandResult

from .pages_fixtures import soak_engagement

WINDOW = (b'{"completed":16,"failed":0,"max_concurrency":4,"p99_ttft_ms":310.0,'
          b'"output_throughput":52.0,"soak_window":1,"soak_started":1764590400.0,'
          b'"soak_ended":1764590401.0,"soak_first_completion":1764590400.1,'
          b'"soak_last_completion":1764590400.95,"soak_completion_gap_max_s":0.2,'
          b'"soak_exit":0,"soak_error":null}\n')
ROUND = (b'{"soak_round":1,"t":1764590400.5,"answers":[{"id":"p1","text":" Paris.",'
         b'"error":null},{"id":"p2","text":" 41","error":null}]}\n')


class Node:
    """Answers the status command with "running" and each read with the given bytes."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    def run(self, node, command, timeout=60):
        now = datetime.now(tz=UTC)
        name = next((n for n in self.files if n in command), None)
        stdout = b"running\n1764590402.0\n" if name is None else self.files[name]
        return CommandResult(0, stdout, b"", now, now)


@pytest.fixture
def agent(db):
    engagement, gate, _array, inference = soak_engagement()
    soak = Soak.objects.create(gate_run=gate.runs.create(attempt=1, started_by="eng-erin"),
                               plan=gate.probe_plan[0]["soak"], plan_sha256="x",
                               state=Soak.State.RUNNING)
    return SoakAgent.objects.create(soak=soak, node=inference, remote_dir="/tmp/soak-x/n1",
                                    token="t", state="running", simulated=True,
                                    golden={"p1": " Paris.", "p2": " 42"})


def test_it_stores_each_range_with_its_sha256_and_rows_at_node_time(agent):
    agent_collect(soak=agent.soak, agent=agent,
                  nodes=Node({"windows.jsonl": WINDOW, "probes.jsonl": ROUND}))
    windows, probes = (ProbeRun.objects.get(probe=p) for p in ("soak_windows",
                                                              "soak_correctness"))
    assert windows.raw() == WINDOW and windows.stdout_size == len(WINDOW)
    assert windows.stdout_sha256 == hashlib.sha256(WINDOW).hexdigest() and windows.simulated
    assert (windows.state, windows.parser, windows.parser_version) == (
        "parsed", "soak_windows", "1")
    ttft = Measurement.objects.get(probe_run=windows, metric="ttft_p99")
    assert ttft.value == pytest.approx(0.31) and ttft.labels["soak_window"] == "1"
    assert ttft.sampled_at == datetime.fromtimestamp(1764590401.0, tz=UTC)
    gap = Measurement.objects.get(probe_run=windows, metric="completion_gap_max")
    assert gap.labels["window_start"] == "1764590400.000"
    assert gap.labels["last_completion"] == "1764590400.950"
    mismatches = {m.labels["prompt"]: m.value for m in Measurement.objects.filter(
        probe_run=probes, metric="probe_mismatches")}
    assert mismatches["p1"] == 0 and mismatches["p2"] > 0
    agent.refresh_from_db()
    assert agent.offsets == {"windows.jsonl": len(WINDOW), "probes.jsonl": len(ROUND)}
    assert agent.last_window == 1


def test_a_range_it_cannot_read_fails_its_run_with_kind_parse(agent):
    bad = WINDOW + b'{"soak_window":2,"soak_started":"soon"}\n'
    agent_collect(soak=agent.soak, agent=agent, nodes=Node({"windows.jsonl": bad}))
    run = ProbeRun.objects.get(probe="soak_windows")
    assert (run.state, run.error_kind) == ("failed", "parse")
    assert "soak_windows: line 2" in run.error and run.raw() == bad
    assert not Measurement.objects.filter(probe_run=run).exists()
    agent.refresh_from_db()
    assert agent.offsets["windows.jsonl"] == len(bad)  # not read again and again
