"""``lab up`` / ``lab down``: a lab engagement whose nodes are local sshd servers with stand-in
tools.

``lab_up`` starts one server per node — the array controller and N inference nodes
(``lab-inference-1`` … ``lab-inference-N``), each its own sshd on its own loopback port with its
own host key, in its own directory under the engagement's lab directory, started in parallel —
and creates (or resets) the engagement ``lab-NAME``: organisation "Lab", an FX100 array, the
nodes with their host keys pinned as an engineer would have enrolled them (one client key for
all, as one engineer's), and its bill of materials ticked by the lab set-up, recorded as such.
Inference node *i* gets the scenario with its ``per_node`` entry merged in and its share of the
array's read-back (``scenarios.node_scenario``).

The nodes share one host, so the lab adapts the engagement's copy of the plans (recorded in the
audit entry): each inference node gets its own engine port (plan ``node_params``), the arms'
LMCache configs are files the lab writes under its directory, and engine polling is fast. Every
output a stand-in prints carries the simulated-evidence marker, so reports mark it.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from acceptance.models import Array, AuditEntry, Credential, Engagement, Node
from gates.models import Decision
from gates.services import engagement_create
from reports.models import Report
from runners.lab import netns, server
from runners.lab import soak as lab_soak
from runners.lab.scenarios import SCENARIOS, SOAK_SCENARIOS, node_scenario, scenario_with
from runners.models import GateRun

LAB_ACTOR = "lab set-up (automatic)"
LAB_BOM = [
    ("FX100 all-flash NVMe-oF array, 24 × 7.68 TB U.2 NVMe", 1),
    ("100 GbE RoCEv2 NIC for the array port", 1),
    ("QSFP28 direct-attach copper cable, 3 m", 2),
    ("Rack rail kit", 1),
    ("Redundant power supply unit", 2),
]
ARRAY_NODE = "lab-array-controller"
MAX_NODES = 128
START_THREADS = 16
# Plan parameters the lab sets wherever a plan has them: stand-in engines are ready at once.
LAB_FAST_PARAMS = {"poll_interval": "0.05", "drain_interval": "0"}
# RUNBOOK §4.1 (a)/(b): the arms' LMCache configs; only the disk tier's place differs.
LMCACHE_CONFIG = """# LMCache config of the lab's {arm} arm (RUNBOOK §4.1), written by lab up
chunk_size: 256
local_cpu: true
max_local_cpu_size: {host_tier_gb}
local_disk: "file://{cache_dir}/"
max_local_disk_size: 3000
extra_config: {{use_odirect: true}}
"""


def lab_directory(name: str) -> Path:
    return settings.LAB_DIR / name


def inference_name(index: int) -> str:
    return f"lab-inference-{index}"


@transaction.atomic
def _engagement_reset(name: str) -> None:
    """Remove an earlier lab engagement of this name with all its runs (files on disk stay)."""
    existing = Engagement.objects.filter(name=name, is_lab=True).first()
    if existing is None:
        if Engagement.objects.filter(name=name).exists():
            raise server.LabError(f"engagement {name} exists and is not a lab engagement")
        return
    Report.objects.filter(engagement=existing).delete()
    Decision.objects.filter(gate__engagement=existing).delete()
    GateRun.objects.filter(gate__engagement=existing).delete()
    credentials = list(Credential.objects.filter(nodes__engagement=existing).distinct())
    existing.delete()
    for credential in credentials:
        if not credential.nodes.exists():
            credential.delete()


def lab_up(*, scenario_name: str, engagement_name: str | None = None,
           overrides: dict | None = None,
           nodes: int = 1) -> tuple[Engagement, server.LabServer]:
    """Start the lab servers for ``scenario_name`` — the array controller and ``nodes``
    inference nodes — and create/reset its engagement. Returns the engagement and the array
    controller's server (every node's server is on its Node row: port, pinned host key).

    ``overrides`` changes figures of the scenario section by section (tests use it; a
    ``per_node`` section changes one inference node's). Raises KeyError for an unknown scenario
    and LabError when a server cannot start or ``nodes`` is out of range.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise server.LabError(f"--nodes must be 1 … {MAX_NODES}, not {nodes!r}")
    figures = scenario_with(scenario_name, overrides or {})
    unknown = [key for key in figures.get("per_node", {})
               if not (key.isdigit() and 1 <= int(key) <= nodes)]
    if unknown:
        raise server.LabError(f"per_node names node(s) {sorted(unknown)} but the lab has "
                              f"inference nodes 1 … {nodes}")
    soak = "soak" in figures  # G4 soak scenarios: real network paths and stand-in services
    if soak and nodes != 1:
        raise server.LabError(f"soak scenarios run on one inference node, not {nodes}")
    name = engagement_name or f"lab-{scenario_name}"
    root = lab_directory(name)
    _stop_tree(root)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    root.chmod(0o700)
    if soak:
        lab_soak.prepare(root, figures)
    try:
        wanted = {ARRAY_NODE: node_scenario(figures, 0, nodes)}
        wanted |= {inference_name(i): node_scenario(figures, i, nodes)
                   for i in range(1, nodes + 1)}
        servers = _start_all(root, wanted)
    except Exception:
        netns.paths_down(root)
        raise
    try:
        if soak:
            lab_soak.start(root, figures, servers, ARRAY_NODE, inference_name(1))
        etc = _write_lmcache_configs(root, figures)
        ports = _engine_ports(servers, nodes)
        engagement = _lab_engagement(name, figures, servers, ports, etc)
        if soak:
            lab_soak.adapt(engagement, figures)
    except Exception:
        _stop_tree(root)
        raise
    return engagement, servers[ARRAY_NODE]


def _start_all(root: Path, wanted: dict[str, dict]) -> dict[str, server.LabServer]:
    """Start one server per node in parallel; all or none (a failure stops the others)."""
    client_key = server.keypair()
    with ThreadPoolExecutor(max_workers=min(START_THREADS, len(wanted)),
                            thread_name_prefix="lab-start") as pool:
        futures = {name: pool.submit(server.server_start, root / name, scenario=scenario,
                                     client_key=client_key)
                   for name, scenario in wanted.items()}
        started, errors = {}, []
        for name, future in futures.items():
            try:
                started[name] = future.result()
            except Exception as error:  # every failure reported, then all stopped
                errors.append(f"{name}: {error}")
    if errors:
        _stop_tree(root)
        raise server.LabError("could not start the lab: " + "; ".join(errors))
    return started


def _engine_ports(servers: dict[str, server.LabServer], nodes: int) -> dict[str, int]:
    """A free loopback port per inference node for its serving engine (not an sshd's)."""
    taken = {lab.port for lab in servers.values()}
    ports = {}
    for index in range(1, nodes + 1):
        port = server.free_port()
        while port in taken:
            port = server.free_port()
        taken.add(port)
        ports[inference_name(index)] = port
    return ports


def _write_lmcache_configs(root: Path, figures: dict) -> dict[str, str]:
    """The arms' LMCache configs under ``root/etc``; returns arm → path."""
    etc = root / "etc"
    etc.mkdir()
    paths = {}
    for arm, cache_dir in (("local", "/mnt/local-nvme/lmcache"), ("array", "/mnt/fx/lmcache")):
        path = etc / f"lmc-{arm}.yaml"
        path.write_text(LMCACHE_CONFIG.format(arm=arm, cache_dir=cache_dir,
                                              host_tier_gb=figures["kv"]["host_tier_gb"]))
        paths[arm] = str(path)
    return paths


def lab_plan(plan: list[dict], ports: dict[str, int], etc: dict[str, str],
             readback: dict | None = None) -> list[dict]:
    """``plan`` adapted to lab nodes sharing one host: wherever a step has an engine ``port``,
    each inference node gets its own (``node_params``); arms' LMCache configs point at the lab's
    files; engine polling is fast; the shared read-back plans ``readback``'s
    ``planned_nodes`` and ``min_overlap_s``. Steps without those parameters are unchanged."""
    adapted = copy.deepcopy(plan)
    for step in adapted:
        if step.get("expand") == "shared_readback" and readback:
            step.update(readback)
        params = step.get("params") or {}
        for key, value in LAB_FAST_PARAMS.items():
            if key in params:
                params[key] = value
        if "port" in params and step.get("role") == "inference":
            node_params = step.setdefault("node_params", {})
            for node, port in ports.items():
                node_params.setdefault(node, {})["port"] = port
        for arm, arm_params in (step.get("arm_params") or {}).items():
            if "lmcache_config" in arm_params and arm in etc:
                arm_params["lmcache_config"] = etc[arm]
    return adapted


@transaction.atomic
def _lab_engagement(name: str, figures: dict, servers: dict[str, server.LabServer],
                    ports: dict[str, int], etc: dict[str, str]) -> Engagement:
    _engagement_reset(name)
    engagement = engagement_create(name=name, customer="Lab", start_date=timezone.localdate(),
                                   is_lab=True)
    array = Array.objects.create(
        engagement=engagement, model="FX100", serial=f"LAB-{figures['name'].upper()}",
        expected_drive_count=24, drive_model=figures["drives"]["model"],
        link_speed_mbps=figures["link"]["speed_mbps"],
        layout=Array.Layout.RAID5,
    )
    controller = servers[ARRAY_NODE]
    credential = Credential.from_secret(f"{name}-client-key", controller.client_private_key)
    Credential.objects.filter(name=credential.name).delete()
    credential.save()
    common = {"engagement": engagement, "ssh_user": controller.user, "credential": credential,
              "array": array, "is_lab": True}
    rows = [Node(name=ARRAY_NODE, role=Node.Role.ARRAY, address=controller.address,
                 port=controller.port, host_key=controller.host_key, **common)]
    for node_name, lab in servers.items():
        if node_name == ARRAY_NODE:
            continue
        rows.append(Node(name=node_name, role=Node.Role.INFERENCE, address=lab.address,
                         port=lab.port, host_key=lab.host_key,
                         interface=figures["link"]["interface"],
                         fio_target=figures["fio"]["device"], **common))
    for row in rows:
        row.save()  # save() pins the host key's fingerprint
    adapted = []
    for gate in engagement.gates.all():
        plan = lab_plan(gate.probe_plan, ports, etc, readback={
            "planned_nodes": figures["rdma"].get("planned_nodes") or len(ports),
            "min_overlap_s": figures["rdma"].get("min_overlap_s", 1.0)})
        if plan != gate.probe_plan:
            gate.probe_plan = plan
            gate.save(update_fields=["probe_plan"])
            adapted.append(gate.code)
    now = timezone.now()
    for position, (description, quantity) in enumerate(LAB_BOM, start=1):
        engagement.bom_items.create(position=position, description=description,
                                    quantity=quantity, ticked_by=LAB_ACTOR, ticked_at=now)
    AuditEntry.objects.create(
        engagement=engagement, actor=LAB_ACTOR, action="lab engagement created",
        reason=f"lab up --scenario {figures['name']} --nodes {len(servers) - 1}: simulated "
               f"evidence from stand-in tools",
        details={"scenario": figures["name"],
                 "ports": {node: lab.port for node, lab in servers.items()},
                 "bom": "ticked by the lab set-up, not by a person",
                 "plans_adapted": {"gates": adapted, "engine_ports": ports,
                                   "lmcache_configs": etc, "fast_polling": LAB_FAST_PARAMS}},
    )
    return engagement


def _server_dirs(root: Path) -> list[Path]:
    """``root`` and its sub-directories that hold (or held) a lab sshd."""
    if not root.is_dir():
        return []
    found = [root] if (root / "sshd_config").exists() else []
    return found + sorted(d for d in root.iterdir() if d.is_dir() and (d / "sshd_config").exists())


def _stop_engines(directory: Path) -> int:
    """Stop the stand-in engines (``vllm serve``) a run left behind on a lab node: only a pid
    whose command line is this node's own stand-in."""
    stopped = 0
    for pid_file in sorted((directory / "engines").glob("*.pid")):
        try:
            pid = int(pid_file.read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            pid_file.unlink(missing_ok=True)
            continue
        if str(directory / "bin" / "vllm").encode() in cmdline and b"serve" in cmdline:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                    break
                time.sleep(0.02)
            stopped += 1
        pid_file.unlink(missing_ok=True)
    return stopped


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _stop_sessions(directory: Path) -> int:
    """Stop what sessions on this lab node left running detached (a soak's agent, an armed
    heal timer): processes whose environment names this node's scenario file."""
    marker = f"ACCEPTANCE_LAB_SCENARIO={directory / 'scenario.json'}".encode()
    stopped = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            os.kill(int(proc.name), signal.SIGKILL)
            stopped += 1
        except OSError:
            continue
    return stopped


def _stop_one(directory: Path) -> bool:
    _stop_engines(directory)
    stopped = server.server_stop(directory)
    _stop_sessions(directory)
    return stopped


def _stop_tree(root: Path) -> list[str]:
    """Stop every lab server (and its engines) in ``root`` and its node directories, and remove
    the soak's network namespace, links and blackhole route with its processes."""
    removed = [f"{root.name}: {what}" for what in netns.paths_down(root)] if root.is_dir() else []
    directories = _server_dirs(root)
    if not directories:
        return removed
    with ThreadPoolExecutor(max_workers=min(START_THREADS, len(directories)),
                            thread_name_prefix="lab-stop") as pool:
        results = list(pool.map(_stop_one, directories))
    base = settings.LAB_DIR
    return [str(d.relative_to(base)) if d.is_relative_to(base) else d.name
            for d, stopped in zip(directories, results, strict=True) if stopped] + removed


def lab_down() -> list[str]:
    """Stop every lab server started under LAB_DIR (and the engines left on its nodes); returns
    the names stopped (``lab-NAME/NODE``, or ``NAME`` for a server directly under LAB_DIR)."""
    stopped = []
    if settings.LAB_DIR.exists():
        for directory in sorted(settings.LAB_DIR.iterdir()):
            if directory.is_dir():
                stopped += _stop_tree(directory)
    return stopped


def scenario_names() -> list[str]:
    return sorted([*SCENARIOS, *SOAK_SCENARIOS])
