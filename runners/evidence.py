"""Evidence import for sites that allow no inbound SSH.

``collection_script`` writes, for one gate and one node, a standalone Python script that runs
the very commands the SSH runner would (same probe definitions, same validated parameters, same
``timeout`` wrapping) and packs the raw outputs into a bundle (tar.gz with ``manifest.json``).
``evidence_import`` verifies a set of bundles whole — archive members, sizes, paths, hashes,
engagement, gate, node, and that every command is one our probes build — before anything is
stored; then stores the runs as evidence of origin "imported" and evaluates the gate exactly as
for SSH runs. A bad bundle is refused with the reason and nothing of it remains. Importing on a
gate that has passed is a re-run of it: it needs the same confirmation and reason, and leaves
the same audit entry (``runners.dispatch.passed_rerun_check``).

Bundles come from outside, so reading one costs bounded memory whatever it holds: at most
:data:`MAX_BUNDLES` per import, read one at a time as a stream (the tar members one by one,
their count checked as they come), gunzipped in small pieces against a budget for the whole
import (a gzip bomb stops at the limit, not after it), each member hashed as it is read and
kept in a spool file that goes to disk past :data:`SPOOL_BYTES`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import tarfile
import tempfile
import zlib
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from acceptance.models import Node
from gates.models import Gate
from gates.services import gate_check_runnable
from runners import intake
from runners.dispatch import (
    gate_run_finish_if_complete,
    passed_rerun_audit,
    passed_rerun_check,
    service_probe_run,
)
from runners.execution import plan_values
from runners.models import GateRun, NodeJob, ProbeRun
from runners.parsers import PARSERS
from runners.plans import node_steps
from runners.probes import Probe, ProbeParameterError, probe

FORMAT = "acceptance-evidence/1"
MAX_BUNDLES = 16  # bundles in one import: one per node of the gate
MAX_BUNDLE_BYTES = 256 << 20  # compressed archive
MAX_MEMBER_BYTES = 64 << 20  # one raw output
MAX_MANIFEST_BYTES = 1 << 20  # manifest.json (a real one is some tens of KiB)
MAX_TOTAL_BYTES = 512 << 20  # decompressed, all bundles of one import together
MAX_HEADER_BYTES = 1 << 20  # what the archive may hold between two members (pax, long names)
MAX_MEMBERS = 10_000  # files in one bundle
SPOOL_BYTES = 1 << 20  # a bundle's files stay in memory up to this, then go to a temporary file
CHUNK_BYTES = 64 << 10
SAFE_NAME = re.compile(r"(manifest\.json|runs/[0-9]{3,5}-[a-z0-9_]{1,64}\.std(out|err))")
TEMPLATE = Path(__file__).resolve().parent / "collect" / "collector.py.tmpl"
#: Modules of runners.parsers a parser imports besides base (sent with it in the script).
PARSER_HELPERS = {"vllm_metrics": ("kv_bytes",)}
PLACEHOLDERS = {"device": "/dev/nvme9999"}  # stands for a discovered item; replaced on the node

# A bundle is bytes or an open binary file (an upload, a file the command opened).
BundleSource = bytes | IO[bytes]


class EvidenceRefused(Exception):
    """The bundle(s) cannot be imported; the message names the bundle and the reason."""


def _run_labels(step: dict, entry: dict) -> dict:
    """A run's labels: its step's, and for a ``for_each`` step the item it ran for (G1: the
    controller it self-tested), as an SSH run labels it."""
    rule = step.get("for_each")
    item = (entry.get("parameters") or {}).get(rule["param"]) if rule else None
    return {**step["labels"], rule["label"]: item} if rule and item else dict(step["labels"])


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
    parsers = {s["parser"] for s in steps}
    helpers = {"base"} | {h for p in parsers for h in PARSER_HELPERS.get(p, ())}
    # helpers first (a parser imports them as it is loaded), base before all
    sources = [[name, (Path(PARSERS["fio"].__file__).parent / f"{name}.py").read_text()]
               for name in sorted(helpers | parsers,
                                  key=lambda n: (n != "base", n not in helpers, n))]
    text = TEMPLATE.read_text()
    text = text.replace("__PLAN__", base64.b64encode(json.dumps(plan).encode()).decode())
    return text.replace("__PARSER_SOURCES__",
                        base64.b64encode(json.dumps(sources).encode()).decode())


class _OverBudget(Exception):
    """Raised from inside tarfile's reads when a bundle decompresses beyond what is allowed."""


