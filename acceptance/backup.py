"""Backup and restore of one installation: database, signed reports, signing identity, keys.

``backup_write`` writes one tar archive (created 0600, never over an existing file):

- ``database/postgresql.dump`` (``pg_dump --format=custom``) or ``database/acceptance.sqlite3``
  (SQLite's online backup API, consistent while the service runs);
- ``reports/…``: everything under ``REPORTS_DIR``;
- ``outputs/…``: the stored raw outputs under ``OUTPUTS_DIR`` (files named by their sha256;
  the live files of runs still going are left out);
- ``signing/dev/…``: the development signer and CA under ``SIGNING_DIR``;
  ``signing/configured/NAME``: the PKCS#12 of ``REPORT_SIGNING_PKCS12`` and ``trust/NAME`` the
  ``REPORT_TRUST_ROOTS`` files, where configured (their passphrase stays in the environment);
- ``keys/credentials.key``: the key the stored SSH credentials are encrypted with
  (``VAR_DIR/credentials.key`` or ``ACCEPTANCE_CREDENTIALS_KEY``);
- ``manifest.json`` last: every member's sha256 and size, the database engine, where reports
  lived and how many report rows the database holds.

The Django secret key is not kept: it signs sessions only, which a restore may forget.

``backup_restore`` checks the whole archive first (readable to the end, every member the
manifest lists present with its sha256, nothing else in it, no unsafe names), refuses a target
that is not fresh (a database with engagements, reports or users; a file that exists with other
contents; another ``ACCEPTANCE_CREDENTIALS_KEY``), and only then restores: the database in one
step (``pg_restore --single-transaction`` / SQLite backup API), then the files (new files only,
0600), report paths moved to this ``REPORTS_DIR`` when it differs. Finally every report is read
again and verified (stored sha256, signature, embedded evidence) and counted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from acceptance.models import Engagement
from reports.models import Report
from reports.services import report_verify

FORMAT = "acceptance-backup/1"
MANIFEST = "manifest.json"
SQLITE_MEMBER = "database/acceptance.sqlite3"
PG_MEMBER = "database/postgresql.dump"
CREDENTIALS_MEMBER = "keys/credentials.key"
PG_TIMEOUT_S = 3600


class BackupError(Exception):
    """The backup or restore cannot be done; the message (one line) says why. A restore that
    raises it has changed nothing."""


@dataclass
class BackupSummary:
    path: Path
    engine: str
    reports: int
    members: int
    sha256: str


@dataclass
class RestoreSummary:
    engine: str
    reports: int
    verified: int
    files: int
    moved_reports_from: str = ""
    not_verified: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- the database ------------------------------------------------------------------------


def _engine() -> str:
    vendor = connection.vendor
    if vendor not in ("sqlite", "postgresql"):
        raise BackupError(f"database engine {vendor!r} is not supported (sqlite, postgresql)")
    return vendor


def _pg_command(program: str) -> tuple[list[str], dict[str, str]]:
    """``program`` with the connection's host, port, user and database; the password goes in
    the child's environment (PGPASSWORD), never on a command line or in a log."""
    db = connection.settings_dict
    args = [program, "--no-password"]
    for flag, key in (("--host", "HOST"), ("--port", "PORT"), ("--username", "USER")):
        if db.get(key):
            args += [flag, str(db[key])]
    args += ["--dbname", str(db["NAME"])]
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return args, env


def _run(args: list[str], env: dict[str, str], what: str) -> None:
    try:
        done = subprocess.run(args, env=env, capture_output=True, text=True,
                              timeout=PG_TIMEOUT_S)
    except FileNotFoundError:
        raise BackupError(f"{args[0]} is not installed (needed to {what})") from None
    except subprocess.TimeoutExpired:
        raise BackupError(f"{args[0]} did not finish in {PG_TIMEOUT_S} s ({what})") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[:300] or f"exit status {done.returncode}"
        raise BackupError(f"{args[0]} failed to {what}: {said}")


