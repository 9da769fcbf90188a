"""The SSH connection pool against real OpenSSH servers on 127.0.0.1: a kept connection reused
only for exactly the same node, pinned host key and credential, one job at a time, checked
before reuse, closed after any error, when idle too long, and beyond the pool's size."""

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from runners.lab import server
from runners.transport import (
    AuthenticationFailed,
    CommandTimeout,
    HostKeyRejected,
    SSHPool,
    pool_key,
)
from tests.transport.sshd import target_of

pytestmark = pytest.mark.slow


def pool(**changes) -> SSHPool:
    settings = {"idle_s": 60.0, "max_age_s": 600.0, "size": 8, "check_timeout_s": 5.0,
                **changes}
    return SSHPool(**settings)


def session_pid(connection) -> int:
    """The pid of the node's shell for this connection's session (its sshd's child)."""
    return int(connection.run("echo $PPID", timeout=20).stdout)


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def kill_and_restart(lab: server.LabServer) -> None:
    """SIGKILL the lab's sshd and every session it serves, then start it again on the same
    port with the same host key (a node whose sshd died and came back)."""
    doomed = [lab.pid]
    for pid in doomed:
        doomed += children_of(pid)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    (lab.directory / "sshd.pid").unlink(missing_ok=True)
    subprocess.run([server.SSHD, "-f", str(lab.directory / "sshd_config"),
                    "-E", str(lab.directory / "sshd.log")], check=True, timeout=30)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection((lab.address, lab.port), timeout=1) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_clean_job_gives_its_connection_back_and_the_next_job_reuses_it(sshd):
    node = sshd("node")
    kept = pool()
    with kept.connection(target_of(node, "node-1")) as first:
        shell = first.run("echo $PPID", timeout=20).stdout
    assert kept.idle_count() == 1
    with kept.connection(target_of(node, "node-1")) as second:
        assert second is first
        # the same session on the node: one sshd process serves both jobs' commands
        assert second.run("echo $PPID", timeout=20).stdout == shell != b""
    assert (kept.opened, kept.reused) == (1, 1)
    kept.close_all()
    assert not first.usable(1.0)


def test_two_jobs_on_the_same_node_at_once_hold_two_connections(sshd):
    node = sshd("node")
    kept = pool()
    target = target_of(node, "node-1")
    with kept.connection(target) as one, kept.connection(target) as two:
        assert one is not two
        assert one.run("echo a", timeout=20).stdout == b"a\n"
        assert two.run("echo b", timeout=20).stdout == b"b\n"
    assert (kept.opened, kept.reused, kept.idle_count()) == (2, 0, 2)
    with kept.connection(target) as three:
        assert three in (one, two)
    kept.close_all()


def test_a_changed_pinned_host_key_never_gets_the_kept_connection(sshd):
    node, other = sshd("node"), sshd("other")
    kept = pool()
    with kept.connection(target_of(node, "node-1")) as first:
        first.run("true", timeout=20)
    changed = target_of(node, "node-1", host_key=other.host_key)
    assert pool_key(changed) != pool_key(target_of(node, "node-1"))
    with pytest.raises(HostKeyRejected, match="not the pinned key"):
        with kept.connection(changed):
            pytest.fail("a connection was handed out for another pinned host key")
    assert (kept.opened, kept.reused, kept.idle_count()) == (1, 0, 1)
    kept.close_all()


def test_a_changed_credential_never_gets_the_kept_connection(sshd):
    node, stranger = sshd("node"), sshd("stranger")
    kept = pool()
    with kept.connection(target_of(node, "node-1")):
        pass
    changed = target_of(node, "node-1", private_key=stranger.client_private_key)
    with pytest.raises(AuthenticationFailed):
        with kept.connection(changed):
            pytest.fail("a connection was handed out for another credential")
    assert (kept.opened, kept.reused) == (1, 0)
    # the key names no secret: digests only
    key = repr(pool_key(changed))
    assert stranger.client_private_key not in key
    assert stranger.client_private_key.splitlines()[1] not in key
    kept.close_all()


def test_a_node_whose_sshd_died_between_two_jobs_gets_a_fresh_connection(sshd):
    node = sshd("node")
    kept = pool()
    with kept.connection(target_of(node, "node-1")) as first:
        before = session_pid(first)
    kill_and_restart(node)
    with kept.connection(target_of(node, "node-1")) as second:
        assert second is not first
        result = second.run("echo fresh", timeout=20)
        assert (result.exit_code, result.stdout) == (0, b"fresh\n")
        assert session_pid(second) != before
    assert (kept.opened, kept.reused) == (2, 0)
    kept.close_all()


def test_a_job_that_raised_closes_its_connection(sshd):
    node = sshd("node")
    kept = pool()
    with pytest.raises(RuntimeError):
        with kept.connection(target_of(node, "node-1")) as connection:
            raise RuntimeError("the job failed")
    assert kept.idle_count() == 0 and not connection.usable(1.0)


def test_a_command_that_timed_out_closes_its_connection_even_when_the_job_went_on(sshd):
    node = sshd("node")
    kept = pool()
    with kept.connection(target_of(node, "node-1")) as connection:
        with pytest.raises(CommandTimeout):
            connection.run("sleep 10", timeout=0.5)
        assert connection.faulted
    assert kept.idle_count() == 0 and not connection.usable(1.0)
    with kept.connection(target_of(node, "node-1")) as again:
        assert again is not connection
    kept.close_all()


def test_a_connection_idle_longer_than_the_limit_is_closed(sshd):
    node = sshd("node")
    kept = pool(idle_s=0.3)
    with kept.connection(target_of(node, "node-1")) as first:
        pass
    time.sleep(0.4)
    with kept.connection(target_of(node, "node-1")) as second:
        assert second is not first
    assert not first.usable(1.0)
    # the reaper closes what nobody asks for again
    deadline = time.monotonic() + 5
    while kept.idle_count() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kept.idle_count() == 0 and not second.usable(1.0)


def test_the_pool_keeps_at_most_its_size_closing_the_oldest(sshd):
    a, b = sshd("a"), sshd("b")
    kept = pool(size=1)
    with kept.connection(target_of(a, "a")) as first:
        pass
    with kept.connection(target_of(b, "b")) as second:
        pass
    assert kept.idle_count() == 1
    assert not first.usable(1.0) and second.usable(1.0)
    kept.close_all()


def test_a_pool_of_size_zero_opens_and_closes_a_connection_per_job(sshd):
    node = sshd("node")
    off = pool(idle_s=0)
    with off.connection(target_of(node, "node-1")) as first:
        pass
    with off.connection(target_of(node, "node-1")) as second:
        assert second is not first
    assert (off.opened, off.reused, off.idle_count()) == (2, 0, 0)
    assert not first.usable(1.0) and not second.usable(1.0)


def test_jump_hosts_are_part_of_the_key(sshd):
    bastion, node = sshd("bastion", allow_tcp_forwarding=True), sshd("node")
    direct = target_of(node, "node-1")
    behind = target_of(node, "node-1", via=target_of(bastion, "bastion-1"))
    assert pool_key(direct) != pool_key(behind)
    kept = pool()
    with kept.connection(behind) as through:
        assert through.run("echo via", timeout=20).stdout == b"via\n"
    with kept.connection(direct) as straight:
        assert straight is not through
    with kept.connection(behind) as again:
        assert again is through
    kept.close_all()