class _Budget:
    """Decompressed bytes of one import, counted as they are produced.

    ``used`` never passes ``limit`` (all bundles together) unnoticed; while the archive reads the
    headers between two members, ``header_end`` bounds them too (tarfile reads a pax header or a
    GNU long name into memory whole, whatever size it claims)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self.header_end: int | None = None

    def spend(self, count: int) -> None:
        self.used += count
        if self.used > self.limit:
            raise _OverBudget(f"decompressed contents exceed {self.limit >> 20} MiB "
                              f"(all bundles of the import together)")
        if self.header_end is not None and self.used > self.header_end:
            raise _OverBudget(f"archive headers larger than {MAX_HEADER_BYTES >> 20} MiB "
                              f"between two files")


class _Gunzip:
    """The tar stream inside a gzip file, decompressed a small piece per read and charged to
    the budget: the only reader tarfile is given (stream mode, ``r|``)."""

    def __init__(self, fileobj: IO[bytes], budget: _Budget) -> None:
        self._gzip = gzip.GzipFile(fileobj=fileobj, mode="rb")
        self._budget = budget

    def read(self, size: int = CHUNK_BYTES) -> bytes:
        data = self._gzip.read(min(size, CHUNK_BYTES) if size >= 0 else CHUNK_BYTES)
        self._budget.spend(len(data))
        return data


@dataclass
class _Member:
    offset: int
    size: int
    sha256: str


@dataclass
class _Bundle:
    """One bundle read: its files in ``spool`` (path → offset, size, sha256). After the check,
    ``node``, ``host`` and the checked ``runs`` are what is kept of the manifest."""

    name: str
    spool: IO[bytes]
    files: dict[str, _Member]
    manifest: dict[str, Any] = field(default_factory=dict)
    node: Node | None = None
    host: str = "?"
    runs: list[dict[str, Any]] = field(default_factory=list)

    def read(self, path: str) -> bytes:
        member = self.files[path]
        self.spool.seek(member.offset)
        return self.spool.read(member.size)

    def refuse(self, reason: str) -> EvidenceRefused:
        return EvidenceRefused(f"{self.name}: {reason}")


def _source_open(name: str, source: BundleSource) -> IO[bytes]:
    """``source`` as a binary file at its start; EvidenceRefused when above the size limit."""
    fileobj: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes) else source
    fileobj.seek(0, io.SEEK_END)
    size = fileobj.tell()
    fileobj.seek(0)
    if size > MAX_BUNDLE_BYTES:
        raise EvidenceRefused(f"{name}: larger than {MAX_BUNDLE_BYTES >> 20} MiB")
    return fileobj


def _read_bundle(name: str, source: BundleSource, budget: _Budget, stack: ExitStack) -> _Bundle:
    """Read one bundle member by member into a spool file (closed with ``stack``), hashing each
    file as it comes; refuse at the first member that breaks a rule, before reading further."""
    bundle = _Bundle(name, stack.enter_context(
        tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)), {})
    fileobj = _source_open(name, source)
    try:
        budget.header_end = budget.used + MAX_HEADER_BYTES
        archive = tarfile.open(fileobj=_Gunzip(fileobj, budget), mode="r|")  # noqa: SIM115
        count = 0
        while (member := archive.next()) is not None:
            budget.header_end = None
            count += 1
            if count > MAX_MEMBERS:
                raise bundle.refuse(f"more than {MAX_MEMBERS} files")
            _member_check(bundle, member, budget)
            _member_copy(bundle, archive, member)
            budget.header_end = budget.used + MAX_HEADER_BYTES
    except _OverBudget as error:
        raise bundle.refuse(str(error)) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise bundle.refuse(f"not a readable tar.gz archive ({error})") from None
    finally:
        budget.header_end = None
    if "manifest.json" not in bundle.files:
        raise bundle.refuse("no manifest.json")
    try:
        manifest = json.loads(bundle.read("manifest.json"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise bundle.refuse(f"manifest.json is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise bundle.refuse(f"manifest.json is not of format {FORMAT}")
    bundle.manifest = manifest
    return bundle


def _member_check(bundle: _Bundle, member: tarfile.TarInfo, budget: _Budget) -> None:
    path = PurePosixPath(member.name)
    if member.name.startswith("/") or ".." in path.parts or "\\" in member.name:
        raise bundle.refuse(f"unsafe path {member.name!r} in the archive")
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
        raise bundle.refuse(f"{member.name!r} is not a regular file (links, devices and sparse "
                            f"files refused)")
    if not SAFE_NAME.fullmatch(member.name):
        raise bundle.refuse(f"unexpected file {member.name!r} in the archive")
    if member.name in bundle.files:
        raise bundle.refuse(f"{member.name!r} appears twice")
    if member.size > MAX_MEMBER_BYTES:
        raise bundle.refuse(f"{member.name!r} is larger than {MAX_MEMBER_BYTES >> 20} MiB")
    if member.name == "manifest.json" and member.size > MAX_MANIFEST_BYTES:
        raise bundle.refuse(f"manifest.json is larger than {MAX_MANIFEST_BYTES >> 20} MiB")
    if budget.used + member.size > budget.limit:
        raise bundle.refuse(f"contents exceed {budget.limit >> 20} MiB "
                            f"(all bundles of the import together)")


def _member_copy(bundle: _Bundle, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    extracted = archive.extractfile(member)
    if extracted is None:  # not reached: only regular files get here
        raise bundle.refuse(f"cannot read {member.name!r}")
    digest = hashlib.sha256()
    offset = bundle.spool.seek(0, io.SEEK_END)
    size = 0
    while chunk := extracted.read(CHUNK_BYTES):
        digest.update(chunk)
        bundle.spool.write(chunk)
        size += len(chunk)
    if size != member.size:
        raise bundle.refuse(f"cannot read {member.name!r} (truncated)")
    bundle.files[member.name] = _Member(offset, size, digest.hexdigest())


_RUN_KEYS = ("step", "probe", "parameters", "command", "stdout", "stderr", "exit_status",
             "started_at", "finished_at")


def _check_bundle(bundle: _Bundle, gate: Gate) -> None:
    """Check the manifest against the gate, its node and the files read; keep only what the
    store needs (the node, the host, the checked runs) and drop the rest of the manifest."""
    refuse = bundle.refuse
    m = bundle.manifest
    engagement = gate.engagement
    if m.get("engagement") != engagement.name:
        raise refuse(f"collected for engagement {m.get('engagement')!r}, not {engagement.name}")
    if m.get("gate") != gate.code:
        raise refuse(f"collected for gate {m.get('gate')!r}, not {gate.code}")
    node = engagement.nodes.filter(name=str(m.get("node"))).first()
    if node is None:
        raise refuse(f"node {m.get('node')!r} is not in engagement {engagement.name}")
    runs = m.get("runs")
    if not isinstance(runs, list) or not runs:
        raise refuse("the manifest lists no runs")
    steps = _steps(gate, node)
    referenced = {"manifest.json"}
    kept = []
    for run in runs:
        if not isinstance(run, dict):
            raise refuse("the manifest's runs are not objects")
        label = f"run {run.get('index')!r} ({run.get('probe')!r})"
        index = run.get("step")
        step = steps[index] if isinstance(index, int) and 0 <= index < len(steps) else None
        if step is None or step["probe"] != run.get("probe"):
            raise refuse(f"{label}: {gate.code} has no such step on a {node.role} node")
        spec: Probe = probe(step["probe"])
        parameters = run.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise refuse(f"{label}: parameters differ from the gate's plan")
        parameters = dict(parameters)
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
            if not isinstance(path, str) or path not in bundle.files:
                raise refuse(f"{label}: {stream} file {path!r} missing from the archive")
            if path in referenced:
                raise refuse(f"{label}: {stream} file {path!r} is listed twice")
            if bundle.files[path].sha256 != run.get(f"{stream}_sha256"):
                raise refuse(f"{label}: sha256 of {path} does not match the manifest")
            referenced.add(path)
        if not isinstance(run.get("exit_status"), int):
            raise refuse(f"{label}: no exit status")
        for when in ("started_at", "finished_at"):
            if not isinstance(run.get(when), str) or parse_datetime(run[when]) is None:
                raise refuse(f"{label}: {when} is not an ISO time")
        entry = {key: run.get(key) for key in _RUN_KEYS}
        entry["tool_version"] = str(run.get("tool_version", ""))[:200]
        kept.append(entry)
    extra = set(bundle.files) - referenced
    if extra:
        raise refuse(f"files not listed in the manifest: {sorted(extra)}")
    ran = {r["step"] for r in kept}
    missing = [s["probe"] for s in steps if not s.get("for_each") and s["step"] not in ran]
    if missing:
        raise refuse(f"no run of {missing} in the bundle")
    bundle.node, bundle.host, bundle.runs = node, str(m.get("host", "?"))[:253], kept
    bundle.manifest = {}


def evidence_import(*, gate: Gate, bundles: Sequence[tuple[str, BundleSource]],
                    imported_by: str, confirmed: bool = False, reason: str = "") -> GateRun:
    """Verify every bundle, then store them as one imported gate run and evaluate it.

    ``bundles`` is a list of (name, tar.gz as bytes or an open binary file), one per node the
    gate runs on, at most :data:`MAX_BUNDLES`; they are read and checked one at a time. On a gate
    that has passed the import is a re-run: it needs ``confirmed`` and a ``reason``, recorded in
    the audit trail as for any re-run of a passed gate. Raises EvidenceRefused (nothing stored),
    GateRefused (gate may not run now) or ConfirmationRequired (a GateRefused) before any bundle
    is read.
    """
    if not bundles:
        raise EvidenceRefused("no bundle given")
    if len(bundles) > MAX_BUNDLES:
        raise EvidenceRefused(f"{len(bundles)} bundles: at most {MAX_BUNDLES} in one import "
                              f"(one per node of the gate)")
    reason = (reason or "").strip()
    gate_check_runnable(gate=gate)
    passed_rerun_check(gate=gate, reason=reason, confirmed=confirmed)
    budget = _Budget(MAX_TOTAL_BYTES)
    with ExitStack() as stack:
        read: list[_Bundle] = []
        seen: set[str] = set()
        for name, source in bundles:
            bundle = _read_bundle(name, source, budget, stack)
            _check_bundle(bundle, gate)
            assert bundle.node is not None
            if bundle.node.name in seen:
                raise EvidenceRefused(f"several bundles for node(s) {[bundle.node.name]}")
            seen.add(bundle.node.name)
            read.append(bundle)
        roles = {s["role"] for s in gate.probe_plan} - {"service"}
        expected = set(gate.engagement.nodes.filter(role__in=roles)
                       .values_list("name", flat=True))
        if seen != expected:
            raise EvidenceRefused(f"{gate.code} needs one bundle per node: missing "
                                  f"{sorted(expected - seen)}")
        gate_run = _store(gate, read, imported_by, confirmed=confirmed, reason=reason)
    gate_run_finish_if_complete(gate_run_id=gate_run.id)
    gate_run.refresh_from_db()
    return gate_run


@transaction.atomic
def _store(gate: Gate, bundles: list[_Bundle], imported_by: str, *, confirmed: bool,
           reason: str) -> GateRun:
    Gate.objects.select_for_update().get(pk=gate.pk)
    gate.refresh_from_db()
    gate_check_runnable(gate=gate)
    passed_rerun_check(gate=gate, reason=reason, confirmed=confirmed)
    attempt = (max(gate.runs.values_list("attempt", flat=True), default=0)) + 1
    gate_run = GateRun.objects.create(gate=gate, attempt=attempt, started_by=imported_by,
                                      origin=GateRun.Origin.IMPORTED, reason=reason,
                                      state=GateRun.State.RUNNING)
    if gate.state == Gate.State.PASSED:
        passed_rerun_audit(gate=gate, gate_run=gate_run, actor=imported_by, reason=reason)
    for step in gate.probe_plan:
        if step["role"] == "service":
            service_probe_run(gate_run=gate_run, probe_name=step["probe"])
    for bundle in bundles:
        now = timezone.now()
        NodeJob.objects.create(gate_run=gate_run, node=bundle.node, state=NodeJob.State.DONE,
                               started_at=now, finished_at=now)
        assert bundle.node is not None
        steps = _steps(gate, bundle.node)
        for entry in bundle.runs:
            spec = probe(entry["probe"])
            step = steps[entry["step"]]
            run = ProbeRun(
                gate_run=gate_run, node=bundle.node, probe=spec.name, parser=spec.parser,
                parser_version=PARSERS[spec.parser].PARSER_VERSION,
                parameters=entry["parameters"] or {}, command=entry["command"],
                labels=_run_labels(step, entry), arm=step["arm"],
                tool_version=entry["tool_version"],
                exit_code=entry["exit_status"],
                started_at=parse_datetime(entry["started_at"]),
                finished_at=parse_datetime(entry["finished_at"]),
                origin=GateRun.Origin.IMPORTED, host=bundle.host,
            )
            stderr = bundle.read(entry["stderr"])
            intake.raw_output_keep(run, stdout=bundle.read(entry["stdout"]), stderr=stderr)
            run.save()
            if not spec.parse_exit(run.exit_code):
                run.state = ProbeRun.State.FAILED
                run.error_kind, run.error = intake.exit_error(run.exit_code, stderr)
                run.save(update_fields=["state", "error_kind", "error"])
            else:
                intake.raw_output_parse(run)
            del stderr
    return gate_run
