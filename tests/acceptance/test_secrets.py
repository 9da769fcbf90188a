"""No SSH private key, passphrase or credentials (Fernet) key is ever shown: not in log records
(paramiko and ours, at DEBUG), not in transport errors, reprs, the admin or command output."""

import io
import logging
from datetime import date

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError

from acceptance import crypto
from acceptance.models import Credential, Node, host_key_fingerprint
from gates.services import engagement_create
from runners.models import GateRun, NodeJob
from runners.transport import (
    AuthenticationFailed,
    SSHConnection,
    SSHTarget,
    TransportError,
    private_key_type,
)
from tests.acceptance.keys import keypair

PASSPHRASE = "correct horse 7f3a"


@pytest.fixture
def fernet_key(settings):
    """A credentials key of the test's own, so the test knows what must not be shown."""
    key = Fernet.generate_key().decode()
    crypto._fernet.cache_clear()
    settings.CREDENTIALS_KEY = key
    yield key
    crypto._fernet.cache_clear()


def assert_hidden(text: str, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in text, f"a secret ({secret[:6]}…) is shown"


def logged_text(caplog) -> str:
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        if record.exc_info:
            parts.append(logging.Formatter().formatException(record.exc_info))
        if record.exc_text:
            parts.append(record.exc_text)
    return "\n".join(parts)


@pytest.mark.slow
def test_it_never_logs_secrets_during_a_gate_run_and_a_failed_login(lab, caplog, fernet_key):
    from celery import current_app

    # Celery's Django fix-up runs django.setup() (settings.LOGGING again: levels reset, root's
    # handlers replaced, the capture's among them) when the task modules are first imported:
    # done first, the capture put back, so the DEBUG levels below hold through the runs.
    current_app.loader.import_default_modules()
    logging.getLogger().addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="paramiko")
    caplog.set_level(logging.DEBUG, logger="paramiko.transport")  # muted by the settings
    engagement, lab_server = lab("healthy")
    key = keypair(passphrase=PASSPHRASE)
    key.authorise_on(lab_server.directory)
    credential = Credential.from_secret("protected", key.private, PASSPHRASE)
    credential.save()
    engagement.nodes.update(credential=credential)
    secrets = [*key.secrets(), fernet_key, *keypair().secrets()]
    secrets += [line for line in lab_server.client_private_key.splitlines()
                if not line.startswith("-----")]

    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G1", stdout=out, stderr=err)
    assert exit_info.value.code == 0, out.getvalue() + err.getvalue()

    # A failed login: a key the node does not know, with its own passphrase.
    stranger = keypair(passphrase="battery staple 9c2e")
    secrets += [*stranger.secrets()]
    engagement.nodes.update(credential=Credential.objects.create(
        name="stranger", private_key_encrypted=crypto.encrypt(stranger.private),
        passphrase_encrypted=crypto.encrypt(stranger.passphrase)))
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=out, stderr=err)
    assert exit_info.value.code == 2
    job = NodeJob.objects.get(gate_run__gate__code="G2", gate_run__gate__engagement=engagement)
    assert job.error_kind == "authentication"
    with pytest.raises(AuthenticationFailed) as failed:
        with SSHConnection(engagement.nodes.first().ssh_target()):
            pass

    paramiko_records = [r for r in caplog.records if r.name.startswith("paramiko")]
    assert len(paramiko_records) > 20  # DEBUG logging really was on
    stored = [job.error, *GateRun.objects.values_list("error", flat=True),
              *NodeJob.objects.values_list("error", flat=True)]
    assert_hidden("\n".join([logged_text(caplog), out.getvalue(), err.getvalue(),
                             str(failed.value), repr(failed.value), *stored]), secrets)


