"""Backup and restore: a real lab G1 (signed report with embedded evidence) backed up, restored
into a fresh installation (new var dir, new database) and every report verified there — on the
embedded SQLite and on PostgreSQL where one answers; damaged or partial archives refused with
one line, changing nothing."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from acceptance.backup import MANIFEST, backup_write
from reports.models import Report

ROOT = Path(__file__).resolve().parents[2]
ADMIN_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def manage(env, *args, timeout=300):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def installation(directory: Path, database_url: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE",
                        "ACCEPTANCE_CREDENTIALS_KEY", "REPORT_SIGNING_PKCS12")}
    env["ACCEPTANCE_VAR_DIR"] = str(directory)
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def _pg_admin() -> str | None:
    url = os.environ.get("TEST_POSTGRES_URL", "").replace("postgres://", "postgresql://", 1)
    import psycopg

    try:
        psycopg.connect(url or ADMIN_PG, connect_timeout=2).close()
    except psycopg.Error:
        return None
    return url or ADMIN_PG


@pytest.fixture(params=["sqlite", "postgresql"])
def databases(request):
    """Two database URLs: the installation backed up and the fresh one restored into (None:
    each installation's embedded SQLite file)."""
    if request.param == "sqlite":
        yield None, None
        return
    admin = _pg_admin()
    if admin is None:
        pytest.skip("no PostgreSQL answers on 127.0.0.1:5432")
    import psycopg

    names = [f"acceptance_ops_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with psycopg.connect(admin, autocommit=True) as connection:
        for name in names:
            connection.execute(f'CREATE DATABASE "{name}"')
    base = admin.rpartition("/")[0].replace("postgresql://", "postgres://", 1)
    yield tuple(f"{base}/{name}" for name in names)
    with psycopg.connect(admin, autocommit=True) as connection:
        for name in names:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
def test_it_restores_a_backup_into_a_fresh_installation_and_every_report_verifies(
        tmp_path, databases):
    source_db, fresh_db = databases
    source = installation(tmp_path / "source", source_db)
    assert manage(source, "migrate", "-v", "0").returncode == 0
    up = manage(source, "lab", "up", "--scenario", "missing-drive")
    assert up.returncode == 0, up.stderr
    try:
        g1 = manage(source, "run_gate", "lab-missing-drive", "G1")
    finally:
        manage(source, "lab", "down")
    assert g1.returncode == 1, g1.stdout + g1.stderr  # stopped on 23 of 24 drives: a report
    archive = tmp_path / "backup.tar"
    backup = manage(source, "backup", str(archive))
    assert backup.returncode == 0, backup.stderr
    assert f"backup: {archive} (" in backup.stdout and " 1 reports, " in backup.stdout
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert names[-1] == MANIFEST
    assert any(n.startswith("reports/lab-missing-drive/") and n.endswith(".pdf") for n in names)
    assert "keys/credentials.key" in names
    outputs = [n for n in names if n.startswith("outputs/")]  # raw outputs, by their sha256
    assert outputs and all(n.split("/")[-1][:2] == n.split("/")[1] for n in outputs)
    assert not any(n.startswith("outputs/live/") for n in outputs)
    assert any(n.startswith("signing/dev/") and n.endswith(".p12") for n in names)

    fresh = installation(tmp_path / "fresh", fresh_db)
    assert manage(fresh, "migrate", "-v", "0").returncode == 0
    restore = manage(fresh, "restore", str(archive))
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert restore.stdout.strip().splitlines()[-1] == "restored: 1 reports, 1 verified"
    assert f"report paths moved from {(tmp_path / 'source').resolve()}/reports" in restore.stdout
    # The restored installation is the same service: the report verifies through its own
    # command, the lab credential decrypts with the restored key, the run is there.
    check = manage(fresh, "shell", "-c",
                   "from acceptance.models import Credential\n"
                   "from reports.models import Report\n"
                   "from runners.models import ProbeRun\n"
                   "r = Report.objects.get()\n"
                   "print(r.path)\n"
                   "print(0 < r.signing_seconds < 60)\n"
                   "print(len(Credential.objects.first().private_key()) > 100)\n"
                   "print(ProbeRun.objects.filter(node__isnull=False).count())\n"
                   "import hashlib\n"
                   "print(all(hashlib.sha256(p.raw()).hexdigest() == p.stdout_sha256\n"
                   "          and p.stdout_file for p in ProbeRun.objects.filter(\n"
                   "          node__isnull=False)))")
    assert check.returncode == 0, check.stderr
    path, timed, decrypts, probe_runs, raw_restored = check.stdout.split()[-5:]
    assert raw_restored == "True"  # every raw output file restored, hashing to its row
    assert timed == "True"  # the signing time the metrics read was recorded and restored
    assert path.startswith(str(tmp_path / "fresh"))
    assert decrypts == "True"
    assert int(probe_runs) == 47  # inventory + 23 self-tests + 23 SMART logs, all restored
    verify = manage(fresh, "verify_report", path)
    assert verify.returncode == 0, verify.stdout + verify.stderr

    again = manage(fresh, "restore", str(archive))
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        "CommandError: refused: the database is not empty (1 engagements, 1 reports): restore "
        "into a fresh database; nothing was changed"]


# --- damaged and partial archives, in-process --------------------------------------------


@pytest.fixture
def archive(db, settings, tmp_path):
    """A backup of this test database holding one report file."""
    directory = Path(settings.REPORTS_DIR) / "acme-1"
    directory.mkdir(parents=True)
    (directory / "acme-1-G1-v1.pdf").write_bytes(b"%PDF-1.7 stand-in " * 200)
    out = tmp_path / "backup.tar"
    backup_write(out=out)
    return out


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar]


