"""Enrolling nodes: the host key is pinned only when the fingerprint read on the node's console
matches what the node presents; nodes behind a jump host (bastion); a changed key is refused.

Nodes are real OpenSSH servers on 127.0.0.1 (``sshd`` and ``lab`` fixtures).
"""

import io
import re
from datetime import date

import pytest
from django.core.exceptions import ValidationError
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError

from acceptance.models import AuditEntry, Credential, Node, host_key_fingerprint
from acceptance.services import EnrolmentRefused, node_enrol
from gates.services import engagement_create
from runners.lab import server
from runners.lab.scenarios import scenario
from runners.models import GateRun, NodeJob
from runners.transport import HostKeyRejected, SSHConnection
from tests.acceptance.keys import keypair

pytestmark = pytest.mark.slow


def command(name, *args, **options):
    out = io.StringIO()
    call_command(name, *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def node_add(engagement, name, lab, key_file, fingerprint, *extra, role="array"):
    return command("node_add", engagement, name, "--role", role, "--address", lab.address,
                   "--port", str(lab.port), "--user", lab.user, "--key-file", str(key_file),
                   "--fingerprint", fingerprint, "--actor", "eng-bob", *extra)


def lab_key_file(lab, tmp_path):
    path = tmp_path / f"{lab.directory.name}.key"
    path.write_text(lab.client_private_key)
    return path


@pytest.fixture
def engagement(db):
    return engagement_create(name="acme-sh1", customer="ACME", start_date=date(2026, 11, 30))


def test_it_prints_the_fingerprint_and_key_type_a_node_presents(sshd):
    node = sshd("node")
    out = command("node_fingerprint", node.address, "--port", str(node.port))
    first, second = out.splitlines()
    assert first == (f"{host_key_fingerprint(node.host_key)} (ED25519, ssh-ed25519) presented "
                     f"by 127.0.0.1:{node.port}")
    assert second == ("compare on the node's console: "
                      "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub")


def test_it_enrols_a_node_whose_fingerprint_was_confirmed(engagement, sshd, tmp_path,
                                                          monkeypatch):
    node_server = sshd("node")
    key = keypair(passphrase="correct horse 7f3a")
    key.authorise_on(node_server.directory)
    monkeypatch.setenv("NODE_KEY_PASSPHRASE", key.passphrase)
    fingerprint = host_key_fingerprint(node_server.host_key)

    out = node_add(engagement.name, "gpu-01", node_server, key.write(tmp_path / "id"),
                   fingerprint, "--passphrase-env", "NODE_KEY_PASSPHRASE",
                   "--interface", "ens1f0", "--fio-target", "/dev/nvme1n1", "--sudo",
                   role="inference")

    assert out.splitlines() == [
        f"enrolled gpu-01 (inference node) at 127.0.0.1:{node_server.port} as "
        f"{node_server.user}",
        f"host key pinned: {fingerprint} (ssh-ed25519)",
        "credential: acme-sh1-gpu-01 (stored encrypted)",
    ]
    node = Node.objects.get(engagement=engagement, name="gpu-01")
    assert (node.role, node.interface, node.fio_target, node.use_sudo) == (
        "inference", "ens1f0", "/dev/nvme1n1", True)
    assert node.host_key == node_server.host_key.strip()
    assert node.credential.private_key() == key.private
    assert node.credential.passphrase() == key.passphrase
    assert key.passphrase.encode() not in bytes(node.credential.passphrase_encrypted)
    entry = AuditEntry.objects.get(engagement=engagement, action="node enrolled")
    assert entry.actor == "eng-bob"
    assert entry.details["host_key_fingerprint"] == fingerprint
    with SSHConnection(node.ssh_target()) as connection:  # the stored key logs in
        assert connection.run("echo enrolled", timeout=20).stdout == b"enrolled\n"


def test_it_refuses_a_fingerprint_the_node_does_not_present_with_exit_status_1(
        engagement, sshd, tmp_path, capsys):
    node_server = sshd("node")
    other = sshd("other")
    confirmed = host_key_fingerprint(other.host_key)  # read on another machine's console
    argv = ["manage.py", "node_add", engagement.name, "gpu-01", "--role", "inference",
            "--address", "127.0.0.1", "--port", str(node_server.port), "--user",
            node_server.user, "--key-file", str(lab_key_file(node_server, tmp_path)),
            "--fingerprint", confirmed]
    with pytest.raises(SystemExit) as exit_info:
        ManagementUtility(argv).execute()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    presented = host_key_fingerprint(node_server.host_key)
    assert f"presents host key {presented} (ssh-ed25519), not the confirmed {confirmed}" in err
    assert err.startswith("CommandError: refused: gpu-01 (127.0.0.1:")
    assert not Node.objects.exists() and not Credential.objects.exists()
    assert not AuditEntry.objects.filter(action="node enrolled").exists()


def test_it_shows_both_fingerprints_when_the_service_refuses(engagement, sshd):
    node_server = sshd("node")
    credential = Credential.from_secret("k", node_server.client_private_key)
    with pytest.raises(EnrolmentRefused) as refused:
        node_enrol(engagement=engagement, name="gpu-01", role="inference",
                   address="127.0.0.1", port=node_server.port, ssh_user="root",
                   credential=credential, host_key=node_server.host_key,
                   confirmed_fingerprint="SHA256:notthisone")
    message = str(refused.value)
    assert host_key_fingerprint(node_server.host_key) in message
    assert "SHA256:notthisone" in message
    assert not Credential.objects.exists()


def test_it_refuses_a_credential_the_node_does_not_accept(engagement, sshd):
    node_server = sshd("node")
    private = keypair().private  # a valid key, but not in the node's authorized_keys
    with pytest.raises(EnrolmentRefused, match=r"login check failed \(authentication\)"):
        node_enrol(engagement=engagement, name="gpu-01", role="array", address="127.0.0.1",
                   port=node_server.port, ssh_user=node_server.user,
                   credential=Credential.from_secret("stranger", private),
                   host_key=node_server.host_key,
                   confirmed_fingerprint=host_key_fingerprint(node_server.host_key))
    assert not Credential.objects.exists() and not Node.objects.exists()


def test_it_refuses_bad_fields_before_contacting_the_node(engagement, sshd, tmp_path):
    node_server = sshd("node")
    server.server_stop(node_server.directory)  # a fetch would fail as unreachable instead
    with pytest.raises(CommandError) as refused:
        command("node_add", engagement.name, "gpu-01", "--role", "inference",
                "--address", "bad host!", "--port", "70000", "--user", "Root User",
                "--key-file", str(lab_key_file(node_server, tmp_path)),
                "--interface", "an-interface-name-too-long", "--fingerprint", "SHA256:x")
    message = str(refused.value)
    assert message.startswith("not enrolled: ")
    for field in ("address: a host name or IP address", "port: ", "ssh_user: a POSIX user name",
                  "interface: a Linux interface name"):
        assert field in message
    assert "unreachable" not in message
    assert not Credential.objects.exists()


@pytest.mark.parametrize(("problem", "expected"), [
    ("no passphrase", "if it is encrypted, give --passphrase-env VAR"),
    ("wrong passphrase", "is it the right --passphrase-env?"),
    ("unset variable", "environment variable NODE_KEY_PASSPHRASE (--passphrase-env) is not set"),
    ("not a key", "does not open as an Ed25519, ECDSA or RSA private key"),
])
def test_it_refuses_a_key_it_cannot_open_without_showing_it(engagement, tmp_path, monkeypatch,
                                                            problem, expected):
    key = keypair(passphrase="correct horse 7f3a")
    key_file = key.write(tmp_path / "id")
    extra = []
    if problem == "wrong passphrase":
        monkeypatch.setenv("NODE_KEY_PASSPHRASE", "battery staple")
        extra = ["--passphrase-env", "NODE_KEY_PASSPHRASE"]
    elif problem == "unset variable":
        monkeypatch.delenv("NODE_KEY_PASSPHRASE", raising=False)
        extra = ["--passphrase-env", "NODE_KEY_PASSPHRASE"]
    elif problem == "not a key":
        key_file.write_text("just some text\n" + key.private[40:])
    with pytest.raises(CommandError) as refused:
        command("node_add", engagement.name, "gpu-01", "--role", "inference",
                "--address", "127.0.0.1", "--port", "1", "--user", "root",
                "--key-file", str(key_file), "--fingerprint", "SHA256:x", *extra)
    assert expected in str(refused.value)
    for secret in [*key.secrets(), "battery staple"]:
        assert secret not in str(refused.value)


def test_it_refuses_an_enrolled_node_whose_host_key_changed(lab, tmp_path):
    engagement, lab_server = lab("healthy")
    key_file = lab_key_file(lab_server, tmp_path)
    old = host_key_fingerprint(lab_server.host_key)
    node_add(engagement.name, "console-checked", lab_server, key_file, old, role="bastion")
    node = Node.objects.get(engagement=engagement, name="console-checked")

    # The node's sshd comes back with a new host key (reinstalled, or another machine).
    changed = server.server_start(lab_server.directory, scenario=scenario("healthy"))
    Node.objects.filter(engagement=engagement).update(port=changed.port)  # lab: a new port
    new = host_key_fingerprint(changed.host_key)
    assert new != old

    node.refresh_from_db()
    with pytest.raises(HostKeyRejected) as refused:
        SSHConnection(node.ssh_target(), sleep=lambda s: pytest.fail("retried")).__enter__()
    assert str(refused.value) == (
        f"console-checked (127.0.0.1:{changed.port}) presented host key {new}, which is not "
        f"the pinned key {old}: refusing to connect")

    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G1", stdout=out, stderr=err)
    assert exit_info.value.code == 2
    job = NodeJob.objects.get(gate_run__gate__engagement=engagement)
    assert job.error_kind == "host_key" and f"which is not the pinned key {old}" in job.error



def test_a_host_key_that_changed_legitimately_is_re_pinned_once_confirmed(lab, tmp_path):
    """The node was re-installed: its new key is pinned only with the console's fingerprint, a
    reason and a login over it; every refusal changes nothing; then runs go through again."""
    engagement, lab_server = lab("healthy")
    old = host_key_fingerprint(lab_server.host_key)
    node_add(engagement.name, "ctrl-01", lab_server, lab_key_file(lab_server, tmp_path), old)
    node = Node.objects.get(engagement=engagement, name="ctrl-01")
    authorised = (lab_server.directory / "authorized_keys").read_text().strip()
    # Re-installed: a new host key, and (first) not yet the engineer's key authorised.
    changed = server.server_start(lab_server.directory, scenario=scenario("healthy"))
    Node.objects.filter(engagement=engagement).update(port=changed.port)  # lab: a new port
    new = host_key_fingerprint(changed.host_key)

    def repin(fingerprint, reason="node re-installed (ticket 4711)"):
        return command("node_repin", engagement.name, "ctrl-01", "--fingerprint", fingerprint,
                       "--reason", reason, "--actor", "eng-bob")

    def unchanged():
        node.refresh_from_db()
        assert node.host_key_fingerprint == old
        assert not AuditEntry.objects.filter(action="node host key re-pinned").exists()

    stranger = host_key_fingerprint(server.keypair()[1])
    for fingerprint, reason, words in [
            (stranger, "re-installed", f"presents host key {new} (ssh-ed25519), not the "
                                       f"confirmed {stranger}: the pinned key stays {old}"),
            (new, "   ", "--reason is blank"),
            (new, "re-installed", "the login check failed (authentication)")]:
        with pytest.raises(CommandError) as refused:
            repin(fingerprint, reason)
        assert words in str(refused.value), str(refused.value)
        unchanged()
    with pytest.raises(CommandError, match="no node named 'gpu-09' \\(its nodes: "):
        command("node_repin", engagement.name, "gpu-09", "--fingerprint", new, "--reason", "x")

    # The engineer's key authorised again on the re-installed node: re-pinned, audited; not
    # while a gate run is using the node.
    changed = server.server_start(lab_server.directory, scenario=scenario("healthy"),
                                  client_key=(lab_server.client_private_key, authorised))
    Node.objects.filter(engagement=engagement).update(port=changed.port)
    new = host_key_fingerprint(changed.host_key)
    run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                 started_by="eng-bob", state="running")
    job = NodeJob.objects.create(gate_run=run, node=node, state="running")
    with pytest.raises(CommandError, match="a gate run is using the node now"):
        repin(new)
    unchanged()
    NodeJob.objects.filter(pk=job.pk).update(state="done")
    for timeout in ("-1", "nan"):
        with pytest.raises(CommandError, match=f"--timeout {timeout}: give 0 < seconds <= 600"):
            command("node_repin", engagement.name, "ctrl-01", "--fingerprint", new,
                    "--reason", "x", "--timeout", timeout)
    out = repin(f"256 {new} root@ctrl-01 (ED25519)")  # the console's whole ssh-keygen line
    assert out == (f"re-pinned ctrl-01 (127.0.0.1:{changed.port}): host key {old} -> "
                   f"{new} (ssh-ed25519)\n")
    node.refresh_from_db()
    assert node.host_key == changed.host_key.strip() and node.host_key_fingerprint == new
    entry = AuditEntry.objects.get(engagement=engagement, action="node host key re-pinned")
    assert (entry.actor, entry.reason) == ("eng-bob", "node re-installed (ticket 4711)")
    assert (entry.details["old_fingerprint"], entry.details["new_fingerprint"]) == (old, new)
    with pytest.raises(CommandError, match=re.escape(f"presents the pinned host key {new} "
                                                     "already")):
        repin(new)
    with SSHConnection(node.ssh_target()) as connection:  # the new pin connects
        assert connection.run("echo pinned", timeout=20).stdout == b"pinned\n"

