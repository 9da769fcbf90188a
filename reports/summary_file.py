"""``summary.json`` written piece by piece: the same bytes as ``json.dumps(summary,
ensure_ascii=True, separators=(",", ":"))``, put in an unnamed temporary file (0600, gone when
closed) as they are made, never the whole text twice in memory.

A G4 summary at 128 nodes × 72 h is 116 MB of JSON: ``json.dumps`` holds its pieces and the
joined text at once, then ``.encode`` the text and the bytes (232 MB each time, on top of the
report's context). Here a long list (over ``LONG`` items: the runs, their recorded figures)
is written one item at a time and everything else whole; the file is read back once, whole,
by the PDF writer.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from typing import IO, Any

#: A list longer than this is written item by item; shorter ones and their items are walked.
LONG = 256


def _whole(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def json_write(value: Any, write: Callable[[bytes], Any]) -> None:
    """Write ``value`` as compact ASCII JSON through ``write``, in pieces (see the module)."""
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        write(b"{")
        for number, (key, item) in enumerate(value.items()):
            write((b"," if number else b"") + _whole(key) + b":")
            json_write(item, write)
        write(b"}")
    elif isinstance(value, list) and value:
        write(b"[")
        long = len(value) > LONG
        for number, item in enumerate(value):
            if number:
                write(b",")
            if long:
                write(_whole(item))
            else:
                json_write(item, write)
        write(b"]")
    else:
        write(_whole(value))


class SummaryFile:
    """The temporary file as the PDF writer reads it: ``read`` only (a file's ``name``, here
    its descriptor number, would be taken for its URL)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle

    def read(self, size: int = -1) -> bytes:
        return self._handle.read(size)

    def close(self) -> None:
        self._handle.close()


def summary_file(summary: dict) -> SummaryFile:
    """``summary`` as compact ASCII JSON in an unnamed temporary file, at its start."""
    handle = tempfile.TemporaryFile()  # noqa: SIM115 - the PDF writer reads it; closed by GC
    pending: list[bytes] = []
    size = 0

    def write(piece: bytes) -> None:
        nonlocal size
        pending.append(piece)
        size += len(piece)
        if size >= 1 << 20:
            flush()

    def flush() -> None:
        nonlocal size
        handle.write(b"".join(pending))
        pending.clear()
        size = 0

    json_write(summary, write)
    flush()
    handle.seek(0)
    return SummaryFile(handle)