def _rewrite(path: Path, members, out: Path) -> Path:
    with tarfile.open(out, "w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def damaged_truncated(path: Path, out: Path) -> Path:
    data = path.read_bytes()
    out.write_bytes(data[: len(data) // 2])
    return out


def damaged_member(path: Path, out: Path) -> Path:
    members = _members(path)
    info, data = next((i, d) for i, d in members if i.name.endswith(".pdf"))
    changed = [(i, (d[:-1] + b"X") if i is info else d) for i, d in members]
    return _rewrite(path, changed, out)


def missing_member(path: Path, out: Path) -> Path:
    return _rewrite(path, [(i, d) for i, d in _members(path) if not i.name.endswith(".pdf")], out)


def missing_manifest(path: Path, out: Path) -> Path:
    return _rewrite(path, [(i, d) for i, d in _members(path) if i.name != MANIFEST], out)


def extra_member(path: Path, out: Path) -> Path:
    members = _members(path)
    return _rewrite(path, [*members[:-1], (tarfile.TarInfo("reports/smuggled.pdf"), b"x"),
                           members[-1]], out)


def unsafe_name(path: Path, out: Path) -> Path:
    members = _members(path)
    return _rewrite(path, [(tarfile.TarInfo("../escape"), b"x"), *members], out)


@pytest.mark.parametrize("damage, says", [
    (damaged_truncated, "damaged archive: cannot read it to the end"),
    (damaged_member, "damaged archive: reports/acme-1/acme-1-G1-v1.pdf does not hash to the "
                     "manifest's sha256"),
    (missing_member, "partial archive: 1 member(s) missing, e.g. reports/acme-1/acme-1-G1-v1.pdf"),
    (missing_manifest, "damaged or partial archive: no manifest.json"),
    (extra_member, "damaged archive: reports/smuggled.pdf is not in the manifest"),
    (unsafe_name, "damaged archive: unexpected member '../escape'"),
])
def test_it_refuses_a_damaged_or_partial_archive_changing_nothing(archive, settings, tmp_path,
                                                                 damage, says):
    bad = damage(archive, tmp_path / "bad.tar")
    Report.objects.all().delete()
    settings.REPORTS_DIR = tmp_path / "fresh-reports"
    before = sorted(p.name for p in Path(settings.VAR_DIR).iterdir())
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(bad))
    assert str(refused.value).startswith(says)
    assert "\n" not in str(refused.value)
    assert not Path(settings.REPORTS_DIR).exists()
    assert sorted(p.name for p in Path(settings.VAR_DIR).iterdir()) == before  # staging gone


def test_it_refuses_a_file_that_is_not_an_archive(db, tmp_path):
    (tmp_path / "not.tar").write_text("hello")
    with pytest.raises(CommandError, match="damaged archive: cannot read it to the end"):
        call_command("restore", str(tmp_path / "not.tar"))
    with pytest.raises(CommandError, match="no such file"):
        call_command("restore", str(tmp_path / "absent.tar"))


def test_it_never_overwrites_a_file_with_a_backup(archive):
    with pytest.raises(CommandError, match="exists: a backup never overwrites a file"):
        call_command("backup", str(archive))


def test_it_refuses_a_restore_over_reports_with_other_contents(archive, settings):
    manifest = json.loads(_members(archive)[-1][1])
    assert manifest["reports"] == 0 and manifest["database"]["engine"] == "sqlite"
    pdf = Path(settings.REPORTS_DIR) / "acme-1" / "acme-1-G1-v1.pdf"
    pdf.write_bytes(b"another file")
    with pytest.raises(CommandError, match=f"refused: {pdf} exists with other contents"):
        call_command("restore", str(archive))
    assert pdf.read_bytes() == b"another file"
