"""The lab's G4 soak set-up: real network paths, the stand-in array and engine, the compressed
plan and the fault targets (issue 7 §6). Called by ``runners.lab.services.lab_up`` for the
``soak-*`` scenarios.

* :func:`prepare` (before the lab sshd servers start): the namespace with its veth paths
  (``runners.lab.netns``, blackhole route first), a port for the engine and one for the array
  service, the array's state file; written into the scenario's ``soak`` section so the stand-ins
  on the nodes find them.
* :func:`start` (after): the stand-in array service inside the namespace, listening on every
  path's namespace address, and the stand-in engine on the inference node (127.0.0.1), which
  reads its KV blocks over those paths; both recorded for ``paths_down`` and waited for.
* :func:`adapt` (with the engagement): G4's soak plan compressed to ``soak.seconds`` real
  seconds (72 h ÷ seconds), the load pointed at the stand-ins, the link fault at path 1's
  namespace end and the drive fault as the stand-in array's drive command; both targets marked
  for fault injection by the lab set-up (recorded as such, like the lab's BOM ticks).
"""

from __future__ import annotations

import copy
import subprocess
import time
import urllib.request
from pathlib import Path

from django.utils import timezone

from acceptance.models import AuditEntry, Engagement
from runners.lab import netns
from runners.lab.server import LabError, LabServer, free_port
from runners.soak.faults import fault_confirmation_of, fault_target_mark

LAB_ACTOR = "lab set-up (automatic)"
ARRAY_PORT_FILE = "array-state.json"
READY_S = 15.0


def prepare(root: Path, figures: dict) -> netns.Paths:
    """Create the paths and fill ``figures["soak"]`` with what the stand-ins need."""
    soak = figures["soak"]
    paths = netns.paths_up(root, count=int(soak["paths"]))
    array_port, engine_port = free_port(), free_port()
    while engine_port == array_port:
        engine_port = free_port()
    soak.update({
        "netns": paths.netns,
        "array_state": str(root / ARRAY_PORT_FILE),
        "array_port": array_port,
        "kv_urls": [f"http://{p.ns_address}:{array_port}" for p in paths.paths],
        "engine_port": engine_port,
        "link": {"netns": paths.netns, "interface": paths.paths[0].ns_if},
    })
    (root / ARRAY_PORT_FILE).write_text('{"drives_out": []}')
    return paths


