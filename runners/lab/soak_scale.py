"""A G4 soak of many nodes as the ledger holds it when its load is over, for the site-scale
benchmark (``benchmarks/soak_site.py``) and the G4 report-size test.

``soak_at_scale(nodes, hours)`` writes, for a fresh lab engagement, the soak of ``nodes``
inference nodes under the default plan held ``hours`` (15 min windows, both faults healed, the
plan's rate 1 request/s) as its collection leaves it: per node the ``--golden`` round and per
window one collected range of ``windows.jsonl`` and one of ``probes.jsonl`` — each a probe run
whose raw output is a content-addressed file, read by the soak's own parsers
(``runners.parsers.soak_windows`` / ``soak_correctness``) into its measurement rows and folded
into the window aggregates (``runners.soak.collection.windows_record``). The lines are written
as the node agent writes them; node k's figures differ a little, so no two nodes' outputs are
equal. Node times are plan seconds from a fixed epoch. Rows go in bulk (files not fsynced: a
scratch directory); the soak is left running with its checks judged: deciding and reporting
are the caller's to time.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, date, datetime
from pathlib import Path

from django.conf import settings

from acceptance.models import Credential, Node
from gates.models import Gate
from gates.services import engagement_create
from runners.models import GateRun, Measurement, ProbeRun
from runners.outputs import file_name, output_cap_bytes
from runners.parsers import soak_correctness, soak_windows
from runners.parsers.soak_windows import planned_requests
from runners.soak.collection import answers_record, windows_record
from runners.soak.evaluation import soak_checks_update
from runners.soak.models import FaultWindow, Soak, SoakAgent
from runners.soak.plan import plan_sha256

T0 = 1764590400.0


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _raw_store(data: bytes) -> tuple[str, str, int]:
    """Keep ``data`` as the intake keeps a raw output (a content-addressed file under the
    benchmark's scratch outputs directory; not fsynced: the directory is thrown away)."""



    digest = hashlib.sha256(data).hexdigest()
    name = file_name(digest)
    path = Path(settings.OUTPUTS_DIR) / name
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o600)
    return name, digest, len(data)


def window_line(k: int, index: int, start: float, end: float, hit: bool) -> bytes:
    """One line of a node agent's ``windows.jsonl``: ``vllm bench serve``'s saved result and
    the agent's own keys (``runners.soak.node_agent``); node ``k``'s figures differ a little."""
    failed = 3 if hit else 0
    ttft = 310.0 + 10.0 * (index % 3) + (k % 7) + (50.0 if hit else 0.0)
    record = {
        "completed": 900 - failed, "failed": failed, "num_prompts": 900,
        "max_concurrency": 16, "request_throughput": 1.0 - failed / 900,
        "output_throughput": 52.0 - index % 2 - (k % 5) / 10,
        "total_token_throughput": 4200.0 + k % 11, "mean_ttft_ms": ttft * 0.6,
        "median_ttft_ms": ttft * 0.5, "p99_ttft_ms": ttft, "mean_tpot_ms": 21.0 + k % 3,
        "median_tpot_ms": 20.0, "p99_tpot_ms": 34.0, "mean_itl_ms": 20.5,
        "median_itl_ms": 19.5, "p99_itl_ms": 41.0,
        "soak_window": index, "soak_started": start, "soak_ended": end,
        "soak_first_completion": start + 0.4, "soak_last_completion": end - 0.6,
        "soak_completion_gap_max_s": 2.0 + (30.0 if hit else 0.0)}
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


def round_line(number: int, at_s: float, answers: dict[str, str]) -> bytes:
    """One correctness round as the agent writes it (``probes.jsonl``, or ``--golden``)."""
    return (json.dumps({"soak_round": number, "t": at_s, "answers": [
        {"id": p, "text": text, "error": None, "elapsed_s": 1.2}
        for p, text in answers.items()]}, separators=(",", ":")) + "\n").encode()


