"""A node that does not answer never stalls the collection of the others: its reads run in
their own thread with its own timeouts, its collection gap opens, and the other nodes' windows
are stored in the same tick. The silent node is a real loopback listener that accepts and never
speaks (a hung sshd); the stopped node is a loopback port nothing listens on (sshd stopped)."""

import socket
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from acceptance.models import Credential
from acceptance.models import Node as NodeRow
from runners.soak.collection import soak_collect_all
from runners.soak.models import CollectionGap, Soak, SoakAgent, SoakWindow
from runners.soak.nodes import NodePool

from .pages_fixtures import soak_engagement
from .test_incremental import Node, window_line


class Pool(NodePool):
    """The healthy node answers from its agent files; every other node goes over real SSH."""

    def __init__(self, healthy: NodeRow):
        super().__init__()
        self.healthy, self.fake = healthy, Node()

    def run(self, node, command, timeout=60):
        if node.id == self.healthy.id:
            return self.fake.run(node, command, timeout)
        return super().run(node, command, timeout)


@pytest.fixture
def two_nodes(db):
    _engagement, gate, _array, healthy = soak_engagement()
    other = NodeRow.objects.get(pk=healthy.pk)
    key = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()
    credential = Credential.from_secret("acme-soak-key-2", key)
    credential.save()
    other.pk, other.name, other.credential = None, "lab-inference-2", credential
    other.save()
    soak = Soak.objects.create(gate_run=gate.runs.create(attempt=1, started_by="eng-erin"),
                               plan=gate.probe_plan[0]["soak"], plan_sha256="x",
                               state=Soak.State.RUNNING)
    for node in (healthy, other):
        SoakAgent.objects.create(soak=soak, node=node, remote_dir=f"/tmp/soak-x/{node.name}",
                                 token="t", state="running", simulated=True)
    pool = Pool(healthy)
    pool.fake.files["windows.jsonl"] = b"".join(window_line(i) for i in range(1, 4))
    yield soak, healthy, other, pool
    pool.close()


def test_a_silent_node_does_not_stall_the_others(two_nodes, settings):
    soak, healthy, other, pool = two_nodes
    settings.SSH_CONNECT_TIMEOUT, settings.SSH_CONNECT_RETRIES = 8.0, 0
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(4)  # accepts, never sends a banner
    NodeRow.objects.filter(pk=other.pk).update(port=hung.getsockname()[1])
    try:
        started = time.monotonic()
        finished = soak_collect_all(soak=soak, nodes=pool, wait_s=1.0)
        took = time.monotonic() - started
        assert not finished and took < 6.0  # bounded by the wait, not by the silent node
        assert SoakWindow.objects.filter(soak=soak, node=healthy).count() == 3
        gap = CollectionGap.objects.get(soak=soak, node=other, ended_at__isnull=True)
        assert "did not answer within 1 s" in gap.reason
        # The next tick does not start a second read of the silent node; the healthy one goes
        # on being collected.
        pool.fake.files["windows.jsonl"] += window_line(4)
        soak_collect_all(soak=soak, nodes=pool, wait_s=0.5)
        assert SoakWindow.objects.filter(soak=soak, node=healthy).count() == 4
        assert len(pool.pending) == 1
        assert CollectionGap.objects.filter(soak=soak, node=other).count() == 1
    finally:
        hung.close()
    # Once its read ends (the connect timeout), the failure is recorded as the node's.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(f.done() for f in pool.pending.values()):
        time.sleep(0.2)
    soak_collect_all(soak=soak, nodes=pool, wait_s=0.5)
    assert not pool.pending  # its ended read was taken; the next tick reads it afresh
    assert CollectionGap.objects.filter(soak=soak, node=other, ended_at__isnull=True).count() == 1
    assert not CollectionGap.objects.filter(soak=soak, node=healthy).exists()


def test_a_stopped_sshd_opens_its_nodes_gap_and_the_others_are_collected(two_nodes):
    soak, healthy, other, pool = two_nodes
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there any more
    NodeRow.objects.filter(pk=other.pk).update(port=port)
    assert soak_collect_all(soak=soak, nodes=pool, wait_s=10.0) is False
    assert SoakWindow.objects.filter(soak=soak, node=healthy).count() == 3
    gap = CollectionGap.objects.get(soak=soak, node=other)
    assert gap.reason.startswith("lab-inference-2 unreachable:") and gap.ended_at is None
    assert not pool.pending
