"""Live output of running probes: stored as it arrives, readable from any offset, watched for
cancellation, with the worker's heartbeat.

``OutputRecorder`` is handed to the transport while a command runs. Output is flushed to
``OutputChunk`` rows at least every ``FLUSH_SECONDS`` (or every ``FLUSH_BYTES``), so a reader —
``manage.py tail_run`` or the web page — can follow it and resume from a byte offset after a
reconnect. Each stream is stored up to ``OUTPUT_CAP_BYTES`` (256 MiB); a run whose output goes
beyond it is failed with kind ``output_cap`` (nothing is truncated silently).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from django.db import transaction

from runners.lease import lease_renew
from runners.models import GateRun, NodeJob, OutputChunk, ProbeRun

FLUSH_SECONDS = 0.5
FLUSH_BYTES = 4 << 20  # fast output: a few large chunks (each is one transaction), not dozens
OUTPUT_CAP_BYTES = 256 << 20
CANCEL_CHECK_SECONDS = 1.0


class OutputRecorder:
    """Collects a running probe's output into chunks; heartbeats; reports a cancel request."""

    def __init__(self, run: ProbeRun, job: NodeJob, progress: str | None = None,
                 cancellable: bool = True) -> None:
        self.run, self.job, self.cancellable = run, job, cancellable
        self.progress_re = re.compile(progress) if progress else None
        self.pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.stored = {"stdout": 0, "stderr": 0}
        self.capped = False
        self.last_flush = self.last_cancel_check = time.monotonic()
        self.progress: float | None = None

    def on_output(self, stream: str, data: bytes) -> None:
        room = OUTPUT_CAP_BYTES - self.stored[stream] - len(self.pending[stream])
        if len(data) > room:
            self.capped = True
            data = data[:max(room, 0)]
        self.pending[stream] += data
        if stream == "stderr" and self.progress_re is not None:
            found = self.progress_re.findall(data.decode(errors="replace"))
            if found:
                self.progress = min(100.0, float(found[-1]))
        if (len(self.pending[stream]) >= FLUSH_BYTES
                or time.monotonic() - self.last_flush >= FLUSH_SECONDS):
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
        self.last_flush = time.monotonic()
        chunks = []
        for stream, buffer in self.pending.items():
            if buffer:
                start = self.stored[stream]
                chunks.append(OutputChunk(probe_run=self.run, stream=stream, offset=start,
                                          end=start + len(buffer), data=bytes(buffer)))
                self.stored[stream] += len(buffer)
                buffer.clear()
        with transaction.atomic():
            # The job's lease first: a worker whose job was declared lost stores nothing more
            # (runners.lease.LeaseLost rolls this back and stops the command).
            lease_renew(self.job)
            if chunks:
                OutputChunk.objects.bulk_create(chunks)
            ProbeRun.objects.filter(id=self.run.id).update(
                stdout_size=self.stored["stdout"], stderr_size=self.stored["stderr"],
                progress=self.progress,
            )


def cancel_requested(gate_run_id: int) -> bool:
    return GateRun.objects.filter(id=gate_run_id, cancel_requested_at__isnull=False).exists()


def heartbeat(job: NodeJob) -> None:
    """The worker's sign of life on a job still its own (LeaseLost when it is not)."""
    lease_renew(job)


@dataclass(frozen=True)
class OutputSlice:
    """Bytes of one stream from ``offset``; ``next_offset`` to ask for next; ``finished`` when
    the run has ended (no more will come)."""

    data: bytes
    next_offset: int
    finished: bool
    state: str


def output_read(run_id: int, *, stream: str = "stdout", offset: int = 0,
                limit: int = 1 << 20) -> OutputSlice:
    """Read a probe run's ``stream`` from byte ``offset`` (at most ``limit`` bytes), whether the
    run is still going (chunks) or over (the stored raw output). ValueError for a bad stream or
    offset."""
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"stream must be stdout or stderr, not {stream!r}")
    if offset < 0:
        raise ValueError("offset must be >= 0")
    run = ProbeRun.objects.only("state").get(id=run_id)
    if run.state in (ProbeRun.State.RUNNING,):
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
        if pieces or ProbeRun.objects.filter(id=run_id, state=ProbeRun.State.RUNNING).exists():
            data = b"".join(pieces)[:limit]
            return OutputSlice(data, offset + len(data), False, ProbeRun.State.RUNNING)
    run = ProbeRun.objects.get(id=run_id)
    full = bytes(getattr(run, stream))
    data = full[offset:offset + limit]
    return OutputSlice(data, offset + len(data), offset + len(data) >= len(full), run.state)
