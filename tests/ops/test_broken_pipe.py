"""A command whose reader goes away (``manage.py … | head -1``) ends without a traceback, with
the exit status a shell tool killed by SIGPIPE gives (141)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_pipe_ends_the_command_without_a_traceback(tmp_path):
    env = {**os.environ, "ACCEPTANCE_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE":
           "acceptance.settings"}
    env.pop("DATABASE_URL", None)
    reader, writer = os.pipe()
    process = subprocess.Popen(  # noqa: S603 (our own manage.py, fixed arguments)
        [sys.executable, "manage.py", "shell", "-c", "for i in range(10**6): print(i)"],
        cwd=ROOT, env=env, stdout=writer, stderr=subprocess.PIPE)
    os.close(writer)
    with os.fdopen(reader, "rb") as stream:
        first = stream.readline()  # the reader takes one line, then goes away
    _, stderr = process.communicate(timeout=120)
    assert first.strip() != b""
    assert process.returncode == 141, stderr.decode()
    assert b"Traceback" not in stderr and b"BrokenPipeError" not in stderr, stderr.decode()