def test_it_runs_a_gate_through_a_bastion_enrolled_first(lab, sshd, tmp_path):
    engagement, lab_server = lab("healthy")
    bastion_server = sshd("bastion", allow_tcp_forwarding=True)
    node_add(engagement.name, "bastion-1", bastion_server,
             lab_key_file(bastion_server, tmp_path),
             host_key_fingerprint(bastion_server.host_key), role="bastion")
    bastion = Node.objects.get(engagement=engagement, name="bastion-1")

    out = command("node_fingerprint", "127.0.0.1", "--port", str(lab_server.port),
                  "--via", "bastion-1", "--engagement", engagement.name)
    assert out.startswith(f"{host_key_fingerprint(lab_server.host_key)} (ED25519, ssh-ed25519) "
                          f"presented by 127.0.0.1:{lab_server.port} via bastion-1")
    # The array controller is re-enrolled behind the bastion; the inference node moved there.
    engagement.nodes.filter(name="lab-array-controller").delete()
    node_add(engagement.name, "array-controller", lab_server, lab_key_file(lab_server, tmp_path),
             host_key_fingerprint(lab_server.host_key), "--jump-host", "bastion-1")
    behind = Node.objects.get(engagement=engagement, name="array-controller")
    assert behind.jump_host == bastion
    assert repr(behind.ssh_target()).endswith(
        f"via SSHTarget('bastion-1', {bastion_server.user}@127.0.0.1:{bastion_server.port}))")
    inference = engagement.nodes.get(name="lab-inference-1")
    inference.jump_host = bastion
    inference.full_clean()
    inference.save()

    code, out, err = run_gate(engagement.name, "G1")
    assert code == 0, out + err
    run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    assert list(run.node_jobs.values_list("node__name", flat=True)) == [
        "array-controller"]  # a bastion takes no probes

    # The route really is the bastion: once its pinned key is wrong, G2 cannot run.
    Node.objects.filter(pk=bastion.pk).update(host_key=sshd("impostor").host_key)
    code, out, err = run_gate(engagement.name, "G2")
    assert code == 2
    job = NodeJob.objects.get(gate_run__gate__code="G2", gate_run__gate__engagement=engagement)
    assert job.error_kind == "host_key"
    assert job.error.startswith(f"jump host bastion-1 (127.0.0.1:{bastion_server.port}) for "
                                "lab-inference-1 presented host key")


