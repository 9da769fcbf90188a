"""``manage.py node_fingerprint ADDRESS [--port P] [--via NODE]``: the host key a node presents.

Prints its SHA256 fingerprint and key type without logging in, for the engineer to compare with
the node's own console (``ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub``) before enrolling
it with ``node_add … --fingerprint SHA256:…``. ``--via`` reads it through an enrolled jump host.
Exit status 0 read, 1 with ``CommandError: …`` when it could not be read.
"""

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Node, host_key_fingerprint
from acceptance.services import host_key_fetch
from runners.transport import TransportError

# ssh-keygen's name for a key type, and where the node keeps that public key.
CONSOLE_NAMES = {
    "ssh-ed25519": ("ED25519", "/etc/ssh/ssh_host_ed25519_key.pub"),
    "ssh-rsa": ("RSA", "/etc/ssh/ssh_host_rsa_key.pub"),
}


def console_name(key_type: str) -> tuple[str, str]:
    if key_type.startswith("ecdsa-"):
        return "ECDSA", "/etc/ssh/ssh_host_ecdsa_key.pub"
    return CONSOLE_NAMES.get(key_type, (key_type, "/etc/ssh/ssh_host_*_key.pub"))


def via_node(name: str, engagement: str | None) -> Node:
    """The enrolled node ``name`` (in ``engagement`` when given); CommandError otherwise."""
    nodes = Node.objects.filter(name=name).select_related("engagement")
    if engagement:
        nodes = nodes.filter(engagement__name=engagement)
    found = list(nodes[:10])
    if not found:
        where = f" in engagement {engagement}" if engagement else ""
        raise CommandError(f"no enrolled node named {name!r}{where}")
    if len(found) > 1:
        names = ", ".join(sorted(n.engagement.name for n in found))
        raise CommandError(f"node {name!r} is in several engagements ({names}): "
                           "give --engagement")
    return found[0]


class Command(BaseCommand):
    help = "Print the SHA256 fingerprint and key type of the SSH host key a node presents."

    def add_arguments(self, parser):
        parser.add_argument("address", help="host name or IP address of the node")
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--via", metavar="NODE",
                            help="read it through this enrolled jump host (bastion)")
        parser.add_argument("--engagement", help="the engagement of the --via node")
        parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")

    def handle(self, *args, address, port, via, engagement, timeout, **options):
        if not 1 <= port <= 65535:
            raise CommandError(f"--port {port}: a TCP port is 1 … 65535")
        if not 0 < timeout <= 600:
            raise CommandError(f"--timeout {timeout:g}: give 0 < seconds <= 600")
        jump = via_node(via, engagement) if via else None
        try:
            line = host_key_fetch(address=address, port=port, via=jump, timeout=timeout)
        except TransportError as error:
            raise CommandError(f"cannot read the host key of {address}:{port}: {error}") from None
        key_type = line.split()[0]
        name, path = console_name(key_type)
        where = f"{address}:{port}" + (f" via {jump.name}" if jump else "")
        self.stdout.write(f"{host_key_fingerprint(line)} ({name}, {key_type}) presented by "
                          f"{where}")
        self.stdout.write(f"compare on the node's console: ssh-keygen -lf {path}")