def soak_at_scale(nodes: int, hours: float, *, name: str = "bench-soak-site"):
    """The soak of a fresh lab engagement ``name`` (see the module docstring), its load over
    and both faults healed, every check judged; still ``running``: the caller moves it on.
    Returns ``(soak, measurement rows, collection records, windows per node)``."""
    engagement = engagement_create(name=name, customer="Bench",
                                   start_date=date(2026, 9, 1), is_lab=True)
    Gate.objects.filter(engagement=engagement, code__in=["G1", "G2", "G3"]).update(
        state=Gate.State.PASSED)
    credential = Credential.from_secret(f"{name}-key", "not a real key")
    credential.save()
    key = "ssh-ed25519 " + base64.b64encode(b"bench-host-key").decode()
    common = {"engagement": engagement, "credential": credential, "ssh_user": "acctest",
              "host_key": key, "is_lab": True, "address": "127.0.0.1"}
    array = Node.objects.create(name="array-1", role=Node.Role.ARRAY, **common)
    inference = Node.objects.bulk_create(
        Node(name=f"gpu-{k:03d}", role=Node.Role.INFERENCE, interface="acs-v1", **common)
        for k in range(nodes))
    inference = list(Node.objects.filter(engagement=engagement, role=Node.Role.INFERENCE)
                     .order_by("name"))
    gate = engagement.gates.get(code="G4")
    plan = dict(gate.probe_plan[0]["soak"])
    plan["duration_s"] = hours * 3600
    plan["time_compression"] = 1.0
    # the rate a soak starts with (runners.soak.rate: G2's capacity); 900 requests a window
    plan["load"] = {**plan["load"], "request_rate": 1.0}
    gate_run = GateRun.objects.create(gate=gate, attempt=1, started_by="bench",
                                      state=GateRun.State.RUNNING)
    soak = Soak.objects.create(gate_run=gate_run, plan=plan, plan_sha256=plan_sha256(plan),
                               time_compression=1.0, state=Soak.State.RUNNING,
                               started_at=at(T0 - 60), load_started_at=at(T0),
                               loaded_s=plan["duration_s"], heartbeat_at=at(T0))
    agents = SoakAgent.objects.bulk_create(
        SoakAgent(soak=soak, node=n, remote_dir=f"soak/{n.name}", token=n.name,
                  state="finished", simulated=True, tool_version="vllm 0.20.1 (stand-in)",
                  last_collected_at=at(T0))
        for n in inference)
    window_s = float(plan["load"]["window_s"])
    count = int(plan["duration_s"] // window_s)
    faults = []
    for position, fault in enumerate(plan["faults"], start=1):
        node = array if fault["kind"] == "drive_out" else inference[0]
        start = T0 + fault["start_s"]
        faults.append(FaultWindow(
            soak=soak, position=position, name=fault["name"], kind=fault["kind"], node=node,
            target=fault["target"] or {"interface": "acs-v1"}, start_s=fault["start_s"],
            duration_s=fault["duration_s"], state=FaultWindow.State.HEALED,
            injected_at=at(start), healed_at=at(start + fault["duration_s"]), heal_how="timer"))
    FaultWindow.objects.bulk_create(faults)
    during = [(f.injected_at.timestamp(), f.healed_at.timestamp()) for f in faults]
    golden = {p["id"]: f"the known-good answer to {p['id']}"
              for p in plan["correctness"]["prompts"]}
    planned = planned_requests(float(plan["load"]["request_rate"]), window_s)
    empty = _raw_store(b"")
    stored = records = 0
    for k, agent in enumerate(agents):

        def record(probe, parser, raw, ended, parameters, command, agent=agent):
            name, digest, size = _raw_store(raw)
            return ProbeRun(
                gate_run=gate_run, node_id=agent.node_id, probe=probe, parser=parser.TOOL,
                parser_version=parser.PARSER_VERSION, command=command, parameters=parameters,
                tool_version=agent.tool_version, exit_code=0, started_at=at(ended),
                finished_at=at(ended + 0.2), state=ProbeRun.State.PARSED, stdout_file=name,
                stdout_sha256=digest, stdout_size=size, stderr_file=empty[0],
                stderr_sha256=empty[1], stderr_size=0, output_cap=output_cap_bytes(),
                simulated=True)

        # the --golden round, then per window one range of windows.jsonl and one of
        # probes.jsonl, each read by the soak's own parsers into its rows (as collected)
        runs = [record("soak_golden", soak_correctness, round_line(0, T0 - 30, golden),
                       T0 - 30, {"prompts": list(golden)}, "vllm soak agent --golden")]
        figures: list[list] = [[]]
        offsets = {"windows.jsonl": 0, "probes.jsonl": 0}
        for index in range(1, count + 1):
            start, end = T0 + (index - 1) * window_s, T0 + index * window_s
            hit = any(start < e and end > s for s, e in during)
            for file, raw, parser in (
                    ("windows.jsonl", window_line(k, index, start, end, hit), soak_windows),
                    ("probes.jsonl", round_line(index, end - 1, golden), soak_correctness)):
                path = f"soak/{agent.node.name}/{file}"
                runs.append(record(
                    f"soak_{'windows' if parser is soak_windows else 'correctness'}", parser,
                    raw, end, {"file": path, "offset": offsets[file], "length": len(raw)},
                    f"tail -c +{offsets[file] + 1} {path} (soak collection)"))
                offsets[file] += len(raw)
                if parser is soak_windows:
                    figures.append([(r.ended, m) for r in soak_windows.parse(raw)
                                    for m in soak_windows.measurements(r, planned)])
                else:
                    figures.append([(r.at, m) for r in soak_correctness.parse(raw)
                                    for m in soak_correctness.mismatches(r, golden)])
        ProbeRun.objects.bulk_create(runs, batch_size=2000)
        rows = [Measurement(gate_run=gate_run, node_id=agent.node_id, probe_run_id=run.id,
                            metric=m.metric, value=m.value, unit=m.unit, labels=m.labels,
                            sampled_at=at(epoch))
                for run, each in zip(runs, figures, strict=True) for epoch, m in each]
        Measurement.objects.bulk_create(rows, batch_size=5000)
        stored += len(rows)
        records += len(runs)
        windows_record(soak, agent, rows)
        answers_record(soak, agent, rows, 0)  # each node's latest answers, as collected
        SoakAgent.objects.filter(id=agent.id).update(
            last_window=count, golden=golden, golden_probe_run=runs[0], offsets=offsets,
            answers_latest=agent.answers_latest)
    soak_checks_update(soak=soak)
    soak.refresh_from_db()
    return soak, stored, records, count
