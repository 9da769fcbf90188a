"""Evidence import for sites that allow no inbound SSH.

``collection_script`` writes, for one gate and one node, a standalone Python script that runs
the very commands the SSH runner would (same probe definitions, same validated parameters, same
``timeout`` wrapping) and packs the raw outputs into a bundle (tar.gz with ``manifest.json``).
``evidence_import`` verifies a set of bundles whole — archive members, sizes, paths, hashes,
engagement, gate, node, and that every command is one our probes build — before anything is
stored; then stores the runs as evidence of origin "imported" and evaluates the gate exactly as
for SSH runs. A bad bundle is refused with the reason and nothing of it remains.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from acceptance.models import Node
from gates.models import Gate
from gates.services import gate_check_runnable
from runners import intake
from runners.dispatch import gate_run_finish_if_complete, service_probe_run
from runners.execution import plan_values
from runners.models import GateRun, NodeJob, ProbeRun
from runners.parsers import PARSERS
from runners.plans import node_steps
from runners.probes import Probe, ProbeParameterError, probe

FORMAT = "acceptance-evidence/1"
MAX_BUNDLE_BYTES = 256 << 20  # compressed archive
MAX_MEMBER_BYTES = 64 << 20  # one raw output
MAX_TOTAL_BYTES = 512 << 20  # all raw outputs of one bundle
MAX_MEMBERS = 10_000
SAFE_NAME = re.compile(r"(manifest\.json|runs/[0-9]{3,5}-[a-z0-9_]{1,64}\.std(out|err))")
TEMPLATE = Path(__file__).resolve().parent / "collect" / "collector.py.tmpl"
PLACEHOLDERS = {"device": "/dev/nvme9999"}  # stands for a discovered item; replaced on the node


class EvidenceRefused(Exception):
    """The bundle(s) cannot be imported; the message names the bundle and the reason."""


def _steps(gate: Gate, node: Node) -> list[dict]:
    steps = []
    for step in node_steps(gate, node):
        spec = probe(step["probe"])
        values = plan_values(step, spec, node, None)
        entry = {"step": len(steps), "probe": spec.name, "parser": spec.parser,
                 "timeout": spec.timeout_s + 15, "version_command": spec.version_command(),
                 "labels": step.get("labels") or {}, "arm": step.get("arm", "")}
        rule = step.get("for_each")
        if rule:
            placeholder = PLACEHOLDERS[rule["param"]]
            values[rule["param"]] = placeholder
            entry["for_each"] = {**rule, "placeholder": placeholder,
                                 "pattern": spec.params[rule["param"]].kind}
        entry["parameters"] = {k: v for k, v in spec.clean(values).items()
                               if not rule or k != rule["param"]}
        entry["command"] = spec.command(values, sudo=node.use_sudo)
        steps.append(entry)
    return steps


def collection_script(*, gate: Gate, node: Node) -> str:
    """The collection script (Python 3 source) for ``gate`` on ``node``.

    Raises EvidenceRefused when the node takes no probe of this gate.
    """
    steps = _steps(gate, node)
    if not steps:
        raise EvidenceRefused(f"{gate.code} runs no probe on {node.name} (role {node.role})")
    plan = {"engagement": gate.engagement.name, "gate": gate.code, "node": node.name,
            "steps": steps}
    needed = {"base"} | {s["parser"] for s in steps}
    sources = [[name, (Path(PARSERS["fio"].__file__).parent / f"{name}.py").read_text()]
               for name in sorted(needed, key=lambda n: n != "base")]
    text = TEMPLATE.read_text()
    text = text.replace("__PLAN__", base64.b64encode(json.dumps(plan).encode()).decode())
    return text.replace("__PARSER_SOURCES__",
                        base64.b64encode(json.dumps(sources).encode()).decode())


@dataclass
class _Bundle:
    name: str
    manifest: dict
    files: dict[str, bytes]
    node: Node | None = None


def _read_bundle(name: str, data: bytes) -> _Bundle:
    def refuse(reason: str) -> EvidenceRefused:
        return EvidenceRefused(f"{name}: {reason}")

    if len(data) > MAX_BUNDLE_BYTES:
        raise refuse(f"larger than {MAX_BUNDLE_BYTES >> 20} MiB")
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        members = archive.getmembers()
    except (tarfile.TarError, OSError, EOFError) as error:
        raise refuse(f"not a readable tar.gz archive ({error})") from None
    if len(members) > MAX_MEMBERS:
        raise refuse(f"more than {MAX_MEMBERS} files")
    files: dict[str, bytes] = {}
    total = 0
    for member in members:
        path = PurePosixPath(member.name)
        if member.name.startswith("/") or ".." in path.parts or "\\" in member.name:
            raise refuse(f"unsafe path {member.name!r} in the archive")
        if not member.isfile():
            raise refuse(f"{member.name!r} is not a regular file (links and devices refused)")
        if not SAFE_NAME.fullmatch(member.name):
            raise refuse(f"unexpected file {member.name!r} in the archive")
        if member.name in files:
            raise refuse(f"{member.name!r} appears twice")
        if member.size > MAX_MEMBER_BYTES:
            raise refuse(f"{member.name!r} is larger than {MAX_MEMBER_BYTES >> 20} MiB")
        total += member.size
        if total > MAX_TOTAL_BYTES:
            raise refuse(f"contents exceed {MAX_TOTAL_BYTES >> 20} MiB")
        try:
            files[member.name] = archive.extractfile(member).read()
        except (tarfile.TarError, OSError, EOFError) as error:
            raise refuse(f"cannot read {member.name!r} ({error})") from None
    if "manifest.json" not in files:
        raise refuse("no manifest.json")
    try:
        manifest = json.loads(files["manifest.json"])
    except (ValueError, UnicodeDecodeError) as error:
        raise refuse(f"manifest.json is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise refuse(f"manifest.json is not of format {FORMAT}")
    return _Bundle(name, manifest, files)


def _check_bundle(bundle: _Bundle, gate: Gate) -> None:
    def refuse(reason: str) -> EvidenceRefused:
        return EvidenceRefused(f"{bundle.name}: {reason}")

    m = bundle.manifest
    engagement = gate.engagement
    if m.get("engagement") != engagement.name:
        raise refuse(f"collected for engagement {m.get('engagement')!r}, not {engagement.name}")
    if m.get("gate") != gate.code:
        raise refuse(f"collected for gate {m.get('gate')!r}, not {gate.code}")
    node = engagement.nodes.filter(name=m.get("node")).first()
    if node is None:
        raise refuse(f"node {m.get('node')!r} is not in engagement {engagement.name}")
    bundle.node = node
    runs = m.get("runs")
    if not isinstance(runs, list) or not runs:
        raise refuse("the manifest lists no runs")
    steps = _steps(gate, node)
    referenced = {"manifest.json"}
    for run in runs:
        label = f"run {run.get('index')!r} ({run.get('probe')!r})"
        index = run.get("step")
        step = steps[index] if isinstance(index, int) and 0 <= index < len(steps) else None
        if step is None or step["probe"] != run.get("probe"):
            raise refuse(f"{label}: {gate.code} has no such step on a {node.role} node")
        spec: Probe = probe(step["probe"])
        parameters = dict(run.get("parameters") or {})
        rule = step.get("for_each")
        item = parameters.pop(rule["param"], None) if rule else None
        if parameters != step["parameters"] or (
            rule and not (isinstance(item, str) and re.fullmatch(rule["pattern"], item))
        ):
            raise refuse(f"{label}: parameters differ from the gate's plan")
        try:
            expected = spec.command(run.get("parameters") or {}, sudo=node.use_sudo)
        except ProbeParameterError as error:
            raise refuse(f"{label}: {error}") from None
        if run.get("command") != expected:
            raise refuse(f"{label}: the command is not the one the probe definition builds")
        for stream in ("stdout", "stderr"):
            path = run.get(stream)
            if path not in bundle.files:
                raise refuse(f"{label}: {stream} file {path!r} missing from the archive")
            digest = hashlib.sha256(bundle.files[path]).hexdigest()
            if digest != run.get(f"{stream}_sha256"):
                raise refuse(f"{label}: sha256 of {path} does not match the manifest")
            referenced.add(path)
        if not isinstance(run.get("exit_status"), int):
            raise refuse(f"{label}: no exit status")
        for when in ("started_at", "finished_at"):
            if not isinstance(run.get(when), str) or parse_datetime(run[when]) is None:
                raise refuse(f"{label}: {when} is not an ISO time")
    extra = set(bundle.files) - referenced
    if extra:
        raise refuse(f"files not listed in the manifest: {sorted(extra)}")
    ran = {r.get("step") for r in runs}
    missing = [s["probe"] for s in steps if not s.get("for_each") and s["step"] not in ran]
    if missing:
        raise refuse(f"no run of {missing} in the bundle")


def evidence_import(*, gate: Gate, bundles: list[tuple[str, bytes]], imported_by: str) -> GateRun:
    """Verify every bundle, then store them as one imported gate run and evaluate it.

    ``bundles`` is a list of (name, tar.gz bytes), one per node the gate runs on. Raises
    EvidenceRefused (nothing stored) or GateRefused (gate may not run now).
    """
    if not bundles:
        raise EvidenceRefused("no bundle given")
    read = [_read_bundle(name, data) for name, data in bundles]
    for bundle in read:
        _check_bundle(bundle, gate)
    nodes = [b.node for b in read]
    names = [n.name for n in nodes]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise EvidenceRefused(f"several bundles for node(s) {sorted(duplicates)}")
    roles = {s["role"] for s in gate.probe_plan} - {"service"}
    expected = set(gate.engagement.nodes.filter(role__in=roles).values_list("name", flat=True))
    if set(names) != expected:
        raise EvidenceRefused(f"{gate.code} needs one bundle per node: missing "
                              f"{sorted(expected - set(names))}")
    gate_run = _store(gate, read, imported_by)
    gate_run_finish_if_complete(gate_run_id=gate_run.id)
    gate_run.refresh_from_db()
    return gate_run


@transaction.atomic
def _store(gate: Gate, bundles: list[_Bundle], imported_by: str) -> GateRun:
    Gate.objects.select_for_update().get(pk=gate.pk)
    gate.refresh_from_db()
    gate_check_runnable(gate=gate)
    attempt = (max(gate.runs.values_list("attempt", flat=True), default=0)) + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=imported_by,
                                      origin=GateRun.Origin.IMPORTED,
                                      state=GateRun.State.RUNNING)
    for step in gate.probe_plan:
        if step["role"] == "service":
            service_probe_run(gate_run=gate_run, probe_name=step["probe"])
    for bundle in bundles:
        now = timezone.now()
        NodeJob.objects.create(gate_run=gate_run, node=bundle.node, state=NodeJob.State.DONE,
                               started_at=now, finished_at=now)
        host = bundle.manifest.get("host", "?")
        steps = _steps(gate, bundle.node)
        for entry in bundle.manifest["runs"]:
            spec = probe(entry["probe"])
            step = steps[entry["step"]]
            stdout, stderr = bundle.files[entry["stdout"]], bundle.files[entry["stderr"]]
            run = ProbeRun(
                gate_run=gate_run, node=bundle.node, probe=spec.name, parser=spec.parser,
                parser_version=PARSERS[spec.parser].PARSER_VERSION,
                parameters=entry.get("parameters") or {}, command=entry["command"],
                labels=step["labels"], arm=step["arm"],
                tool_version=str(entry.get("tool_version", ""))[:200],
                exit_code=entry["exit_status"],
                started_at=parse_datetime(entry["started_at"]),
                finished_at=parse_datetime(entry["finished_at"]),
                origin=GateRun.Origin.IMPORTED, host=str(host)[:253],
            )
            intake.raw_output_keep(run, stdout=stdout, stderr=stderr)
            run.save()
            if not spec.parse_exit(run.exit_code):
                run.state = ProbeRun.State.FAILED
                run.error_kind, run.error = intake.exit_error(run.exit_code, stderr)
                run.save(update_fields=["state", "error_kind", "error"])
            else:
                intake.raw_output_parse(run)
    return gate_run
