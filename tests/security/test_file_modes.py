"""The service's own files are private from the start: a fresh installation (umask 022, as
usual) makes its var directory 0700 and the SQLite database, the secret key and the
credentials key 0600; a lab server's keys are never readable by others, not even briefly."""

import os
import stat
import subprocess
import sys
from pathlib import Path

from acceptance.files import private_secret, private_write
from runners.lab.server import _write

ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_installation_keeps_its_files_private(tmp_path):
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(ACCEPTANCE_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="acceptance.settings")
    env.pop("DJANGO_SECRET_KEY", None)
    env.pop("ACCEPTANCE_CREDENTIALS_KEY", None)
    script = ("import os; os.umask(0o022); import django; django.setup(); "
              "from django.core.management import call_command; "
              "call_command('migrate', verbosity=0); "
              "from acceptance.crypto import _fernet; _fernet()")
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=300)
    assert mode(var) == 0o700
    for name in ("acceptance.sqlite3", "django-secret-key", "credentials.key"):
        assert mode(var / name) == 0o600, name
    assert (var / "acceptance.sqlite3").stat().st_size > 0  # the database SQLite then filled


def test_a_private_file_is_never_readable_by_others(tmp_path):
    old = os.umask(0)  # even without a umask's help
    try:
        private_write(tmp_path / "key", b"secret")
        assert mode(tmp_path / "key") == 0o600
        (tmp_path / "script").write_text("old")
        (tmp_path / "script").chmod(0o666)
        private_write(tmp_path / "script", b"#!/bin/sh\n", mode=0o755, exclusive=False)
        assert mode(tmp_path / "script") == 0o755
        assert (tmp_path / "script").read_bytes() == b"#!/bin/sh\n"
        assert private_secret(tmp_path / "s", lambda: "first") == "first"
        assert private_secret(tmp_path / "s", lambda: "second") == "first"
        assert mode(tmp_path / "s") == 0o600
    finally:
        os.umask(old)


def test_a_lab_servers_keys_are_0600(tmp_path):
    _write(tmp_path / "client_key", "PRIVATE")
    assert mode(tmp_path / "client_key") == 0o600
