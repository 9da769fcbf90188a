"""Starting the soak's node agents: the tool version, the known-good correctness answers taken
before the load, then the agent (``runners.soak.node_agent``) detached from SSH on every
inference node (RUNBOOK §5.1-5.2).

``agent_args`` turns the plan into the agent's command line (real seconds, after time
compression); ``soak_agents_start`` runs the start on every node and moves the soak to running.
"""

from __future__ import annotations

import json
import shlex
import time
from datetime import timedelta

from django.utils import timezone

from runners.intake import exit_error, measurements_store, parse_failed
from runners.models import ProbeRun
from runners.parsers import soak_correctness
from runners.parsers.base import ParseError
from runners.probes import SIMULATED_MARKER
from runners.soak import commands
from runners.soak.collection import soak_run_record
from runners.soak.events import event_record
from runners.soak.models import Soak, SoakAgent
from runners.soak.nodes import NodePool, node_time
from runners.soak.plan import SoakPlanError, real_s, vllm_check, windows_planned

AGENT_VERSION = "1"  # of the agent's record format, in every soak run's tool version


class AgentStartFailed(Exception):
    """An agent could not be started (or its known-good answers not recorded); the message
    names the node and why."""


def agent_args(soak: Soak, agent: SoakAgent, node_now: float) -> list[str]:
    """The node agent's arguments for ``agent`` of ``soak``, its deadline from ``node_now``."""
    plan = soak.plan
    load, correctness = plan["load"], plan["correctness"]
    duration = soak.duration_s
    return [
        "--dir", agent.remote_dir, "--vllm", load["vllm"], "--base-url", load["base_url"],
        "--model", load["model"], "--tokenizer", load["tokenizer"],
        "--rate", str(load["request_rate"]), "--concurrency", str(load["concurrency"]),
        "--window-s", f"{real_s(plan, load['window_s']):.3f}",
        "--windows", str(2 * windows_planned(plan) + 10),
        "--duration-s", f"{duration:.3f}",
        # room for pauses as long as the soak itself; past that the soak times out
        "--deadline", f"{node_now + 2 * duration + 60:.3f}",
        "--prefix-len", str(load["prefix_len"]), "--suffix-len", str(load["suffix_len"]),
        "--num-prefixes", str(load["num_prefixes"]), "--output-len", str(load["output_len"]),
        "--seed", str(load["seed"]),
        "--probe-every", f"{real_s(plan, correctness['every_s']):.3f}",
        "--probe-max-tokens", str(correctness["max_tokens"]),
        "--probe-timeout", str(correctness["timeout_s"]),
        "--prompts-json", json.dumps([{"id": p["id"], "text": p["text"]}
                                      for p in correctness["prompts"]]),
    ]


def _golden_record(soak: Soak, agent: SoakAgent, nodes: NodePool) -> dict[str, str]:
    """Take and store the known-good answers of ``agent``'s node; AgentStartFailed when the
    round failed or cannot be read."""
    plan = soak.plan
    command = commands.agent_golden_command(
        agent_args=agent_args(soak, agent, time.time()),
        timeout_s=int(plan["correctness"]["timeout_s"]) + 30)
    started = timezone.now()
    result = nodes.run(agent.node, command, timeout=plan["correctness"]["timeout_s"] + 60)
    run = soak_run_record(
        soak=soak, agent=agent, probe="soak_golden", parser=soak_correctness,
        command=f"{plan['load']['vllm']} soak agent --golden (correctness round, RUNBOOK §5.2)",
        exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr,
        parameters={"prompts": [p["id"] for p in plan["correctness"]["prompts"]]},
        started=started)
    failed = f"{agent.node.name}: could not record the known-good answers"
    if result.exit_code != 0:
        run.error_kind, run.error = exit_error(result.exit_code, result.stderr)
        run.state = ProbeRun.State.FAILED
        run.save(update_fields=["state", "error_kind", "error"])
        raise AgentStartFailed(f"{failed}: {run.error}")
    try:
        rounds = soak_correctness.parse(result.stdout)
        if len(rounds) != 1:
            raise ParseError(soak_correctness.TOOL, 0, "one correctness round",
                             f"{len(rounds)} rounds")
    except ParseError as error:
        parse_failed(run, error)
        raise AgentStartFailed(f"{failed}: {error}") from None
    errors = [f"{a.prompt}: {a.error}" for a in rounds[0].answers if a.error]
    if errors:
        run.state, run.error_kind = ProbeRun.State.FAILED, "exit_status"
        run.error = f"could not record the known-good answers: {'; '.join(errors)}"
        run.save(update_fields=["state", "error_kind", "error"])
        raise AgentStartFailed(f"{agent.node.name}: {run.error}")
    measurements_store(run, [])
    agent.golden_probe_run = run
    return soak_correctness.golden_answers(rounds[0])


def soak_agents_start(*, soak: Soak, nodes: NodePool) -> None:
    """Tool version, known-good answers, then every agent started detached; the soak is then
    running. AgentStartFailed (or TransportError) when a node could not be started."""
    plan = soak.plan
    try:  # again at run time: the plan may predate the allow-list, or the list changed
        vllm_check(plan["load"].get("vllm"), lab=soak.gate_run.gate.engagement.is_lab)
    except SoakPlanError as error:
        raise AgentStartFailed(f"nothing run on the nodes: {error}") from None
    first_start = None
    for agent in soak.agents.select_related("node__credential"):
        node = agent.node
        version = nodes.run(node, shlex.join(
            ["timeout", "10", *plan["load"]["vllm"].split(), "--version"]), timeout=30)
        text = (version.stdout or version.stderr).decode(errors="replace").strip()
        agent.tool_version = (text.splitlines()[0][:150] if text else "unknown")
        agent.tool_version = f"vllm {agent.tool_version}; soak agent {AGENT_VERSION}"
        agent.simulated = SIMULATED_MARKER.encode() in version.stderr
        agent.golden = golden = _golden_record(soak, agent, nodes)
        command = commands.agent_start_command(
            remote_dir=agent.remote_dir, deadline_s=int(2 * soak.duration_s + 180),
            agent_args=agent_args(soak, agent, time.time()))
        agent.command = (f"nohup setsid {plan['load']['vllm']} soak agent in "
                         f"{agent.remote_dir} ({windows_planned(plan)} windows of "
                         f"{real_s(plan, plan['load']['window_s']):g} s)")
        result = nodes.run(node, command, timeout=60)
        said = result.stdout.decode(errors="replace").split()
        if result.exit_code != 0 or len(said) < 4 or said[0] != "pid":
            raise AgentStartFailed(f"{node.name}: the soak agent did not start: "
                                   f"{result.stderr.decode(errors='replace').strip()[:300]}")
        agent.pid, agent.state = int(said[1]), SoakAgent.State.RUNNING
        first_start = min(first_start or float(said[3]), float(said[3]))
        agent.save()
        event_record(soak, "agent started", f"{node.name}: agent pid {agent.pid} in "
                     f"{agent.remote_dir}; known-good answers of {len(golden)} prompts recorded")
    now = timezone.now()
    Soak.objects.filter(id=soak.id).update(
        state=Soak.State.RUNNING, started_at=now, load_started_at=node_time(first_start),
        deadline_at=now + timedelta(seconds=2 * soak.duration_s + 120), heartbeat_at=now)
    soak.refresh_from_db()
