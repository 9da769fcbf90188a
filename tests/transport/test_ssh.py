"""The SSH transport against real OpenSSH servers on 127.0.0.1: pinned keys, jump hosts,
retries of connection set-up with back-off, reading a host key without logging in.

Loopback cannot be firewalled, so "reached through the jump host" is shown by the target's own
view of the connection: ``$SSH_CONNECTION`` names the client port, and the socket on that port
belongs to a process of the jump host's sshd, not to the test.
"""

import os
import subprocess
import time

import pytest

from runners.lab import server
from runners.transport import (
    AuthenticationFailed,
    CommandCancelled,
    HostKeyRejected,
    SSHConnection,
    SSHTarget,
    Unreachable,
    host_key_presented,
)
from tests.transport.sshd import descends_from, target_of, tcp_client_pid

pytestmark = pytest.mark.slow


class Sleeps(list):
    """Records the back-off delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client_port_seen_by(connection: SSHConnection) -> int:
    result = connection.run("echo $SSH_CONNECTION", timeout=20)
    assert result.exit_code == 0, result.stderr
    client_host, client_port, server_host, server_port = result.stdout.decode().split()
    return int(client_port)


def test_it_runs_a_command_on_a_node_with_its_key_pinned(sshd):
    node = sshd("node")
    seen = []
    with SSHConnection(target_of(node, "node-1")) as connection:
        result = connection.run("echo out; echo err >&2; exit 3", timeout=20,
                                on_output=lambda stream, data: seen.append((stream, data)))
        port = client_port_seen_by(connection)
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert b"".join(d for s, d in seen if s == "stdout") == b"out\n"
    assert b"".join(d for s, d in seen if s == "stderr") == b"err\n"
    assert port  # a direct connection: the client port is the test's own


def test_it_reaches_a_node_through_its_jump_host(sshd):
    bastion = sshd("bastion", allow_tcp_forwarding=True)
    node = sshd("node")
    target = target_of(node, "node-1", via=target_of(bastion, "bastion-1"))
    with SSHConnection(target) as connection:
        port = client_port_seen_by(connection)
        owner = tcp_client_pid(port)
        result = connection.run("nvme list -o json", timeout=20)  # the node's stand-in tools
    assert owner is not None and owner != os.getpid()
    assert descends_from(owner, bastion.pid), "the node was not reached through the bastion"
    assert not descends_from(owner, node.pid)
    assert result.exit_code == 0 and b'"Devices"' in result.stdout
    assert "via SSHTarget('bastion-1'" in repr(target)


def test_it_reaches_a_node_through_two_jump_hosts(sshd):
    outer = sshd("outer", allow_tcp_forwarding=True)
    inner = sshd("inner", allow_tcp_forwarding=True)
    node = sshd("node")
    target = target_of(node, "node-1", via=target_of(
        inner, "inner-bastion", via=target_of(outer, "outer-bastion")))
    with SSHConnection(target) as connection:
        owner = tcp_client_pid(client_port_seen_by(connection))
    assert descends_from(owner, inner.pid)


def test_it_refuses_a_jump_host_presenting_another_key_naming_the_jump_host(sshd):
    bastion = sshd("bastion", allow_tcp_forwarding=True)
    node = sshd("node")
    impostor = target_of(bastion, "bastion-1", host_key=node.host_key)  # pinned: not its key
    sleeps = Sleeps()
    with pytest.raises(HostKeyRejected) as refused:
        SSHConnection(target_of(node, "node-1", via=impostor, connect_retries=3),
                      sleep=sleeps).__enter__()
    message = str(refused.value)
    assert message.startswith(f"jump host bastion-1 (127.0.0.1:{bastion.port}) for node-1 "
                              "presented host key SHA256:")
    assert "which is not the pinned key" in message
    assert sleeps == []  # a host-key refusal is never retried


def test_it_refuses_a_node_behind_the_jump_host_presenting_another_key(sshd):
    bastion = sshd("bastion", allow_tcp_forwarding=True)
    node = sshd("node")
    target = target_of(node, "node-1", host_key=bastion.host_key,
                       via=target_of(bastion, "bastion-1"))
    with pytest.raises(HostKeyRejected) as refused:
        SSHConnection(target).__enter__()
    assert str(refused.value).startswith(
        f"node-1 (127.0.0.1:{node.port}) via jump host bastion-1 (127.0.0.1:{bastion.port}) "
        "presented host key SHA256:")


def test_it_says_when_the_jump_host_does_not_forward_and_does_not_retry(sshd):
    bastion = sshd("bastion")  # AllowTcpForwarding no, as lab servers have by default
    node = sshd("node")
    sleeps = Sleeps()
    with pytest.raises(Unreachable) as refused:
        SSHConnection(target_of(node, "node-1", via=target_of(bastion, "bastion-1"),
                                connect_retries=3), sleep=sleeps).__enter__()
    assert f"jump host bastion-1 (127.0.0.1:{bastion.port}) for node-1 refused to forward" in (
        str(refused.value))
    assert "AllowTcpForwarding" in str(refused.value)
    assert sleeps == []


def test_it_retries_a_refused_connection_with_back_off_then_says_how_often(sshd):
    node = sshd("node")
    server.server_stop(node.directory)  # nothing listens on its port any more
    sleeps = Sleeps()
    connection = SSHConnection(target_of(node, "node-1", connect_retries=3), sleep=sleeps)
    with pytest.raises(Unreachable) as failed:
        connection.__enter__()
    assert sleeps == [1.0, 2.0, 4.0]
    assert connection.attempts == 4
    assert str(failed.value).startswith(f"node-1 (127.0.0.1:{node.port}) unreachable: ")
    assert "Connection refused" in str(failed.value)
    assert str(failed.value).endswith("(gave up after 4 attempts)")


def sshd_restart(node: server.LabServer) -> None:
    """Start the stopped sshd of ``node`` again: same config, port and host key."""
    subprocess.run([server.SSHD, "-f", str(node.directory / "sshd_config"),
                    "-E", str(node.directory / "sshd.log")], check=True, timeout=30)


def test_it_connects_when_the_node_comes_up_during_the_retries(sshd):
    node = sshd("node")
    server.server_stop(node.directory)  # the node is rebooting
    sleeps = Sleeps()

    def node_boots(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # its sshd is back during the second back-off
            sshd_restart(node)
            time.sleep(0.5)

    connection = SSHConnection(target_of(node, "node-1", connect_retries=3), sleep=node_boots)
    with connection:
        assert connection.run("echo up", timeout=20).stdout == b"up\n"
    assert sleeps == [1.0, 2.0] and connection.attempts == 3


def test_it_does_not_retry_a_failed_authentication(sshd):
    node = sshd("node")
    stranger = sshd("stranger")
    sleeps = Sleeps()
    with pytest.raises(AuthenticationFailed) as refused:
        SSHConnection(target_of(node, "node-1", private_key=stranger.client_private_key,
                                connect_retries=3), sleep=sleeps).__enter__()
    assert str(refused.value).startswith(f"node-1 (127.0.0.1:{node.port}): authentication as ")
    assert sleeps == []


def test_it_never_runs_a_started_command_again_when_the_connection_drops(sshd, tmp_path):
    node = sshd("node")
    counter = tmp_path / "runs"
    sleeps = Sleeps()
    with SSHConnection(target_of(node, "node-1", connect_retries=3), sleep=sleeps) as connection:
        try:  # the command kills its own SSH session
            connection.run(f"echo run >> {counter}; kill -9 $PPID; sleep 5", timeout=20)
        except Unreachable:
            pass
    assert counter.read_text() == "run\n"
    assert sleeps == [] and connection.attempts == 1


def test_it_stops_a_running_command_when_cancelled_and_keeps_the_connection(sshd):
    node = sshd("node")
    ticks = []

    def cancel_on_second_tick() -> bool:
        ticks.append(1)
        return len(ticks) >= 2

    with SSHConnection(target_of(node, "node-1")) as connection:
        with pytest.raises(CommandCancelled, match="node-1: cancelled"):
            connection.run("sleep 30", timeout=60, on_tick=cancel_on_second_tick)
        assert connection.run("echo still here", timeout=20).stdout == b"still here\n"


def test_it_reads_the_host_key_a_node_presents_without_logging_in(sshd):
    node = sshd("node")
    assert host_key_presented(node.address, node.port) == node.host_key.strip()
    # No credential is needed or used: the key reads the same with the client key removed.
    (node.directory / "authorized_keys").write_text("")
    assert host_key_presented(node.address, node.port) == node.host_key.strip()


def test_it_reads_the_host_key_of_a_node_behind_a_jump_host(sshd):
    bastion = sshd("bastion", allow_tcp_forwarding=True)
    node = sshd("node")
    line = host_key_presented(node.address, node.port, via=target_of(bastion, "bastion-1"))
    assert line == node.host_key.strip()
    with pytest.raises(HostKeyRejected, match="jump host bastion-1"):
        host_key_presented(node.address, node.port,
                           via=target_of(bastion, "bastion-1", host_key=node.host_key))


def test_it_says_a_closed_port_presents_no_host_key():
    port = server.free_port()
    with pytest.raises(Unreachable, match=f"127.0.0.1:{port} unreachable"):
        host_key_presented("127.0.0.1", port, timeout=2)


def test_it_refuses_more_than_three_jump_hosts_before_connecting():
    hop = None
    for index in range(5):
        hop = SSHTarget(f"hop-{index}", "127.0.0.1", 1, "root", "ssh-ed25519 AAAA", "", via=hop)
    with pytest.raises(Unreachable, match="more than 3 jump hosts") as refused:
        SSHConnection(hop).__enter__()
    assert not refused.value.transient


def test_waiting_for_an_exit_status_after_the_output_closed_costs_no_cpu(sshd):
    """A command that closes stdout and stderr and then works on: the channel's pipe reads as
    ready for good after the EOF, so waiting for the exit status must not poll it (issue 17:
    a spinning wait cost the worker milliseconds of CPU per probe)."""
    node = sshd("node")
    with SSHConnection(target_of(node, "node-1")) as connection:
        connection.run("true", timeout=20)  # the session set up first
        cpu, wall = time.thread_time(), time.monotonic()
        result = connection.run("echo out; exec >&- 2>&-; sleep 0.6; exit 4", timeout=20)
        cpu, wall = time.thread_time() - cpu, time.monotonic() - wall
    assert (result.exit_code, result.stdout) == (4, b"out\n")
    assert wall >= 0.6
    assert cpu < 0.1, f"{cpu * 1000:.0f} ms of CPU waiting {wall * 1000:.0f} ms for the status"


def test_an_idle_sessions_transport_thread_wakes_once_a_second_and_still_ends(sshd):
    """paramiko's thread polls its socket every 0.1 s (about 40 µs of CPU each, per open
    session: issue 17); once set up, a session's socket waits IDLE_POLL_S. Commands still run
    at once, and closing the connection ends the thread within that."""
    from runners.transport import ssh

    node = sshd("node")
    with SSHConnection(target_of(node, "node-1")) as connection:
        transport = connection.client.get_transport()
        assert transport.sock.gettimeout() == ssh.IDLE_POLL_S == 1.0
        started = time.monotonic()
        assert connection.run("echo quick", timeout=20).stdout == b"quick\n"
        assert time.monotonic() - started < 0.9  # not a poll interval
    transport.join(timeout=ssh.IDLE_POLL_S + 2)
    assert not transport.is_alive()


def test_it_prefers_aes_gcm_and_still_reaches_a_node_that_offers_only_aes_ctr(sshd):
    """AES-GCM first (issue 17: less CPU a command than AES-CTR with its HMAC); a node whose
    sshd offers only CTR ciphers negotiates one of those, as before."""
    node = sshd("node")
    with SSHConnection(target_of(node, "gpu-01")) as connection:
        assert connection.client.get_transport().local_cipher == "aes128-gcm@openssh.com"
        assert connection.run("echo ok", timeout=10).stdout == b"ok\n"
    old = sshd("old", ciphers="aes256-ctr,aes128-ctr")
    with SSHConnection(target_of(old, "gpu-02")) as connection:
        assert connection.client.get_transport().local_cipher == "aes128-ctr"
        assert connection.run("echo ok", timeout=10).stdout == b"ok\n"
