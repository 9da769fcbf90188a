"""Raw output files: every probe run's stdout and stderr, content-addressed, streamed to disk.

A running probe's output is written to a private temporary file as it arrives
(:class:`StreamFile`), hashed on the way, and renamed at the end to its sha256's name under
``ACCEPTANCE_OUTPUTS_DIR`` (``ab/abcdef…``, files 0600, directories 0700). The database keeps
the index on the ``ProbeRun`` (``stdout_file``/``stderr_file``, sha256, size, the cap in effect);
the bytes never pass through the database or a Python buffer of their size.

Each stream is stored up to ``ACCEPTANCE_OUTPUT_CAP_BYTES`` (default 256 MiB, exact): the first
N bytes are kept and hashed, and the run is failed with kind ``output_cap``. Rows written before
these files existed still hold their bytes in ``ProbeRun.stdout``/``stderr``; readers here serve
both (:func:`output_open`).
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings

from acceptance.files import PRIVATE_FILE, private_dir

STREAMS = ("stdout", "stderr")
LIVE_DIRNAME = "live"
READ_BLOCK = 1 << 20
TAIL_KEEP = 64 << 10  # the end of stderr, kept in memory for the error line


def outputs_dir() -> Path:
    return private_dir(Path(settings.OUTPUTS_DIR))


def output_cap_bytes() -> int:
    """The stated cap per stream (bytes), checked by the settings to be a positive number."""
    return int(settings.OUTPUT_CAP_BYTES)


def file_name(sha256: str) -> str:
    """The stored name of content with ``sha256``, relative to the outputs directory."""
    return f"{sha256[:2]}/{sha256}"


def file_path(name: str) -> Path:
    if not name or "/" not in name or ".." in name or name.startswith("/"):
        raise ValueError(f"not a stored output name: {name!r}")
    return Path(settings.OUTPUTS_DIR) / name


def live_path(run_id: int, stream: str) -> Path:
    """Where a running probe's stream grows (readers follow it here)."""
    return Path(settings.OUTPUTS_DIR) / LIVE_DIRNAME / f"{run_id}.{stream}"


class OutputsUnwritable(Exception):
    """A raw output could not be written to the outputs directory (full, read-only, gone):
    nothing more can be recorded there, so the probe and its job fail with kind ``storage``."""

    def __init__(self, error: OSError) -> None:
        super().__init__(f"the raw output could not be written under {settings.OUTPUTS_DIR} "
                         f"({error.strerror or error}): nothing of it is kept")


@dataclass(frozen=True)
class StoredOutput:
    name: str  # relative to the outputs directory
    sha256: str
    size: int
    capped: bool  # more arrived than the cap; the first ``size`` bytes are what is kept


class StreamFile:
    """One stream of a running probe, written to ``path`` as it arrives and hashed; ``write``
    keeps at most ``cap`` bytes and says whether everything offered fit."""

    def __init__(self, path: Path, cap: int, *, tail: int = 0) -> None:
        self.path, self.cap = path, cap
        self.size, self.capped = 0, False
        self.hasher = hashlib.sha256()
        self.tail_keep, self.tail = tail, bytearray()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        try:
            try:  # the directory is there but for the first file (issue 17: a mkdir per stream)
                fd = os.open(path, flags, PRIVATE_FILE)
            except FileNotFoundError:
                private_dir(path.parent)
                fd = os.open(path, flags, PRIVATE_FILE)
            os.fchmod(fd, PRIVATE_FILE)
        except OSError as error:
            raise OutputsUnwritable(error) from error
        self.handle: IO[bytes] | None = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> bool:
        room = self.cap - self.size
        fits = len(data) <= room
        if not fits:
            self.capped = True
            data = data[:max(room, 0)]
        if data:
            assert self.handle is not None
            try:
                self.handle.write(data)
            except OSError as error:
                raise OutputsUnwritable(error) from error
            self.hasher.update(data)
            self.size += len(data)
            if self.tail_keep:
                self.tail += data
                del self.tail[:-self.tail_keep]
        return fits

    def flush(self) -> None:
        if self.handle is not None:
            try:
                self.handle.flush()
            except OSError as error:
                raise OutputsUnwritable(error) from error

    def finish(self) -> StoredOutput:
        """Close and rename to the content's sha256 name (content already there: kept once).
        OutputsUnwritable when the bytes cannot be made durable there (the caller discards)."""
        try:
            if self.handle is not None:
                self.handle.flush()
                if self.size:  # an empty stream has no bytes to make durable (issue 17: CPU)
                    os.fsync(self.handle.fileno())
                self.handle.close()
                self.handle = None
            digest = self.hasher.hexdigest()
            name = file_name(digest)
            target = os.path.join(settings.OUTPUTS_DIR, name)  # a str: no pathlib per probe
            try:
                os.replace(self.path, target)
            except FileNotFoundError:  # the first file of its two-hex-digit directory
                private_dir(Path(target).parent)
                os.replace(self.path, target)
        except OSError as error:
            raise OutputsUnwritable(error) from error
        return StoredOutput(name, digest, self.size, self.capped)

    def discard(self) -> None:
        """Close and remove the live file (nothing of it kept); never raises for the disk."""
        if self.handle is not None:
            try:
                self.handle.close()
            except OSError:
                pass  # the buffered bytes that could not be written are dropped with the file
            self.handle = None
        self.path.unlink(missing_ok=True)