def _spawn(root: Path, argv: list[str], log: str, marker: str) -> int:
    with open(root / log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    netns.process_record(root, process.pid, marker)
    return process.pid


def _wait(url: str, what: str) -> None:
    end = time.monotonic() + READY_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310  # nosec B310 # the lab's own http://127.0.0.1 URL
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > end:
            raise LabError(f"the lab's {what} did not answer {url} within {READY_S:g} s")
        time.sleep(0.05)


def start(root: Path, figures: dict, servers: dict[str, LabServer], array_node: str,
          inference_node: str) -> None:
    """Start the stand-in array service (in the namespace) and engine (on the node)."""
    soak = figures["soak"]
    array_bin = servers[array_node].directory / "bin" / "soak-array"
    listens = [arg for url in soak["kv_urls"]
               for arg in ("--listen", url.removeprefix("http://"))]
    _spawn(root, [netns.IP, "netns", "exec", soak["netns"], str(array_bin), "serve", *listens,
                  "--state", soak["array_state"], "--impact", soak["drive_out_impact"],
                  "--scenario-name", figures["name"]], "soak-array.log", str(array_bin))
    engine_bin = servers[inference_node].directory / "bin" / "soak-vllm"
    kv = [arg for url in soak["kv_urls"] for arg in ("--kv-url", url)]
    _spawn(root, [str(engine_bin), "serve", "lab-soak-model", "--port",
                  str(soak["engine_port"]), *kv, "--ttft-ms", str(soak["ttft_ms"]),
                  "--tpot-ms", str(soak["tpot_ms"]), "--scenario-name", figures["name"]],
           "soak-engine.log", str(engine_bin))
    _wait(f"http://127.0.0.1:{soak['engine_port']}/health", "stand-in engine")
    for url in soak["kv_urls"]:
        _wait(f"{url}/health", "stand-in array (through its network path)")


def lab_plan(plan: dict, figures: dict) -> dict:
    """G4's soak plan compressed to ``soak.seconds`` real seconds, pointed at the stand-ins:
    windows of 1 s, collection every 2 s, correctness every 3 s, spans of 3 s around faults,
    the drive fault from 25 % of the soak and the link fault from 60 %, each 15 % long."""
    soak = figures["soak"]
    plan = copy.deepcopy(plan)
    duration = float(plan["duration_s"])
    factor = duration / float(soak["seconds"])

    def real(seconds: float) -> float:
        return round(seconds * factor, 3)

    plan["time_compression"] = round(factor, 6)
    plan["sampling_s"] = real(2.0)
    plan["load"].update({
        "vllm": "soak-vllm", "base_url": f"http://127.0.0.1:{soak['engine_port']}",
        "model": "lab-soak-model", "tokenizer": "lab-soak-model",
        "request_rate": soak["request_rate"], "concurrency": soak["concurrency"],
        "output_len": soak["output_len"], "window_s": real(1.0),
    })
    plan["correctness"].update({"every_s": real(3.0), "max_tokens": 16, "timeout_s": 30})
    plan["steady_state"].update({"baseline_windows": 3, "before_s": real(3.0),
                                 "after_s": real(3.0)})
    for fault in plan["faults"]:
        if fault["kind"] == "drive_out":
            fault.update({"start_s": round(duration * 0.25, 3),
                          "duration_s": round(duration * 0.15, 3),
                          # the stand-in's command, allowed for lab engagements only
                          # (settings SOAK_LAB_VENDOR_COMMANDS)
                          "command": "lab-array-drive", "args": {}})
            for legacy in ("inject", "heal", "status"):
                fault.pop(legacy, None)
        else:
            fault.update({"start_s": round(duration * 0.60, 3),
                          "duration_s": round(duration * 0.15, 3),
                          "target": dict(soak["link"])})
    return plan


def adapt(engagement: Engagement, figures: dict) -> dict:
    """Compress G4's plan for the lab and mark the fault targets; returns what was adapted."""
    gate = engagement.gates.get(code="G4")
    steps = copy.deepcopy(gate.probe_plan)
    adapted = {}
    for step in steps:
        if step.get("expand") == "soak":
            step["soak"] = lab_plan(step["soak"], figures)
            adapted = step["soak"]
    gate.probe_plan = steps
    gate.save(update_fields=["probe_plan"])
    link = figures["soak"]["link"]
    node = engagement.nodes.get(role="inference")
    target = f"{link['netns']}/{link['interface']}"
    fault_target_mark(node=node, kind="link_down", target=target, actor=LAB_ACTOR,
                      confirmation=f"lab: allow link_down of {target} on {node.name} (the "
                                   f"namespace end of lab path 1)")
    array = engagement.nodes.get(role="array")
    for fault in adapted.get("faults", []):
        if fault["kind"] == "drive_out":
            drive = str(fault["target"]["drive"])
            words = fault_confirmation_of(array, "drive_out", drive)["words"]
            fault_target_mark(node=array, kind="drive_out", target=drive, actor=LAB_ACTOR,
                              confirmation=f"lab: {words} (the stand-in array)")
    AuditEntry.objects.create(
        engagement=engagement, actor=LAB_ACTOR, action="lab soak prepared",
        reason=f"G4 soak plan compressed ×{adapted['time_compression']:g} to "
               f"{figures['soak']['seconds']} s; fault targets marked by the lab set-up",
        details={"netns": figures["soak"]["netns"], "kv_urls": figures["soak"]["kv_urls"],
                 "engine_port": figures["soak"]["engine_port"], "at": timezone.now().isoformat()})
    return adapted
