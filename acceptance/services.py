"""The engagement domain's workflows: enrolling nodes, ticking the bill of materials, re-opening
a stopped engagement.

Enrolling a customer's nodes: trust on confirmation, never on first use.

``host_key_fetch`` reads the host key a node presents (without logging in); ``node_enrol`` pins
it only when the fingerprint an engineer read on the node's own console
(``ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub``) is that key's. From then on the transport
refuses any other key (``HostKeyRejected``). The node's private key is stored encrypted
(``Credential``); nothing here ever prints or logs it.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from acceptance.models import (
    AuditEntry,
    BomItem,
    Credential,
    Engagement,
    Node,
    host_key_fingerprint,
)
from runners.transport import SSHConnection, TransportError, host_key_presented


class EnrolmentRefused(Exception):
    """The node was not enrolled: the fingerprint confirmed is not the key it presents."""


def host_key_fetch(*, address: str, port: int, via: Node | None = None,
                   timeout: float = 10) -> str:
    """The public host key line (``"ssh-ed25519 AAAA…"``) ``address:port`` presents, read
    without authenticating (Ed25519 preferred), through the enrolled jump host ``via`` if given.

    Raises the transport's error (Unreachable, or HostKeyRejected / AuthenticationFailed for
    the jump host) with a message naming the hop that failed.
    """
    return host_key_presented(address, port, via=via.ssh_target() if via else None,
                              timeout=timeout)


def node_fields_check(*, engagement: Engagement, name: str, role: str, address: str, port: int,
                      ssh_user: str, jump_host: Node | None = None, **fields) -> None:
    """Validate a node's fields before its host key is fetched (ValidationError)."""
    node = Node(engagement=engagement, name=name, role=role, address=address, port=port,
                ssh_user=ssh_user, jump_host=jump_host, **fields)
    node.full_clean(exclude=["host_key", "host_key_fingerprint", "credential"])


def _login_check(node: Node, outcome: str = "not enrolled") -> None:
    """Log in with the node's credential over its pinned key and run ``true``."""
    try:
        with SSHConnection(node.ssh_target()) as connection:
            result = connection.run("true", timeout=30)
    except TransportError as error:
        raise EnrolmentRefused(f"{node.name}: the login check failed ({error.kind}): {error}; "
                               f"{outcome}") from None
    if result.exit_code != 0:
        raise EnrolmentRefused(f"{node.name}: logged in, but 'true' exited {result.exit_code}; "
                               f"{outcome}")


def _key_confirmed(host_key: str, confirmed_fingerprint: str, *, where: str,
                   outcome: str) -> tuple[str, str]:
    """The fingerprint and type of ``host_key`` when ``confirmed_fingerprint`` (read on the
    node's console) is its fingerprint; EnrolmentRefused showing both, and ``outcome``,
    otherwise."""
    presented = host_key_fingerprint(host_key)
    key_type = host_key.split()[0]
    confirmed = confirmed_fingerprint.strip()
    if confirmed != presented:
        raise EnrolmentRefused(
            f"{where} presents host key {presented} ({key_type}), not the confirmed "
            f"{confirmed or '(none given)'}: {outcome}. Compare with 'ssh-keygen -lf' of the "
            "node's host key file (by default /etc/ssh/ssh_host_ed25519_key.pub) on its own "
            "console; a different key may mean another machine answers at that address.")
    return presented, key_type


@transaction.atomic
def node_enrol(*, engagement: Engagement, name: str, role: str, address: str, port: int,
               ssh_user: str, credential: Credential, host_key: str, confirmed_fingerprint: str,
               jump_host: Node | None = None, actor: str = "", verify_login: bool = True,
               **fields) -> Node:
    """Create the node with ``host_key`` pinned, if ``confirmed_fingerprint`` is its fingerprint.

    ``credential`` may be unsaved (it is saved with the node, or not at all). Raises
    EnrolmentRefused when the fingerprints differ (the message shows both) or, with
    ``verify_login``, when the credential does not log in (checked with ``true`` over the pinned
    connection), and ValidationError for bad fields. The enrolment is recorded in the
    engagement's audit trail.
    """
    presented, key_type = _key_confirmed(host_key, confirmed_fingerprint,
                                         where=f"{name} ({address}:{port})",
                                         outcome="not enrolled")
    node = Node(engagement=engagement, name=name, role=role, address=address, port=port,
                ssh_user=ssh_user, credential=credential, host_key=host_key.strip(),
                host_key_fingerprint=presented, jump_host=jump_host, **fields)
    if verify_login:
        _login_check(node)
    if credential.pk is None:
        credential.full_clean()
        credential.save()
    node.credential = credential
    node.full_clean()
    node.save()
    where = f"{address}:{port}" + (f" via {jump_host.name}" if jump_host else "")
    AuditEntry.objects.create(
        engagement=engagement, actor=actor or "unknown", action="node enrolled",
        reason=f"{name} ({where}): host key {presented} confirmed against the node's console",
        details={"node": name, "role": role, "address": address, "port": port,
                 "host_key_fingerprint": presented, "key_type": key_type,
                 "jump_host": jump_host.name if jump_host else None,
                 "credential": credential.name},
    )
    return node



