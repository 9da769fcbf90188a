"""A real OpenSSH server on 127.0.0.1 standing in for a customer's node (the lab).

Each lab server lives in its own directory with its own host key, client key, authorised key,
config and stand-in tools (``runners/lab/standins``) first on the PATH of every session
(``SetEnv``). Gotchas from PLATFORM.md §5: absolute ``/usr/sbin/sshd``, ``UsePAM no``,
``StrictModes no`` for keys under /tmp, ``/run/sshd`` must exist, no port 0 (a free port is
picked first).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from acceptance.files import private_write

SSHD = "/usr/sbin/sshd"
STANDINS = Path(__file__).resolve().parent / "standins"


class LabError(RuntimeError):
    """The lab server could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class LabServer:
    """A running lab sshd: where it listens, as whom, and the keys to reach it."""

    directory: Path
    port: int
    pid: int
    user: str
    host_key: str  # OpenSSH public key line
    client_private_key: str  # OpenSSH private key text

    @property
    def address(self) -> str:
        return "127.0.0.1"


def keypair() -> tuple[str, str]:
    """A new Ed25519 key pair: (OpenSSH private key text, public key line)."""
    return _keypair()


def _keypair() -> tuple[str, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    return private, public


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    private_write(path, text.encode(), mode=mode, exclusive=False)


def _install_standins(bin_dir: Path) -> None:
    bin_dir.mkdir(exist_ok=True)
    for tool in STANDINS.iterdir():
        if tool.name.startswith((".", "_")) or tool.suffix or not tool.is_file():
            continue
        text = tool.read_text()
        if text.startswith("#!"):
            # -I -S: stdlib only, no site packages or user environment: a stand-in starts in
            # a third of the time (they run for every probe, cat for every cat).
            text = f"#!{sys.executable} -IS\n" + text.split("\n", 1)[1]
        _write(bin_dir / tool.name, text, 0o755)


def _wait_for_banner(port: int, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise LabError(f"the lab sshd on 127.0.0.1:{port} did not answer within {deadline_s:g} s")


def server_start(directory: Path, *, scenario: dict, extra_env: dict[str, str] | None = None,
                 path_prefix: list[Path] | None = None,
                 allow_tcp_forwarding: bool = False,
                 client_key: tuple[str, str] | None = None,
                 ciphers: str | None = None) -> LabServer:
    """Start a lab sshd in ``directory`` (made anew) serving ``scenario``'s stand-in tools.

    ``allow_tcp_forwarding``: let it act as a jump host (bastion) for other lab servers.
    ``client_key``: the (private, public) OpenSSH key pair it authorises (one engineer's key for
    every node of a lab); a new pair when absent. The host key is always its own.
    ``ciphers``: sshd's ``Ciphers`` list (OpenSSH's default when absent), for a node that offers
    fewer.
    """
    if not Path(SSHD).exists():
        raise LabError(f"{SSHD} is missing: install Debian's openssh-server (scripts/setup)")
    server_stop(directory)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    directory.chmod(0o700)
    host_private, host_public = _keypair()
    client_private, client_public = client_key or _keypair()
    _write(directory / "host_key", host_private)
    _write(directory / "host_key.pub", host_public + "\n")
    _write(directory / "client_key", client_private)
    _write(directory / "authorized_keys", client_public + "\n")
    _write(directory / "scenario.json", json.dumps(scenario, indent=1), 0o644)
    bin_dir = directory / "bin"
    _install_standins(bin_dir)
    user = getpass.getuser()
    path = ":".join(str(p) for p in [*(path_prefix or []), bin_dir, "/usr/local/bin", "/usr/bin",
                                     "/bin"])
    # SHLVL=1: bash then does not source the lab user's ~/.bashrc for each command (a
    # developer's pyenv set-up there costs 0.3 s per command and reorders PATH); a lab node
    # behaves like a clean one.
    env = {"PATH": path, "ACCEPTANCE_LAB_SCENARIO": str(directory / "scenario.json"),
           "SHLVL": "1", **(extra_env or {})}
    set_env = " ".join(f"{k}={v}" for k, v in env.items())
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    last_error = ""
    for _ in range(5):
        port = free_port()
        config = "\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {directory / 'host_key'}",
            f"PidFile {directory / 'sshd.pid'}",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PermitRootLogin prohibit-password", f"AllowUsers {user}", "X11Forwarding no",
            f"AllowTcpForwarding {'yes' if allow_tcp_forwarding else 'no'}",
            "PermitTunnel no", "PrintMotd no", "LogLevel ERROR",
            "MaxSessions 64", "MaxStartups 64:30:128", f"SetEnv {set_env}",
            *([f"Ciphers {ciphers}"] if ciphers else []), "",
        ])
        _write(directory / "sshd_config", config, 0o600)
        done = subprocess.run([SSHD, "-f", str(directory / "sshd_config"),
                               "-E", str(directory / "sshd.log")],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            last_error = (done.stderr or done.stdout).strip()
            continue
        try:
            _wait_for_banner(port)
            # no pid file: the banner was another daemon's on the same port (two starts given
            # one free port at once), or this one died: stopped, and started again elsewhere
            pid = _read_pid(directory / "sshd.pid", deadline_s=10.0)
        except LabError as error:
            last_error = str(error)
            if not server_stop(directory):
                _stop_started_from(directory)  # started, its pid file not written yet
            continue
        info = {"port": port, "pid": pid, "user": user}
        _write(directory / "server.json", json.dumps(info), 0o644)
        return LabServer(directory, port, pid, user, host_public, client_private)
    log = (directory / "sshd.log").read_text() if (directory / "sshd.log").exists() else ""
    raise LabError(f"could not start the lab sshd: {last_error} {log.strip()}".strip())


def _read_pid(path: Path, deadline_s: float = 30.0) -> int:
    """The daemon's pid: sshd may answer on its port a moment before it writes its pid file."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            text = path.read_text().split()
            if text:
                return int(text[0])
        except FileNotFoundError:
            pass
        if time.monotonic() > end:
            raise LabError(f"the lab sshd wrote no pid file {path} within {deadline_s:g} s")
        time.sleep(0.02)


def _is_our_sshd(pid: int, directory: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # sshd rewrites its title ("sshd: /usr/sbin/sshd -f CONFIG [listener] …"): a substring test.
    return b"sshd" in cmdline and str(directory / "sshd_config").encode() in cmdline


def _stop_started_from(directory: Path) -> None:
    """SIGTERM every sshd started with ``directory``'s config (one that has not written its pid
    file: ``server_stop`` cannot name it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_our_sshd(int(entry.name), directory):
            try:
                os.kill(int(entry.name), signal.SIGTERM)
            except ProcessLookupError:
                pass


def server_stop(directory: Path) -> bool:
    """Stop the lab sshd of ``directory`` (only if the pid really is that server).

    Returns True when a running server was stopped; a stale pid file is removed.
    """
    pid_file = directory / "sshd.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    if not _is_our_sshd(pid, directory):
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(250):
        if not _is_our_sshd(pid, directory):
            break
        time.sleep(0.02)
    else:
        raise LabError(f"the lab sshd {pid} of {directory.name} did not stop on SIGTERM")
    pid_file.unlink(missing_ok=True)
    return True
