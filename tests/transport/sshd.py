"""Helpers for tests that start their own lab sshd servers (jump hosts, restarts, retries)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runners.lab import server
from runners.lab.scenarios import scenario
from runners.transport import SSHTarget


@pytest.fixture
def sshd(settings):
    """``sshd(name, allow_tcp_forwarding=False) -> LabServer``: a real sshd on 127.0.0.1 with
    the healthy scenario's stand-ins, stopped when the test ends (it lives under LAB_DIR)."""

    def start(name: str, **options) -> server.LabServer:
        return server.server_start(settings.LAB_DIR / name, scenario=scenario("healthy"),
                                   **options)

    return start


def real_node(directory: Path) -> server.LabServer:
    """A loopback sshd whose sessions find this machine's own tools (nvme-cli, smartmontools):
    the lab's stand-in directory is emptied, /usr/sbin is on the PATH as for root on a node."""
    node = server.server_start(directory, scenario={},
                               path_prefix=[Path("/usr/local/sbin"), Path("/usr/sbin")])
    shutil.rmtree(directory / "bin")
    (directory / "bin").mkdir()
    return node


def host_key_fingerprint_of(lab: server.LabServer) -> str:
    """``SHA256:…`` of the server's host key as ``ssh-keygen -lf`` prints it on its console."""
    done = subprocess.run(["ssh-keygen", "-lf", str(lab.directory / "host_key.pub")],
                          capture_output=True, text=True, check=True)
    return done.stdout.split()[1]


def target_of(lab: server.LabServer, name: str, **changes) -> SSHTarget:
    """An SSHTarget for a lab server as it is (its own key pinned, its client key)."""
    fields = {"name": name, "host": lab.address, "port": lab.port, "user": lab.user,
              "host_key": lab.host_key, "private_key": lab.client_private_key,
              "connect_timeout": 5.0, "connect_retries": 0, **changes}
    return SSHTarget(**fields)


def _socket_inodes(local_port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == local_port:
                inodes.add(f"socket:[{fields[9]}]")
    return inodes


def tcp_client_pid(local_port: int) -> int | None:
    """The process holding the TCP socket whose local port is ``local_port``."""
    inodes = _socket_inodes(local_port)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue
    return None


def descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(next(line.split()[1] for line in status.splitlines()
                       if line.startswith("PPid:")))
    return False
