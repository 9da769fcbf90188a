"""Reading the host key of a port that accepts TCP but never speaks SSH (a hung daemon, another
service that waits for its client): one line naming the port and the wait, never paramiko's
"No existing session" traceback; a port out of range is refused before any connection."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runners.transport import Unreachable
from runners.transport.ssh import host_key_presented


@pytest.fixture
def silent_port():
    """A loopback port that accepts connections and says nothing."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    server.close()


def test_a_port_that_never_speaks_ssh_is_unreachable_in_one_sentence(silent_port):
    with pytest.raises(Unreachable) as refused:
        host_key_presented("127.0.0.1", silent_port, timeout=1.0)
    assert str(refused.value).startswith(f"127.0.0.1:{silent_port}: no SSH host key")
    assert "No existing session" not in str(refused.value)


def test_node_fingerprint_says_so_in_one_line(silent_port):
    with pytest.raises(CommandError) as refused:
        call_command("node_fingerprint", "127.0.0.1", "--port", str(silent_port),
                     "--timeout", "1", stdout=io.StringIO())
    assert str(refused.value).startswith(
        f"cannot read the host key of 127.0.0.1:{silent_port}: 127.0.0.1:{silent_port}: no "
        f"SSH host key")


@pytest.mark.parametrize("port", ["0", "70000"])
def test_a_port_out_of_range_is_refused_before_connecting(port):
    with pytest.raises(CommandError, match=f"--port {port}: a TCP port is 1 … 65535"):
        call_command("node_fingerprint", "127.0.0.1", "--port", port, stdout=io.StringIO())


@pytest.mark.parametrize("seconds", ["1", "2"])
def test_node_fingerprint_prints_no_traceback_whichever_timeout_fires_first(silent_port,
                                                                            tmp_path, seconds):
    """The handshake's banner timeout and the key exchange's share the same length: when the
    banner's fires first, paramiko's thread logged its traceback on stderr before our line."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(DJANGO_SETTINGS_MODULE="acceptance.settings", ACCEPTANCE_VAR_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "manage.py", "node_fingerprint", "127.0.0.1", "--port",
         str(silent_port), "--timeout", seconds], cwd=Path(__file__).resolve().parents[2],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"CommandError: cannot read the host key of 127.0.0.1:"
                               f"{silent_port}: 127.0.0.1:{silent_port}: no SSH host key")