def output_store(data: bytes, *, cap: int | None = None) -> StoredOutput:
    """Store ``data`` (at most ``cap`` bytes of it) as a content-addressed file."""
    cap = output_cap_bytes() if cap is None else cap
    handle, temp = tempfile.mkstemp(dir=private_dir(outputs_dir() / LIVE_DIRNAME),
                                    prefix="store-")
    os.close(handle)
    stream = StreamFile(Path(temp), cap)
    try:
        for start in range(0, len(data), READ_BLOCK):
            if not stream.write(data[start:start + READ_BLOCK]):
                break
        return stream.finish()
    except BaseException:
        stream.discard()
        raise


def output_open(run, stream: str) -> IO[bytes] | None:
    """The stored ``stream`` of a finished probe run, opened for reading: its file, else the
    bytes an older row holds; None when retention pruned it (or it is missing)."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be stdout or stderr, not {stream!r}")
    if stream == "stdout" and run.stdout_pruned_at is not None:
        return None
    name = getattr(run, f"{stream}_file")
    if name:
        try:
            return open(file_path(name), "rb")  # noqa: SIM115 - the caller closes it
        except FileNotFoundError:
            return None
    held = bytes(getattr(run, stream))
    if not held:  # a run its worker never finished (lost): what reached its live file stays
        try:
            return open(live_path(run.id, stream), "rb")  # noqa: SIM115 - the caller closes it
        except FileNotFoundError:
            pass
    return io.BytesIO(held)


def output_size(run, stream: str) -> int:
    """Bytes :func:`output_open` serves for ``stream`` (without reading them)."""
    if stream == "stdout" and run.stdout_pruned_at is not None:
        return 0
    if getattr(run, f"{stream}_file"):
        return int(getattr(run, f"{stream}_size"))
    held = len(getattr(run, stream))
    if not held:
        try:
            return live_path(run.id, stream).stat().st_size
        except FileNotFoundError:
            return 0
    return held


def output_range(run, stream: str, offset: int, limit: int) -> bytes:
    """At most ``limit`` bytes of the stored ``stream`` from ``offset`` (b"" when none)."""
    handle = output_open(run, stream)
    if handle is None:
        return b""
    with handle:
        if not _seek(handle, offset):
            return b""
        return handle.read(limit)


def _seek(handle: IO[bytes], offset: int) -> bool:
    """Seek to ``offset``; False when no file here can reach it (beyond the filesystem's
    largest file: EINVAL), so a reader asking that far gets nothing rather than an error."""
    try:
        handle.seek(offset)
    except (OSError, OverflowError, ValueError):
        return False
    return True


def output_bytes(run, stream: str = "stdout") -> bytes:
    """The whole stored stream (for parsers: they read documents, and the caller bounds the
    size first, ``PARSE_MAX_BYTES``)."""
    handle = output_open(run, stream)
    if handle is None:
        return b""
    with handle:
        return handle.read()


def output_sha256_of_file(name: str) -> str:
    """sha256 of a stored file, read in blocks (backup and retention re-check it)."""
    digest = hashlib.sha256()
    with open(file_path(name), "rb") as handle:
        while block := handle.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def live_read(run_id: int, stream: str, offset: int, limit: int, upto: int) -> bytes | None:
    """Bytes ``[offset, min(offset+limit, upto))`` of a running stream's live file; None when
    there is no live file (the run finished meanwhile, or it was recorded another way)."""
    try:
        with open(live_path(run_id, stream), "rb") as handle:
            if offset >= upto or not _seek(handle, offset):
                return b""
            return handle.read(max(0, min(limit, upto - offset)))
    except FileNotFoundError:
        return None