def _database_dump(target: Path, engine: str) -> None:
    if engine == "postgresql":
        args, env = _pg_command("pg_dump")
        _run(args + ["--format=custom", "--no-owner", "--no-privileges", "--file", str(target)],
             env, "dump the database")
        return
    connection.ensure_connection()
    destination = sqlite3.connect(target)
    try:
        connection.connection.backup(destination)
    except sqlite3.Error as e:  # a full disk, or a var dir that is not writable
        raise BackupError(f"cannot copy the database into {target.parent.parent}: {e}") from None
    finally:
        destination.close()


def _database_empty() -> str:
    """'' when the database holds no engagements, reports or users; else what it holds."""
    try:
        counts = {"engagements": Engagement.objects.count(), "reports": Report.objects.count(),
                  "users": User.objects.count()}
    except DatabaseError:
        return ""  # not even migrated: as fresh as it gets
    held = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    return held


def _database_load(source: Path, engine: str) -> None:
    if engine == "postgresql":
        args, env = _pg_command("pg_restore")
        _run(args + ["--single-transaction", "--exit-on-error", "--clean", "--if-exists",
                     "--no-owner", "--no-privileges", str(source)], env, "restore the database")
        connection.close()  # the schema was replaced under this connection
        return
    connection.ensure_connection()
    origin = sqlite3.connect(source)
    try:
        origin.backup(connection.connection)
    finally:
        origin.close()


# --- what goes into the archive ----------------------------------------------------------


def _tree(directory: Path, prefix: str) -> list[tuple[str, Path]]:
    if not directory.is_dir():
        return []
    return [(f"{prefix}/{p.relative_to(directory).as_posix()}", p)
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.name.endswith(".lock")]


def _file_members() -> list[tuple[str, Path]]:
    members = _tree(Path(settings.REPORTS_DIR), "reports")
    # Stored raw outputs (content-addressed, runners.outputs); a running probe's live file is
    # not evidence yet and stays out.
    members += [(name, path) for name, path in _tree(Path(settings.OUTPUTS_DIR), "outputs")
                if not name.startswith("outputs/live/")]
    members += _tree(Path(settings.SIGNING_DIR), "signing/dev")
    if settings.REPORT_SIGNING_PKCS12:
        p12 = Path(settings.REPORT_SIGNING_PKCS12)
        members.append((f"signing/configured/{p12.name}", p12))
    members += [(f"trust/{Path(p).name}", Path(p)) for p in settings.REPORT_TRUST_ROOTS]
    return members


def _credentials_key() -> bytes | None:
    if settings.CREDENTIALS_KEY:
        return settings.CREDENTIALS_KEY.strip().encode()
    path = Path(settings.VAR_DIR) / "credentials.key"
    return path.read_bytes().strip() if path.exists() else None


