"""Registering a node from the browser, in two steps, against a real sshd on 127.0.0.1: the
page reads and shows the host key's fingerprint; the engineer types what the node's console
printed; a different fingerprint is refused and nothing is stored; the private key and its
passphrase are never sent back into a page."""

import logging
import re
from datetime import date

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from acceptance.models import AuditEntry, Credential, Node, host_key_fingerprint
from gates.services import engagement_create
from runners.lab import server
from runners.lab.scenarios import scenario
from tests.acceptance.keys import keypair

pytestmark = pytest.mark.slow

PASSPHRASE = "correct horse 7f3a"


@pytest.fixture
def node_server(transactional_db):
    """A real sshd (the lab's server) standing in for the customer's gpu-01."""
    return server.server_start(settings.LAB_DIR / "gpu-01", scenario=scenario("healthy"))


@pytest.fixture
def engagement(transactional_db):
    return engagement_create(name="acme-sh1", customer="ACME", start_date=date(2026, 11, 30))


def read_host_key(client, engagement, node_server):
    response = client.post(reverse("node-register", args=[engagement.name]),
                           {"step": "fetch", "address": node_server.address,
                            "port": node_server.port})
    assert response.status_code == 200
    html = response.content.decode()
    token = re.search(r'name="host_key_token" value="([^"]+)"', html).group(1)
    return html, token


def enrol(client, engagement, token, fingerprint, key_text, **fields):
    data = {"step": "enrol", "host_key_token": token, "fingerprint": fingerprint,
            "name": "gpu-01", "role": "inference", "ssh_user": fields.pop("user", None),
            "interface": "ens1f0", "fio_target": "/dev/nvme1n1",
            "private_key": SimpleUploadedFile("id_ed25519", key_text.encode()), **fields}
    return client.post(reverse("node-register", args=[engagement.name]), data)


def stored():
    return (Node.objects.count(), Credential.objects.count(),
            AuditEntry.objects.filter(action="node enrolled").count())


def test_it_shows_the_fingerprint_then_enrols_when_the_console_agrees(
        engagement, node_server, people):
    engineer = people("ACME").engineer
    presented = host_key_fingerprint(node_server.host_key)

    html, token = read_host_key(engineer.client, engagement, node_server)

    assert f'id="presented-fingerprint">{presented}' in html
    assert "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub" in html
    assert stored() == (0, 0, 0)  # step one stores nothing
    # A whole ssh-keygen -lf line pasted from the console is fine.
    console_line = f"256 {presented} root@gpu-01 (ED25519)"
    response = enrol(engineer.client, engagement, token, console_line,
                     node_server.client_private_key, user=node_server.user)

    assert response.status_code == 302
    assert response["Location"] == reverse("node-list", args=[engagement.name])
    node = Node.objects.get(engagement=engagement, name="gpu-01")
    assert node.host_key_fingerprint == presented and node.port == node_server.port
    assert node.credential.private_key() == node_server.client_private_key
    entry = AuditEntry.objects.get(engagement=engagement, action="node enrolled")
    assert entry.actor == "eng-erin"
    listing = engineer.client.get(response["Location"]).content.decode()
    assert presented in listing and "gpu-01" in listing
    assert "Enrolled gpu-01" in listing
    for line in node_server.client_private_key.splitlines()[1:-1]:
        assert line not in listing


def test_a_wrong_fingerprint_is_refused_and_nothing_is_stored(engagement, node_server, people):
    engineer = people("ACME").engineer
    _html, token = read_host_key(engineer.client, engagement, node_server)
    other = host_key_fingerprint(server.keypair()[1])  # another machine's key

    response = enrol(engineer.client, engagement, token, other,
                     node_server.client_private_key, user=node_server.user)

    html = response.content.decode()
    assert response.status_code == 200
    assert "Refused, nothing was stored" in html and f"not the confirmed {other}" in html
    assert stored() == (0, 0, 0)
    for line in node_server.client_private_key.splitlines()[1:-1]:
        assert line not in html  # the key is never echoed back


def test_bad_fields_are_named_and_secrets_are_not_echoed_nor_logged(
        engagement, node_server, people, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="paramiko")
    caplog.set_level(logging.DEBUG, logger="paramiko.transport")  # muted by the settings
    engineer = people("ACME").engineer
    key = keypair(passphrase=PASSPHRASE)
    key.authorise_on(node_server.directory)
    _html, token = read_host_key(engineer.client, engagement, node_server)
    presented = host_key_fingerprint(node_server.host_key)

    response = enrol(engineer.client, engagement, token, "the one on the screen", key.private,
                     user="Root!", passphrase="not the passphrase", interface="eth 0")

    html = response.content.decode()
    assert "Type or paste the SHA256:… fingerprint" in html
    assert "a POSIX user name" in html
    assert "a Linux interface name" in html
    assert "does not open as an Ed25519, ECDSA or RSA private key" in html
    assert "not the passphrase" not in html
    assert stored() == (0, 0, 0)

    # With the passphrase it opens, logs in and is enrolled; the passphrase is stored encrypted.
    response = enrol(engineer.client, engagement, token, presented, key.private,
                     user=node_server.user, passphrase=PASSPHRASE)
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Node.objects.get(name="gpu-01").credential.passphrase() == PASSPHRASE
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in key.secrets():
        assert secret not in logged


