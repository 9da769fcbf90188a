"""Live output of running probes: streamed to files as it arrives, readable from any offset,
watched for cancellation, with the worker's heartbeat.

``OutputRecorder`` is handed to the transport while a command runs. Each stream is written to
its live file (``runners.outputs.live_path``) as it arrives and hashed on the way; at least every
``FLUSH_SECONDS`` the file is flushed and the sizes written to the ``ProbeRun``, so a reader —
``manage.py tail_run`` or the web page — can follow it and resume from a byte offset after a
reconnect. Each stream is stored up to the stated cap (``ACCEPTANCE_OUTPUT_CAP_BYTES``, 256 MiB
by default, exact): the byte beyond it raises ``OutputCapReached`` (the transport stops the
command, the executor kills it on the node and fails the run as ``output_cap``, the first N
bytes kept and hashed; nothing is truncated silently). Memory stays bounded whatever the size.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Exists

from runners import outputs
from runners.lease import LeaseLost, lease_renew
from runners.models import GateRun, NodeJob, OutputChunk, ProbeRun
from runners.probes import SIMULATED_MARKER
from runners.transport import OutputCapReached

FLUSH_SECONDS = 0.5
CANCEL_CHECK_SECONDS = 1.0
_MARKER = SIMULATED_MARKER.encode()


class OutputRecorder:
    """Streams a running probe's output to its files; heartbeats; reports a cancel request."""

    def __init__(self, run: ProbeRun, job: NodeJob, progress: str | None = None,
                 cancellable: bool = True) -> None:
        self.run, self.job, self.cancellable = run, job, cancellable
        self.progress_re = re.compile(progress) if progress else None
        self.cap = outputs.output_cap_bytes()
        self.files = {
            "stdout": outputs.StreamFile(outputs.live_path(run.id, "stdout"), self.cap),
            "stderr": outputs.StreamFile(outputs.live_path(run.id, "stderr"), self.cap,
                                         tail=outputs.TAIL_KEEP),
        }
        self.capped: str | None = None  # the stream that went beyond the cap
        self.simulated = False
        self._carry = b""  # end of stderr so far, so the marker is found across pieces
        self.last_flush = self.last_cancel_check = time.monotonic()
        self.progress: float | None = None
        self._heard = False  # any output yet
        self._flushed: tuple = (0, 0, None)  # sizes and progress the row has

    @property
    def stderr_tail(self) -> bytes:
        return bytes(self.files["stderr"].tail)

    def on_output(self, stream: str, data: bytes) -> None:
        if not self._heard:  # the flush clock starts with the first output (issue 17: a
            # command that answered within FLUSH_SECONDS of its start writes no live flush,
            # however long the connection took to open its channel on a loaded worker)
            self._heard, self.last_flush = True, time.monotonic()
        fits = self.files[stream].write(data)
        if stream == "stderr":
            if not self.simulated:
                seen = self._carry + data
                self.simulated = _MARKER in seen
                self._carry = seen[-(len(_MARKER) - 1):]
            if self.progress_re is not None:
                found = self.progress_re.findall(data.decode(errors="replace"))
                if found:
                    self.progress = min(100.0, float(found[-1]))
        if not fits:
            self.capped = stream
            self.flush()
            raise OutputCapReached(f"{stream} went beyond the stored cap of {self.cap} bytes")
        if time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def on_tick(self) -> bool:
        now = time.monotonic()
        if now - self.last_flush >= FLUSH_SECONDS:
            self.flush()
        if self.cancellable and now - self.last_cancel_check >= CANCEL_CHECK_SECONDS:
            self.last_cancel_check = now
            return cancel_requested(self.run.gate_run_id)
        return False

    def flush(self) -> None:
        """Make what arrived readable (file flushed, sizes on the row) and heartbeat.

        One fenced statement: the sizes are written only while the job is still this worker's
        (a worker whose job was declared lost stores nothing more: ``LeaseLost`` stops the
        command); the job's own heartbeat is written at most every ``HEARTBEAT_EVERY_S``. With
        nothing new since the last flush only the heartbeat is due (it is fenced too)."""
        self.last_flush = time.monotonic()
        for file in self.files.values():
            file.flush()
        now = (self.files["stdout"].size, self.files["stderr"].size, self.progress)
        if now == self._flushed and not self.capped:  # nothing new for readers: the job's
            heartbeat(self.job)  # heartbeat alone (at most one write per HEARTBEAT_EVERY_S)
            return
        self._flushed = now
        ours = NodeJob.objects.filter(id=self.job.id, lease=self.job.lease,
                                      state__in=NodeJob.ACTIVE)
        if not ProbeRun.objects.filter(id=self.run.id).filter(Exists(ours)).update(
                stdout_size=self.files["stdout"].size, stderr_size=self.files["stderr"].size,
                progress=self.progress):
            raise LeaseLost(f"node job {self.job.id} is no longer this worker's (declared lost "
                            f"or settled meanwhile): its output is not stored further")
        heartbeat(self.job)

    def finish(self) -> dict[str, outputs.StoredOutput]:
        """Both streams renamed to their sha256 names (the caller records them on the row)."""
        return {stream: file.finish() for stream, file in self.files.items()}

    def discard(self) -> None:
        for file in self.files.values():
            file.discard()