# A node job in these states holds a connection to its node (runners.models.NodeJob.ACTIVE;
# the engagement domain does not import the dispatcher's models).
_NODE_IN_USE_STATES = ("connecting", "running")


@transaction.atomic
def node_host_key_repin(*, node: Node, host_key: str, confirmed_fingerprint: str, actor: str,
                        reason: str, verify_login: bool = True) -> Node:
    """Pin ``host_key`` — the key ``node`` presents now — in place of its pinned key, when the
    node legitimately changed it (re-installed, keys rotated): only if ``confirmed_fingerprint``
    is its fingerprint as read on the node's console, with a reason, and (``verify_login``) its
    credential logs in over the new key. The old and new fingerprints and the reason go into the
    audit trail. Connections kept for the old key are never reused for the new one (the SSH
    pool's key holds the pinned key).

    Raises EnrolmentRefused, with nothing changed, when the reason is blank, the fingerprints
    differ, the key is the one pinned already, a gate run is using the node, or the login check
    fails."""
    reason = (reason or "").strip()
    node = Node.objects.select_for_update().select_related("engagement").get(pk=node.pk)
    pinned = node.host_key_fingerprint
    if not reason:
        raise EnrolmentRefused(f"{node.name}: re-pinning its host key needs a reason (it is "
                               f"recorded in the audit trail); the pinned key stays {pinned}")
    presented, key_type = _key_confirmed(host_key, confirmed_fingerprint,
                                         where=f"{node.name} ({node.address}:{node.port})",
                                         outcome=f"the pinned key stays {pinned}")
    if presented == pinned:
        raise EnrolmentRefused(f"{node.name} presents the pinned host key {pinned} already: "
                               "nothing to re-pin")
    if node.jobs.filter(state__in=_NODE_IN_USE_STATES).exists():
        raise EnrolmentRefused(f"{node.name}: a gate run is using the node now; re-pin its host "
                               f"key once the run has ended (the pinned key stays {pinned})")
    node.host_key = host_key.strip()
    if verify_login:
        _login_check(node, outcome=f"the pinned key stays {pinned}")
    node.full_clean()
    node.save(update_fields=["host_key", "host_key_fingerprint"])
    AuditEntry.objects.create(
        engagement=node.engagement, actor=actor or "unknown", action="node host key re-pinned",
        reason=reason,
        details={"node": node.name, "address": node.address, "port": node.port,
                 "old_fingerprint": pinned, "new_fingerprint": presented,
                 "key_type": key_type},
    )
    return node

def validation_text(error: ValidationError) -> str:
    """``field: message; field: message`` — for commands."""
    if hasattr(error, "error_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" if field != "__all__"
                         else " ".join(messages)
                         for field, messages in error.message_dict.items())
    return " ".join(error.messages)


@transaction.atomic
def engagement_reopen(*, engagement: Engagement, actor: str, reason: str) -> Engagement:
    """Re-open a stopped engagement: its stopped gate goes back to pending, the reason is
    recorded in the audit trail. ValueError if it is not stopped or the reason is blank."""
    if not reason or not reason.strip():
        raise ValueError(_("re-opening a stopped engagement needs a reason"))
    if engagement.state != Engagement.State.STOPPED:
        raise ValueError(_("engagement %(name)s is %(state)s, not stopped") % {
            "name": engagement.name, "state": _(engagement.state)})
    # The engagement's gates through their relation: the engagement domain sits below gates/.
    stopped_gates = engagement.gates.filter(state="stopped")
    stopped = list(stopped_gates.values_list("code", flat=True))
    stopped_gates.update(state="pending")
    AuditEntry.objects.create(
        engagement=engagement, actor=actor, action="engagement re-opened", reason=reason.strip(),
        details={"stopped_gates": stopped, "stopped_reason": engagement.stopped_reason},
    )
    engagement.state = Engagement.State.ACTIVE
    engagement.stopped_reason = ""
    engagement.save(update_fields=["state", "stopped_reason"])
    return engagement


def bom_item_tick(*, item: BomItem, actor: str) -> BomItem:
    """Tick a bill-of-materials item as delivered and checked by ``actor`` (now). Ticking an
    item already ticked changes nothing (the first tick's who and when stay). ValueError when
    the engagement is accepted."""
    if item.engagement.state == Engagement.State.ACCEPTED:
        raise ValueError(_("engagement %(name)s is accepted; its BOM is final") % {
            "name": item.engagement.name})
    BomItem.objects.filter(pk=item.pk, ticked_at__isnull=True).update(
        ticked_by=actor, ticked_at=timezone.now())
    item.refresh_from_db(fields=["ticked_by", "ticked_at"])
    return item
