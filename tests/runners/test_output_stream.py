"""Raw output streamed to content-addressed files, with a stated cap and bounded memory.

Real parts: the lab's array controller (a real sshd on loopback) runs the real probe
``nvme_inventory``; its ``nvme`` stand-in prints ``nvme list -o json`` for the scenario's drive
count (20 000 drives: 19.7 MB of JSON, the shape nvme-cli prints). The full output the node
sends is read a second time through the same transport, to compare with what was stored.
"""

import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from django.utils import timezone
from pypdf import PdfReader
from pypdf.errors import LimitReachedError
from weasyprint import Attachment

from reports.evidence import SUMMARY_NAME, embedded_digests, evidence_check
from reports.render import render_html_pdf
from runners import outputs
from runners.execution import _JobContext, probe_run_execute
from runners.live import output_read
from runners.models import GateRun, NodeJob, ProbeRun
from runners.pages import LogCursor, log_advance
from runners.probes import probe
from runners.transport import SSHConnection

DRIVES = 20_000  # nvme list -o json of this many drives: about 19.7 MB


def _setup(lab, drives: int):
    engagement, _server = lab("healthy", drives={"count": drives})
    node = engagement.nodes.get(role="array")
    gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                      started_by="test")
    job = NodeJob.objects.create(gate_run=gate_run, node=node, state=NodeJob.State.RUNNING)
    return node, job


def _run_inventory(node, job, *, measure_memory: bool = False):
    spec = probe("nvme_inventory")
    with SSHConnection(node.ssh_target()) as connection:
        full = connection.run(spec.command({}), timeout=120).stdout  # what the node sends
        if measure_memory:
            tracemalloc.start()
        try:
            run = probe_run_execute(ctx=_JobContext(job, connection, {}), spec=spec, values={})
            peak = tracemalloc.get_traced_memory()[1] if measure_memory else None
        finally:
            if measure_memory:
                tracemalloc.stop()
    run.refresh_from_db()
    return run, full, peak


def test_it_keeps_an_output_under_the_cap_as_its_sha256_file_and_parses_it(lab):
    node, job = _setup(lab, 24)
    run, full, _ = _run_inventory(node, job)
    assert run.state == ProbeRun.State.PARSED, run.error
    assert run.measurements.get(metric="drive_count").value == 24
    digest = hashlib.sha256(full).hexdigest()
    assert (run.stdout_sha256, run.stdout_size, run.output_cap) == (digest, len(full), 256 << 20)
    assert run.stdout_file == f"{digest[:2]}/{digest}" and bytes(run.stdout) == b""
    path = outputs.file_path(run.stdout_file)
    assert path.read_bytes() == full
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert run.simulated and b"simulated output" in run.raw("stderr")
    assert run.stderr_sha256 == hashlib.sha256(run.raw("stderr")).hexdigest()
    assert not list((outputs.outputs_dir() / "live").glob(f"{run.id}.*"))  # renamed, not kept
    piece = output_read(run.id, offset=100, limit=50)  # a log slice is a range of the file
    assert (piece.data, piece.next_offset, piece.finished) == (full[100:150], 150, False)
    last = output_read(run.id, offset=len(full) - 10, limit=50)
    assert (last.data, last.finished) == (full[-10:], True)


def test_it_stores_a_large_output_with_bounded_memory(lab, settings):
    settings.PARSE_MAX_BYTES = 1 << 20  # this output is stored, but not read whole to parse
    node, job = _setup(lab, DRIVES)
    run, full, peak = _run_inventory(node, job, measure_memory=True)
    assert len(full) > 18 << 20
    assert run.stdout_size == len(full) and run.stdout_sha256 == hashlib.sha256(full).hexdigest()
    assert outputs.file_path(run.stdout_file).read_bytes() == full
    assert (run.state, run.error_kind) == (ProbeRun.State.FAILED, "parse")
    assert f"stdout of {len(full)} bytes is larger than the parsers read" in run.error
    # 19.7 MB went through the worker; Python held at most a few MiB of it at once.
    assert peak < 4 << 20, f"peak {peak / (1 << 20):.1f} MiB traced while storing"


def test_it_ends_a_run_beyond_the_cap_as_output_cap_with_the_first_bytes_kept(lab, settings):
    settings.OUTPUT_CAP_BYTES = cap = 1 << 20
    node, job = _setup(lab, DRIVES)
    run, full, _ = _run_inventory(node, job)
    assert (run.state, run.error_kind) == (ProbeRun.State.FAILED, "output_cap")
    assert (run.stdout_size, run.output_cap) == (cap, cap)
    assert run.stdout_sha256 == hashlib.sha256(full[:cap]).hexdigest()
    assert outputs.file_path(run.stdout_file).read_bytes() == full[:cap]
    assert run.error.startswith(f"stdout went beyond the stored cap of {cap} bytes (1 MiB)")
    assert "remote process group:" in run.error and run.finished_at is not None
    assert run.measurements.count() == 0
    job.refresh_from_db()
    assert job.state == NodeJob.State.RUNNING  # the job goes on with its next probe