def cancel_requested(gate_run_id: int) -> bool:
    return GateRun.objects.filter(id=gate_run_id, cancel_requested_at__isnull=False).exists()


HEARTBEAT_EVERY_S = 5.0  # far under RUNS_LOST_AFTER_SECONDS (90 s by default)
_last_beats: dict[int, float] = {}
_last_beats_lock = threading.Lock()


def heartbeat(job: NodeJob) -> None:
    """Mark ``job`` alive: at most one write every ``HEARTBEAT_EVERY_S`` per job and process
    (a step of a few milliseconds need not write one each), and at least four times within
    ``RUNS_LOST_AFTER_SECONDS`` when that is set shorter. A running probe's live flushes call
    it too, so a long command keeps its job alive."""
    every = min(HEARTBEAT_EVERY_S, float(settings.RUNS_LOST_AFTER_SECONDS) / 4)
    now = time.monotonic()
    with _last_beats_lock:
        if now - _last_beats.get(job.id, -every) < every:
            return
        _last_beats[job.id] = now
        if len(_last_beats) > 4096:  # ended jobs: forget the oldest
            for key in sorted(_last_beats, key=_last_beats.__getitem__)[:2048]:
                del _last_beats[key]
    lease_renew(job)  # a job no longer this worker's: LeaseLost


@dataclass(frozen=True)
class OutputSlice:
    """Bytes of one stream from ``offset``; ``next_offset`` to ask for next; ``finished`` when
    the run has ended (no more will come); ``pruned_at`` when retention pruned the stream."""

    data: bytes
    next_offset: int
    finished: bool
    state: str
    pruned_at: datetime | None = None


def output_read(run_id: int, *, stream: str = "stdout", offset: int = 0,
                limit: int = 1 << 20) -> OutputSlice:
    """Read a probe run's ``stream`` from byte ``offset`` (at most ``limit`` bytes), whether the
    run is still going (its live file; chunk rows of older runs) or over (the stored file, or
    the bytes an older row holds), by range: never the whole output. ValueError for a bad
    stream or offset."""
    if stream not in outputs.STREAMS:
        raise ValueError(f"stream must be stdout or stderr, not {stream!r}")
    if offset < 0:
        raise ValueError("offset must be >= 0")
    run = ProbeRun.objects.only("state", f"{stream}_size").get(id=run_id)
    if run.state == ProbeRun.State.RUNNING:
        data = outputs.live_read(run_id, stream, offset, limit, getattr(run, f"{stream}_size"))
        if data is None:
            data = _chunks_read(run_id, stream, offset, limit)
        if data or ProbeRun.objects.filter(id=run_id, state=ProbeRun.State.RUNNING).exists():
            return OutputSlice(data, offset + len(data), False, ProbeRun.State.RUNNING)
    run = ProbeRun.objects.defer("stdout" if stream == "stderr" else "stderr").get(id=run_id)
    pruned_at = run.stdout_pruned_at if stream == "stdout" else None
    size = outputs.output_size(run, stream)  # 0 when pruned (the signed report embeds it)
    data = outputs.output_range(run, stream, offset, limit)
    return OutputSlice(data, offset + len(data), offset + len(data) >= size, run.state,
                       pruned_at)


def _chunks_read(run_id: int, stream: str, offset: int, limit: int) -> bytes:
    pieces, position = [], offset
    for chunk in OutputChunk.objects.filter(probe_run_id=run_id, stream=stream,
                                            end__gt=offset).order_by("offset"):
        if chunk.offset > position:
            break
        data = bytes(chunk.data)[position - chunk.offset:]
        pieces.append(data)
        position += len(data)
        if position - offset >= limit:
            break
    return b"".join(pieces)[:limit]
