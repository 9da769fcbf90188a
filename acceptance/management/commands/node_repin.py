"""``manage.py node_repin ENGAGEMENT NAME --fingerprint SHA256:… --reason "…"``: pin the host
key an enrolled node presents now, in place of its pinned key (the node was re-installed or its
keys rotated).

The key is read from the node (through its jump host, if it has one) and pinned only if its
fingerprint is the one given, as read on the node's console (``node_fingerprint ADDRESS`` shows
it first), and the node's credential logs in over it. The old and new fingerprints and the reason
go into the engagement's audit trail. Exit status 0 re-pinned, 1 with ``CommandError: …`` (bad
input, unreachable, a fingerprint that does not match, the key pinned already, a run using the
node, or a failed login); nothing is changed then.
"""

import getpass

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from acceptance.services import EnrolmentRefused, host_key_fetch, node_host_key_repin
from runners.forms import fingerprint_from
from runners.transport import TransportError


class Command(BaseCommand):
    help = "Re-pin an enrolled node's host key: the key it presents now, confirmed, with a reason."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("name", help="the node's name in the engagement")
        parser.add_argument("--fingerprint", required=True, metavar="SHA256:…",
                            help="the new host key's fingerprint as read on the node's console")
        parser.add_argument("--reason", required=True,
                            help="why the key changed (recorded in the audit trail)")
        parser.add_argument("--actor", default=getpass.getuser(), help="who re-pins (recorded)")
        parser.add_argument("--timeout", type=float, default=10.0,
                            help="seconds to wait for the node (default 10)")

    def handle(self, *args, engagement, name, fingerprint, reason, actor, timeout, **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            raise CommandError(f"no engagement named {engagement!r}")
        node = found.nodes.select_related("jump_host").filter(name=name).first()
        if node is None:
            known = ", ".join(found.nodes.order_by("name").values_list("name", flat=True))
            raise CommandError(f"engagement {found.name} has no node named {name!r} "
                               f"(its nodes: {known or 'none'})")
        if not reason.strip():
            raise CommandError("--reason is blank: say why the host key changed (it is recorded "
                               "in the audit trail)")
        if not 0 < timeout <= 600:
            raise CommandError(f"--timeout {timeout:g}: give 0 < seconds <= 600")
        # a whole `ssh-keygen -lf` line from the console is fine, as on the page
        fingerprint = fingerprint_from(fingerprint) or fingerprint
        try:
            host_key = host_key_fetch(address=node.address, port=node.port, via=node.jump_host,
                                      timeout=timeout)
        except TransportError as error:
            raise CommandError(f"not re-pinned: cannot read the host key: {error}") from None
        old = node.host_key_fingerprint
        try:
            node = node_host_key_repin(node=node, host_key=host_key,
                                       confirmed_fingerprint=fingerprint, actor=actor,
                                       reason=reason)
        except EnrolmentRefused as refusal:
            raise CommandError(f"refused: {refusal}") from None
        self.stdout.write(f"re-pinned {node.name} ({node.address}:{node.port}): host key "
                          f"{old} -> {node.host_key_fingerprint} ({node.host_key.split()[0]})")