def test_it_reads_rows_that_hold_their_bytes_in_the_database(lab):
    node, job = _setup(lab, 24)
    old = ProbeRun.objects.create(
        gate_run=job.gate_run, node=node, probe="nvme_inventory", parser="nvme_list",
        parser_version="1", command="nvme list -o json", started_at=timezone.now(),
        state=ProbeRun.State.PARSED, stdout=b'{"Devices": []}\n', stderr=b"old stderr\n",
        stdout_size=16, stderr_size=11)
    assert old.raw() == b'{"Devices": []}\n' and old.raw("stderr") == b"old stderr\n"
    piece = output_read(old.id, offset=2, limit=7)
    assert (piece.data, piece.finished) == (b"Devices", False)
    assert output_read(old.id, stream="stderr").data == b"old stderr\n"


def test_a_pruned_output_says_when(lab):
    node, job = _setup(lab, 24)
    run, _full, _ = _run_inventory(node, job)
    when = timezone.now()
    ProbeRun.objects.filter(id=run.id).update(stdout_pruned_at=when)
    piece = output_read(run.id)
    assert (piece.data, piece.finished, piece.pruned_at) == (b"", True, when)
    pieces, _cursor, _done = log_advance(job.gate_run, LogCursor(run.id, 0, 0, True, False))
    assert f"stdout pruned on {when:%Y-%m-%d}" in "".join(p.text for p in pieces)


def test_the_stated_cap_must_be_a_number_the_storage_accepts(tmp_path):
    env = {**os.environ, "ACCEPTANCE_VAR_DIR": str(tmp_path), "ACCEPTANCE_OUTPUT_CAP_BYTES": "0"}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=Path(__file__).parents[2],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ACCEPTANCE_OUTPUT_CAP_BYTES must be 1 … 1099511627776 bytes, not 0" in done.stderr
    assert "Traceback" not in done.stderr


def test_report_evidence_of_more_than_75_mb_verifies_without_whole_decompression():
    """A real WeasyPrint PDF/A-3 with an 80 MB attachment: pypdf's own reader stops at 75 MB;
    the report's check hashes it as it inflates, in 1 MiB blocks."""
    big = b"fio: read: IOPS=16.0M\n" * (80_000_000 // 22)
    name = "evidence/001-array-nvme_inventory.out"

    def pdf_with(sha256: str) -> bytes:
        summary = json.dumps({"runs": [{"number": 1, "attachment": name, "sha256": sha256}]})
        return render_html_pdf("<html><body><p>evidence</p></body></html>", attachments=[
            Attachment(file_obj=io.BytesIO(summary.encode()), name=SUMMARY_NAME),
            Attachment(file_obj=io.BytesIO(big), name=name)])

    data = pdf_with(hashlib.sha256(big).hexdigest())
    with pytest.raises(LimitReachedError):
        PdfReader(io.BytesIO(data)).attachments[name]  # the whole-file decoder gives up
    assert embedded_digests(data)[name] == (hashlib.sha256(big).hexdigest(), len(big))
    tracemalloc.start()
    try:
        check = evidence_check(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert check.ok and check.matched == 1, check.summary
    assert peak < 16 << 20, f"peak {peak >> 20} MiB traced for an 80 MB attachment"
    wrong = evidence_check(pdf_with("0" * 64))
    assert not wrong.ok and f"{name} hashes to {hashlib.sha256(big).hexdigest()[:16]}" in (
        wrong.summary)
    with pytest.raises(ValueError):
        embedded_digests(b"not a pdf")


def test_a_lost_runs_partial_output_stays_readable(lab):
    """A worker killed mid-probe never renames its live file: recovery fails the run, and the
    bytes that reached the file are still served (nothing lost)."""
    node, job = _setup(lab, 24)
    run = ProbeRun.objects.create(
        gate_run=job.gate_run, node=node, probe="nvme_inventory", parser="nvme_list",
        parser_version="1", command="nvme list -o json", started_at=timezone.now())
    live = outputs.StreamFile(outputs.live_path(run.id, "stdout"), 1 << 20)
    live.write(b'{"Devices": [')
    live.flush()
    ProbeRun.objects.filter(id=run.id).update(stdout_size=13)
    assert output_read(run.id).data == b'{"Devices": ['  # live, while it runs
    ProbeRun.objects.filter(id=run.id).update(state=ProbeRun.State.FAILED, error_kind="lost")
    piece = output_read(run.id, offset=1, limit=100)
    assert (piece.data, piece.finished) == (b'"Devices": [', True)
    live.discard()