def test_it_keeps_secrets_out_of_reprs_and_transport_errors(db, fernet_key):
    key = keypair(passphrase=PASSPHRASE)
    jump = SSHTarget("bastion-1", "127.0.0.1", 2, "root", "ssh-ed25519 AAAA", key.private,
                     PASSPHRASE)
    target = SSHTarget("node-1", "10.0.0.5", 22, "root", "ssh-ed25519 AAAA", key.private,
                       PASSPHRASE, via=jump)
    credential = Credential.from_secret("node-key", key.private, PASSPHRASE)
    shown = [repr(target), str(target), repr(credential), str(credential)]
    assert repr(target) == ("SSHTarget('node-1', root@10.0.0.5:22 via "
                            "SSHTarget('bastion-1', root@127.0.0.1:2))")

    wrong = SSHTarget("node-1", "127.0.0.1", 1, "root", "ssh-ed25519 AAAA", key.private,
                      "battery staple 9c2e")
    for broken in (wrong, SSHTarget("node-1", "127.0.0.1", 1, "root", "ssh-ed25519 AAAA",
                                    key.private)):
        with pytest.raises(TransportError) as failed:
            SSHConnection(broken).__enter__()
        shown += [str(failed.value), repr(failed.value)]
    with pytest.raises(AuthenticationFailed) as failed:
        private_key_type(key.private[:200])
    shown += [str(failed.value)]
    assert "needs a passphrase" in "\n".join(shown)
    assert_hidden("\n".join(shown), [*key.secrets(), "battery staple 9c2e", fernet_key])


def test_it_keeps_the_private_key_out_of_the_admin(admin_client, fernet_key):
    key = keypair(passphrase=PASSPHRASE)
    credential = Credential.from_secret("node-key", key.private, PASSPHRASE)
    credential.save()
    engagement = engagement_create(name="acme-sh1", customer="ACME", start_date=date(2026, 1, 5))
    host_key = keypair().public
    node = Node.objects.create(engagement=engagement, name="gpu-01", role="inference",
                               address="10.0.0.5", ssh_user="root", host_key=host_key,
                               credential=credential)
    token = bytes(credential.private_key_encrypted).decode()
    pages = [
        "/admin/acceptance/credential/", f"/admin/acceptance/credential/{credential.pk}/change/",
        f"/admin/acceptance/credential/{credential.pk}/history/",
        f"/admin/acceptance/credential/{credential.pk}/delete/",
        "/admin/acceptance/node/", f"/admin/acceptance/node/{node.pk}/change/",
        "/admin/acceptance/node/add/",
    ]
    html = []
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html.append(response.content.decode())
    assert "node-key" in html[1] and host_key_fingerprint(host_key) in html[4]
    assert_hidden("\n".join(html), [*key.secrets(), fernet_key, token])


@pytest.mark.slow
def test_it_keeps_secrets_out_of_command_output(db, sshd, tmp_path, monkeypatch, fernet_key):
    engagement = engagement_create(name="acme-sh1", customer="ACME", start_date=date(2026, 1, 5))
    node_server = sshd("node")
    key = keypair(passphrase=PASSPHRASE)
    key.authorise_on(node_server.directory)
    key_file = key.write(tmp_path / "id")
    monkeypatch.setenv("NODE_KEY_PASSPHRASE", PASSPHRASE)
    fingerprint = host_key_fingerprint(node_server.host_key)
    shown = []

    def node_add(name, *extra):
        out, err = io.StringIO(), io.StringIO()
        try:
            call_command("node_add", engagement.name, name, "--role", "array",
                         "--address", "127.0.0.1", "--port", str(node_server.port),
                         "--user", node_server.user, "--key-file", str(key_file),
                         "--passphrase-env", "NODE_KEY_PASSPHRASE", *extra,
                         stdout=out, stderr=err)
        except CommandError as error:
            shown.append(str(error))
        shown.extend([out.getvalue(), err.getvalue()])

    node_add("refused", "--fingerprint", "SHA256:not-the-one")
    node_add("bad-fields", "--fingerprint", fingerprint, "--interface", "x" * 30)
    node_add("enrolled", "--fingerprint", fingerprint)
    out = io.StringIO()
    call_command("node_fingerprint", "127.0.0.1", "--port", str(node_server.port), stdout=out)
    shown.append(out.getvalue())
    text = "\n".join(shown)
    assert "refused: refused (127.0.0.1:" in text and "host key pinned:" in text
    assert_hidden(text, [*key.secrets(), fernet_key])
