"""A backup on a full disk (simulated by a file size limit on the process, RLIMIT_FSIZE: no
tmpfs here) fails in one line naming what could not be written, exit status 1, no traceback,
and leaves neither a partial archive nor scratch files behind."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.production.helpers import ROOT, base_env, manage


@pytest.fixture
def installation(tmp_path):
    env = base_env(tmp_path / "var")
    done = manage(env, "migrate", "-v", "0")
    assert done.returncode == 0, done.stderr
    return env, tmp_path / "var"


def backup_limited(env, out: Path, max_file_bytes: int) -> subprocess.CompletedProcess:
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run([sys.executable, "manage.py", "backup", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)


def test_no_room_for_the_archive_names_it_and_keeps_nothing(installation, tmp_path):
    env, var = installation
    before = sorted(p.name for p in var.iterdir())
    database_bytes = (var / "acceptance.sqlite3").stat().st_size
    out = tmp_path / "backup.tar"
    failed = backup_limited(env, out, database_bytes + 256)  # the copy fits, the archive not
    assert failed.returncode == 1
    assert failed.stderr == f"CommandError: cannot write {out}: File too large; nothing was kept\n"
    assert not out.exists()
    assert sorted(p.name for p in var.iterdir()) == before


def test_no_room_for_the_database_copy_names_the_directory(installation, tmp_path):
    env, var = installation
    database_bytes = (var / "acceptance.sqlite3").stat().st_size
    out = tmp_path / "backup.tar"
    failed = backup_limited(env, out, database_bytes // 2)
    assert failed.returncode == 1
    assert failed.stderr == (f"CommandError: cannot copy the database into {var}: "
                             "disk I/O error\n")
    assert not out.exists()
    done = manage(env, "backup", str(out))  # with room, the same backup is written
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"backup: {out} (sqlite database, 0 reports")