def _sha256_of(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def _add(archive: tarfile.TarFile, name: str, data_or_path: bytes | Path, manifest: dict) -> None:
    """One member, streamed from its file (constant memory for a large dump or report)."""
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = 0o600, int(timezone.now().timestamp())
    if isinstance(data_or_path, Path):
        try:
            digest, info.size = _sha256_of(data_or_path)
            handle = open(data_or_path, "rb")  # noqa: SIM115 (closed below)
        except OSError as e:
            raise BackupError(f"cannot read {data_or_path}: {e.strerror}") from None
        with handle:
            archive.addfile(info, handle)  # a write error: backup_write names the archive
    else:
        digest, info.size = hashlib.sha256(data_or_path).hexdigest(), len(data_or_path)
        archive.addfile(info, io.BytesIO(data_or_path))
    manifest[name] = {"sha256": digest, "size": info.size}


def backup_write(*, out: Path) -> BackupSummary:
    """Write the archive to ``out`` (a new file, mode 0600). Raises BackupError; a failed
    backup leaves no file behind."""
    out = Path(out)
    engine = _engine()
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BackupError(f"{out} exists: a backup never overwrites a file") from None
    except OSError as e:
        raise BackupError(f"cannot create {out}: {e.strerror}") from None
    try:
        with tempfile.TemporaryDirectory(dir=settings.VAR_DIR) as scratch:
            dump = Path(scratch) / "database"
            _database_dump(dump, engine)
            members: dict[str, dict] = {}
            with os.fdopen(fd, "wb") as handle, tarfile.open(fileobj=handle, mode="w") as tar:
                _add(tar, PG_MEMBER if engine == "postgresql" else SQLITE_MEMBER, dump, members)
                for name, path in _file_members():
                    _add(tar, name, path, members)
                key = _credentials_key()
                if key is not None:
                    _add(tar, CREDENTIALS_MEMBER, key, members)
                manifest = {
                    "format": FORMAT, "created_at": timezone.now().isoformat(),
                    "database": {"engine": engine,
                                 "member": PG_MEMBER if engine == "postgresql" else SQLITE_MEMBER},
                    "reports_dir": str(Path(settings.REPORTS_DIR).resolve()),
                    "reports": Report.objects.count(), "members": members,
                }
                _add(tar, MANIFEST, json.dumps(manifest, indent=1).encode(), {})
    except OSError as e:  # writing the archive: a full disk, a quota, a file size limit
        out.unlink(missing_ok=True)
        raise BackupError(f"cannot write {out}: {e.strerror or e}; nothing was kept") from None
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    return BackupSummary(out, engine, manifest["reports"], len(members), _sha256_of(out)[0])


# --- reading an archive back -------------------------------------------------------------


def _safe_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts


def _unpack(archive: Path, staging: Path) -> dict:
    """Every member into ``staging``, checked against the manifest; returns the manifest."""
    seen: dict[str, str] = {}
    manifest_bytes = None
    try:
        with tarfile.open(archive, mode="r:") as tar:
            for member in tar:
                if not member.isfile() or not _safe_name(member.name):
                    raise BackupError(f"damaged archive: unexpected member {member.name!r}")
                if member.name in seen or (member.name == MANIFEST
                                           and manifest_bytes is not None):
                    raise BackupError(f"damaged archive: {member.name} appears twice")
                source = tar.extractfile(member)
                if member.name == MANIFEST:
                    manifest_bytes = source.read()
                    continue
                target = staging / member.name
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                digest = hashlib.sha256()
                with open(target, "wb") as out:
                    while block := source.read(1 << 20):
                        digest.update(block)
                        out.write(block)
                seen[member.name] = digest.hexdigest()
    except FileNotFoundError:
        raise BackupError(f"{archive}: no such file") from None
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BackupError(f"damaged archive: cannot read it to the end ({e})") from None
    if manifest_bytes is None:
        raise BackupError(f"damaged or partial archive: no {MANIFEST}")
    try:
        manifest = json.loads(manifest_bytes)
        listed = manifest["members"]
        if manifest.get("format") != FORMAT:
            raise BackupError(f"not a backup of this service (format {manifest.get('format')!r})")
        if manifest["database"]["member"] not in listed or not manifest["database"]["engine"]:
            raise KeyError("database")
    except (ValueError, KeyError, TypeError) as e:
        raise BackupError(f"damaged archive: {MANIFEST} unreadable ({e})") from None
    missing = sorted(set(listed) - set(seen))
    if missing:
        raise BackupError(f"partial archive: {len(missing)} member(s) missing, e.g. {missing[0]}")
    extra = sorted(set(seen) - set(listed))
    if extra:
        raise BackupError(f"damaged archive: {extra[0]} is not in the manifest")
    for name, digest in seen.items():
        if listed[name].get("sha256") != digest:
            raise BackupError(f"damaged archive: {name} does not hash to the manifest's sha256")
    return manifest


def _destinations(manifest: dict) -> list[tuple[str, Path]]:
    """Where each file member goes in this installation."""
    places = {"reports": Path(settings.REPORTS_DIR), "signing/dev": Path(settings.SIGNING_DIR),
              "outputs": Path(settings.OUTPUTS_DIR),
              "signing/configured": Path(settings.VAR_DIR) / "restored" / "signing",
              "trust": Path(settings.VAR_DIR) / "restored" / "trust"}
    found = []
    for name in manifest["members"]:
        if name.startswith("database/") or name == CREDENTIALS_MEMBER:
            continue
        prefix = next((p for p in places if name.startswith(p + "/")), None)
        if prefix is None:
            raise BackupError(f"damaged archive: no place for member {name}")
        found.append((name, places[prefix] / name[len(prefix) + 1:]))
    return found


def _same(path: Path, staged: Path) -> bool:
    return _sha256_of(path) == _sha256_of(staged)


def _conflicts(manifest: dict, staging: Path, files: list[tuple[str, Path]]) -> str:
    """'' when restoring changes nothing that exists; else the first reason it would."""
    engine = _engine()
    if manifest["database"]["engine"] != engine:
        return (f"the backup holds a {manifest['database']['engine']} database; this service "
                f"runs on {engine}")
    held = _database_empty()
    if held:
        return f"the database is not empty ({held}): restore into a fresh database"
    for name, target in files:
        if target.exists() and not _same(target, staging / name):
            return f"{target} exists with other contents"
    if CREDENTIALS_MEMBER in manifest["members"]:
        archived = (staging / CREDENTIALS_MEMBER).read_bytes().strip()
        if settings.CREDENTIALS_KEY and settings.CREDENTIALS_KEY.strip().encode() != archived:
            return ("the stored credentials were encrypted with another key than "
                    "ACCEPTANCE_CREDENTIALS_KEY")
        path = Path(settings.VAR_DIR) / "credentials.key"
        if not settings.CREDENTIALS_KEY and path.exists() and path.read_bytes().strip() != archived:
            return f"{path} exists with another key"
    return ""


def _write_file(target: Path, source: Path) -> None:
    """A new file (0600, never over an existing one) with ``source``'s bytes, streamed."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle, open(source, "rb") as origin:
        shutil.copyfileobj(origin, handle, 1 << 20)


def _reports_moved(old_dir: str) -> str:
    """Point report rows stored under ``old_dir`` at this REPORTS_DIR; '' when it is the same."""
    new_dir = str(Path(settings.REPORTS_DIR).resolve())
    if not old_dir or old_dir == new_dir:
        return ""
    with transaction.atomic():
        for report in Report.objects.filter(path__startswith=old_dir + "/"):
            report.path = new_dir + report.path[len(old_dir):]
            report.save(update_fields=["path"])
    return old_dir


def reports_verify() -> tuple[int, int, list[str]]:
    """(reports, verified, one line per report that does not verify): each file read again,
    its sha256 compared with the row, its signatures and embedded evidence checked."""
    total, verified, problems = 0, 0, []
    for report in Report.objects.select_related("engagement").order_by("id"):
        total += 1
        try:
            data = Path(report.path).read_bytes()
        except OSError as e:
            problems.append(f"report {report.id} ({report}): {report.path}: {e.strerror}")
            continue
        if hashlib.sha256(data).hexdigest() != report.sha256:
            problems.append(f"report {report.id} ({report}): file does not hash to its sha256")
            continue
        result = report_verify(data=data)
        if not result.valid:
            problems.append(f"report {report.id} ({report}): {result.summary}")
            continue
        verified += 1
    return total, verified, problems


def backup_restore(*, archive: Path) -> RestoreSummary:
    """Restore ``archive`` into this (fresh) installation and verify every report. Raises
    BackupError, having changed nothing, for a damaged or partial archive or a target that is
    not fresh."""
    staging = Path(tempfile.mkdtemp(dir=settings.VAR_DIR, prefix="restore-"))
    try:
        manifest = _unpack(Path(archive), staging)
        files = _destinations(manifest)
        problem = _conflicts(manifest, staging, files)
        if problem:
            raise BackupError(f"refused: {problem}; nothing was changed")
        engine = manifest["database"]["engine"]
        _database_load(staging / manifest["database"]["member"], engine)
        written = 0
        for name, target in files:
            if not target.exists():
                _write_file(target, staging / name)
                written += 1
        notes = []
        if CREDENTIALS_MEMBER in manifest["members"] and not settings.CREDENTIALS_KEY:
            path = Path(settings.VAR_DIR) / "credentials.key"
            if not path.exists():
                _write_file(path, staging / CREDENTIALS_MEMBER)
                written += 1
        if any(name.startswith("signing/configured/") for name, _ in files):
            notes.append(f"the configured signing identity is in "
                         f"{Path(settings.VAR_DIR) / 'restored' / 'signing'}: point "
                         f"REPORT_SIGNING_PKCS12 at it (its passphrase was not in the backup)")
        moved = _reports_moved(str(manifest.get("reports_dir") or ""))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    total, verified, problems = reports_verify()
    return RestoreSummary(engine, total, verified, written, moved, problems, notes)