def test_a_key_the_node_does_not_accept_is_refused_at_the_login_check(
        engagement, node_server, people):
    engineer = people("ACME").engineer
    _html, token = read_host_key(engineer.client, engagement, node_server)
    stranger = keypair()  # a valid key, but not authorised on the node

    response = enrol(engineer.client, engagement, token,
                     host_key_fingerprint(node_server.host_key), stranger.private,
                     user=node_server.user)

    assert b"the login check failed (authentication)" in response.content
    assert stored() == (0, 0, 0)


def test_a_forged_or_foreign_host_key_token_is_refused(engagement, node_server, people):
    engineer = people("ACME").engineer
    _html, token = read_host_key(engineer.client, engagement, node_server)

    response = enrol(engineer.client, engagement, token[:-3] + "xyz",
                     host_key_fingerprint(node_server.host_key),
                     node_server.client_private_key, user=node_server.user)

    assert b"was not read by this service" in response.content
    assert b'value="fetch"' in response.content  # back to step one
    assert stored() == (0, 0, 0)


def test_an_unreachable_node_is_a_clear_error(engagement, people):
    engineer = people("ACME").engineer
    response = engineer.client.post(reverse("node-register", args=[engagement.name]),
                                    {"step": "fetch", "address": "127.0.0.1",
                                     "port": server.free_port()})
    assert b"Cannot read the host key" in response.content
    bad = engineer.client.post(reverse("node-register", args=[engagement.name]),
                               {"step": "fetch", "address": "no spaces!", "port": 70000})
    assert b"a host name or IP address" in bad.content
    assert b"Ensure this value is less than or equal to 65535" in bad.content


def test_a_changed_host_key_is_re_pinned_from_the_nodes_page_once_confirmed(
        engagement, node_server, people):
    """The node was re-installed: the page shows both fingerprints, refuses a fingerprint that
    is not the one presented and a blank reason (nothing changed), then pins the new key with
    the reason in the audit trail. A customer may not re-pin."""
    crew = people("ACME")
    engineer = crew.engineer
    presented = host_key_fingerprint(node_server.host_key)
    _html, token = read_host_key(engineer.client, engagement, node_server)
    assert enrol(engineer.client, engagement, token, presented, node_server.client_private_key,
                 user=node_server.user).status_code == 302
    authorised = (node_server.directory / "authorized_keys").read_text().strip()
    changed = server.server_start(node_server.directory, scenario=scenario("healthy"),
                                  client_key=(node_server.client_private_key, authorised))
    Node.objects.filter(engagement=engagement).update(port=changed.port)  # lab: a new port
    new = host_key_fingerprint(changed.host_key)
    url = reverse("node-repin", args=[engagement.name, "gpu-01"])

    listing = engineer.client.get(reverse("node-list", args=[engagement.name])).content.decode()
    assert f'href="{url}"' in listing
    assert crew.customer.client.get(url).status_code == 403
    page = engineer.client.get(url).content.decode()
    assert f'id="pinned-fingerprint">{presented}' in page
    html = engineer.client.post(url, {"step": "fetch"}).content.decode()
    assert f'id="presented-fingerprint">{new}' in html
    token = re.search(r'name="host_key_token" value="([^"]+)"', html).group(1)

    def repin(fingerprint, reason):
        return engineer.client.post(url, {"step": "repin", "host_key_token": token,
                                          "fingerprint": fingerprint, "reason": reason})

    stranger = host_key_fingerprint(server.keypair()[1])
    refused = repin(stranger, "re-installed").content.decode()
    assert "Refused, nothing was changed" in refused and f"not the confirmed {stranger}" in refused
    assert "Give a reason: it is recorded in the audit trail." in repin(new, " ").content.decode()
    forged = engineer.client.post(url, {"step": "repin", "host_key_token": token + "x",
                                        "fingerprint": new, "reason": "x"}).content.decode()
    assert "The host key shown was not read by this service" in forged
    assert Node.objects.get(name="gpu-01").host_key_fingerprint == presented
    assert not AuditEntry.objects.filter(action="node host key re-pinned").exists()

    response = repin(f"256 {new} root@gpu-01 (ED25519)", "re-installed (ticket 4711)")
    assert response.status_code == 302 and response["Location"] == reverse(
        "node-list", args=[engagement.name])
    assert Node.objects.get(name="gpu-01").host_key_fingerprint == new
    entry = AuditEntry.objects.get(action="node host key re-pinned")
    assert (entry.actor, entry.reason, entry.details["old_fingerprint"],
            entry.details["new_fingerprint"]) == ("eng-erin", "re-installed (ticket 4711)",
                                                   presented, new)
    listing = engineer.client.get(response["Location"]).content.decode()
    assert f"Re-pinned gpu-01: host key {presented} replaced by {new}" in listing
    # the engagement page's audit trail shows both fingerprints
    trail = crew.manager.client.get(reverse("engagement-detail", args=[engagement.name]))
    assert f"gpu-01 · {presented} → {new}" in trail.content.decode()
    # Read again now: the node presents the pinned key, nothing to re-pin.
    again = engineer.client.post(url, {"step": "fetch"}).content.decode()
    assert "presents the pinned host key: nothing to re-pin." in again
