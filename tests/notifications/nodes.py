"""A node row for an engagement (a real key pair, no SSH server): enough for ledger rows."""

from __future__ import annotations

from acceptance.models import Credential, Node
from tests.acceptance.keys import keypair


def node_of(engagement, name: str = "array-1") -> Node:
    pair = keypair()
    credential = Credential.from_secret(f"{engagement.name}-{name}", pair.private)
    credential.save()
    return Node.objects.create(engagement=engagement, name=name, role=Node.Role.ARRAY,
                               address="127.0.0.1", port=2222, ssh_user="acceptance",
                               host_key=pair.public, credential=credential)
