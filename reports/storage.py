"""Report files: written whole or not at all, and kept only with their row.

A signed PDF is first written to a temporary name in its engagement's directory (0600 from the
start), flushed and fsynced, read back and compared by sha256, and only then linked to its final
name (``os.link``: atomic, and it never overwrites an earlier file) and the directory fsynced. A
failed write (a full disk: ``ENOSPC``, a file-size limit: ``EFBIG``) removes the temporary file
and leaves nothing. The final name is published inside the transaction that creates the
``Report`` row; :func:`files_kept_on_commit` removes it again when that transaction rolls back,
so no signed file stays without its row. What a killed process left between the two (a
temporary file, or a file published in the microseconds before its commit) is swept by
:func:`report_files_sweep`, which recovery runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

#: Temporary names start with this (a leading dot: never listed as a report).
TEMP_PREFIX = ".partial-"
#: Where a signed file found without a row is moved (kept for a person, never served).
ORPHANS_DIR = ".orphaned"

_published: ContextVar[list[Path] | None] = ContextVar("report_files_published", default=None)


class ReportNotWritten(OSError):
    """The report file could not be written whole (the message says why); nothing was kept."""


def report_directory(engagement_name: str) -> Path:
    directory = Path(settings.REPORTS_DIR) / engagement_name
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return directory


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temporary(directory: Path, name: str, data: bytes) -> Path:
    temporary = directory / f"{TEMP_PREFIX}{os.getpid()}-{time.monotonic_ns()}-{name}"
    try:
        # 0600 from the start (a customer's report is not for other local users); O_EXCL.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if hashlib.sha256(temporary.read_bytes()).digest() != hashlib.sha256(data).digest():
            raise ReportNotWritten(f"{temporary.name}: the bytes read back differ from the "
                                   f"signed report")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def report_file_write(engagement_name: str, name: str, data: bytes) -> Path:
    """Write ``data`` as ``REPORTS_DIR/ENGAGEMENT/name`` whole or not at all (see the module);
    never overwrites a file. Inside :func:`files_kept_on_commit` the file is removed again if
    the block fails. Raises ReportNotWritten (an OSError) naming the cause."""
    directory = report_directory(engagement_name)
    path = directory / name
    try:
        temporary = _write_temporary(directory, name, data)
    except ReportNotWritten:
        raise
    except OSError as error:
        raise ReportNotWritten(error.errno, f"the report file {name} could not be written "
                                            f"({error.strerror or error}); nothing was kept") \
            from error
    try:
        os.link(temporary, path)  # FileExistsError: never overwrite a signed report
        _fsync_directory(directory)
    except OSError as error:
        raise ReportNotWritten(error.errno, f"the report file {name} could not be put in "
                                            f"place ({error.strerror or error}); nothing was "
                                            f"kept") from error
    finally:
        temporary.unlink(missing_ok=True)
    pending = _published.get()
    if pending is not None:
        pending.append(path)
    return path


@contextmanager
def files_kept_on_commit() -> Iterator[None]:
    """Around a transaction that writes report files and their rows: a file written inside it
    is removed again when the block raises (the rows roll back with it). Nested blocks belong
    to the outermost."""
    if _published.get() is not None:
        yield
        return
    token = _published.set([])
    try:
        yield
    except BaseException:
        for path in _published.get() or []:
            path.unlink(missing_ok=True)
            logger.warning("report file %s removed: its transaction did not commit", path)
        raise
    finally:
        _published.reset(token)


def report_files_sweep(*, known_paths: Iterable[str], older_than_s: float = 600) -> list[str]:
    """Remove temporary files a killed writer left and move signed files no row names (a
    process killed between publishing and committing) to ``.orphaned/`` beside them; only
    files older than ``older_than_s`` (a writer may be at work). One line per file."""
    root = Path(settings.REPORTS_DIR)
    if not root.is_dir():
        return []
    known = {(Path(p).parent.name, Path(p).name) for p in known_paths}
    cutoff = time.time() - older_than_s
    lines = []
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and p.name != ORPHANS_DIR):
        for path in sorted(directory.iterdir()):
            if not path.is_file() or path.stat().st_mtime > cutoff:
                continue
            if path.name.startswith(TEMP_PREFIX):
                path.unlink(missing_ok=True)
                lines.append(f"{path}: an unfinished report file removed")
            elif path.suffix == ".pdf" and (directory.name, path.name) not in known:
                target = root / ORPHANS_DIR / directory.name
                target.mkdir(parents=True, exist_ok=True, mode=0o700)
                path.rename(target / path.name)
                lines.append(f"{path}: a report file without its row moved to {target}")
    return lines