def run_gate(engagement, gate):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement, gate, stdout=out, stderr=err)
    return exit_info.value.code, out.getvalue(), err.getvalue()


def test_it_refuses_jump_hosts_of_another_engagement_loops_and_long_chains(engagement, sshd):
    other = engagement_create(name="other-site", customer="ACME", start_date=date(2026, 12, 1))
    lab_server = sshd("node")
    credential = Credential.from_secret("k", lab_server.client_private_key)
    credential.save()

    def node(name, engagement=engagement, jump_host=None):
        return Node.objects.create(engagement=engagement, name=name, role="bastion",
                                   address="127.0.0.1", port=22, ssh_user="root",
                                   host_key=lab_server.host_key, credential=credential,
                                   jump_host=jump_host)

    def errors(candidate):
        with pytest.raises(ValidationError) as invalid:
            candidate.full_clean()
        return invalid.value.message_dict["jump_host"][0]

    foreign = node("foreign", engagement=other)
    assert errors(Node(engagement=engagement, name="n", role="array", address="10.0.0.1",
                       ssh_user="root", host_key=lab_server.host_key, credential=credential,
                       jump_host=foreign)) == (
        "jump host foreign belongs to another engagement (other-site)")
    a = node("a")
    b = node("b", jump_host=a)
    a.jump_host = b
    assert errors(a) == "jump host b leads back to a"
    a.jump_host = None
    c = node("c", jump_host=b)
    d = node("d", jump_host=c)
    e = Node(engagement=engagement, name="e", role="array", address="10.0.0.1",
             ssh_user="root", host_key=lab_server.host_key, credential=credential, jump_host=d)
    assert errors(e) == "e would sit behind more than 3 jump hosts"
    d.full_clean()  # three jump hosts are fine
