"""The service's own files (database, secrets, keys) private from the start: created with mode
0600 (directories 0700) by ``os.open``, never written first and ``chmod``-ed after, so no other
local user can read them even for a moment. Standard library only: settings use it."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_dir(path: Path) -> Path:
    """``path`` and missing parents, made 0700 (an existing directory is left as it is)."""
    Path(path).mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    return Path(path)


def private_write(path: Path, data: bytes, *, mode: int = PRIVATE_FILE,
                  exclusive: bool = True) -> None:
    """Write ``data`` to a file created with ``mode``; ``exclusive``: fail (FileExistsError)
    rather than overwrite. A file that exists (not exclusive) is truncated and set to ``mode``
    before anything is written."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        os.fchmod(fd, mode)  # the umask may have taken bits away (a 0755 script) or not
        with os.fdopen(fd, "wb") as handle:
            fd = -1
            handle.write(data)
    finally:
        if fd >= 0:
            os.close(fd)


def private_secret(path: Path, make) -> str:
    """The secret kept in ``path``, made by ``make()`` (text) and written 0600 on first use;
    two processes starting at once agree on the first one written."""
    try:
        private_write(path, make().encode())
    except FileExistsError:
        pass
    return Path(path).read_text().strip()


def private_sqlite_file(path: Path) -> None:
    """Create the (empty) SQLite database file 0600 before SQLite does (it would make it 0644
    under the usual umask); its journal and WAL files take the same mode from it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass
