"""``manage.py node_add ENGAGEMENT NAME --role R --address A --port P --user U --key-file PATH
--fingerprint SHA256:… [--passphrase-env VAR] [--jump-host NODE] [--interface IF]
[--fio-target PATH] [--sudo]``: enrol a node with its host key pinned.

The host key is read from the node (through ``--jump-host`` if given) and pinned only if its
fingerprint is the one given, as read on the node's console (``node_fingerprint`` shows it
first). The private key is stored encrypted; its passphrase is read from the environment
variable named by ``--passphrase-env``, never from the command line. Exit status 0 enrolled,
1 with ``CommandError: …`` (bad input, unreachable, or a fingerprint that does not match).
"""

import getpass
import os
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from acceptance.management.commands.node_fingerprint import via_node
from acceptance.models import Credential, Engagement, Node
from acceptance.services import (
    EnrolmentRefused,
    host_key_fetch,
    node_enrol,
    node_fields_check,
    validation_text,
)
from runners.transport import AuthenticationFailed, TransportError, private_key_type


class Command(BaseCommand):
    help = "Enrol a node: pin its confirmed host key and store its SSH key encrypted."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("name", help="the node's name in the engagement")
        parser.add_argument("--role", required=True, choices=Node.Role.values)
        parser.add_argument("--address", required=True,
                            help="host name or IP address (as the jump host sees it, if any)")
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user", required=True, help="SSH user on the node")
        parser.add_argument("--key-file", required=True, type=Path,
                            help="OpenSSH private key file (stored encrypted)")
        parser.add_argument("--passphrase-env", metavar="VAR",
                            help="name of the environment variable holding the key's passphrase")
        parser.add_argument("--fingerprint", required=True, metavar="SHA256:…",
                            help="the host key fingerprint read on the node's console")
        parser.add_argument("--jump-host", metavar="NODE",
                            help="an enrolled node of the engagement to connect through")
        parser.add_argument("--array", metavar="SERIAL", default="",
                            help="serial number of the engagement's array this node belongs to "
                                 "(an array controller of an engagement with one array: that "
                                 "one by default)")
        parser.add_argument("--interface", default="")
        parser.add_argument("--fio-target", default="")
        parser.add_argument("--sudo", action="store_true", help="run probes with sudo -n")
        parser.add_argument("--credential-name", help="default: ENGAGEMENT-NAME")
        parser.add_argument("--actor", default=getpass.getuser(), help="who enrols (recorded)")
        parser.add_argument("--timeout", type=float, default=10.0,
                            help="seconds to wait for the node (default 10)")

    def handle(self, *args, **o):
        if not 0 < o["timeout"] <= 600:
            raise CommandError(f"--timeout {o['timeout']:g}: give 0 < seconds <= 600")
        engagement = Engagement.objects.filter(name=o["engagement"]).first()
        if engagement is None:
            raise CommandError(f"no engagement named {o['engagement']!r}")
        jump = via_node(o["jump_host"], engagement.name) if o["jump_host"] else None
        private_key, passphrase = self.secret(o["key_file"], o["passphrase_env"])
        credential_name = o["credential_name"] or f"{engagement.name}-{o['name']}"
        if Credential.objects.filter(name=credential_name).exists():
            raise CommandError(f"a credential named {credential_name!r} exists already: "
                               "give another --credential-name")
        array = None
        if o["array"]:
            array = engagement.arrays.filter(serial=o["array"]).first()
            if array is None:
                known = ", ".join(engagement.arrays.values_list("serial", flat=True)) or "none"
                raise CommandError(f"--array: {engagement.name} has no array with serial "
                                   f"{o['array']!r} (its arrays: {known})")
        elif o["role"] == Node.Role.ARRAY and engagement.arrays.count() == 1:
            array = engagement.arrays.get()  # G1 counts an array's drives on its controller
        fields = {"engagement": engagement, "name": o["name"], "role": o["role"],
                  "array": array,
                  "address": o["address"], "port": o["port"], "ssh_user": o["user"],
                  "jump_host": jump, "interface": o["interface"],
                  "fio_target": o["fio_target"], "use_sudo": o["sudo"]}
        try:
            node_fields_check(**fields)
        except ValidationError as error:
            raise CommandError(f"not enrolled: {validation_text(error)}") from None
        try:
            host_key = host_key_fetch(address=o["address"], port=o["port"], via=jump,
                                      timeout=o["timeout"])
        except TransportError as error:
            raise CommandError(f"not enrolled: cannot read the host key: {error}") from None
        credential = Credential.from_secret(credential_name, private_key, passphrase or "")
        try:
            node = node_enrol(**fields, credential=credential, host_key=host_key,
                              confirmed_fingerprint=o["fingerprint"], actor=o["actor"])
        except EnrolmentRefused as refusal:
            raise CommandError(f"refused: {refusal}") from None
        except ValidationError as error:
            raise CommandError(f"not enrolled: {validation_text(error)}") from None
        via = f" via {jump.name}" if jump else ""
        self.stdout.write(f"enrolled {node.name} ({node.get_role_display()}) at "
                          f"{node.address}:{node.port}{via} as {node.ssh_user}")
        self.stdout.write(f"host key pinned: {node.host_key_fingerprint} "
                          f"({node.host_key.split()[0]})")
        self.stdout.write(f"credential: {credential.name} (stored encrypted)")
        if node.array is not None:
            self.stdout.write(f"array: {node.array.serial}")

    def secret(self, key_file: Path, passphrase_env: str | None) -> tuple[str, str | None]:
        """The private key text and passphrase, checked to open; errors never show either."""
        passphrase = None
        if passphrase_env:
            passphrase = os.environ.get(passphrase_env)
            if not passphrase:
                raise CommandError(f"environment variable {passphrase_env} (--passphrase-env) "
                                   "is not set or empty")
        try:
            text = key_file.read_text()
        except OSError as error:
            raise CommandError(f"cannot read --key-file {key_file}: {error.strerror}") from None
        except UnicodeDecodeError:
            raise CommandError(f"--key-file {key_file} is not an OpenSSH private key "
                               "(not text)") from None
        try:
            private_key_type(text, passphrase)
        except AuthenticationFailed:
            hint = ("is it the right --passphrase-env?" if passphrase
                    else "if it is encrypted, give --passphrase-env VAR")
            raise CommandError(f"--key-file {key_file} does not open as an Ed25519, ECDSA or "
                               f"RSA private key: {hint}") from None
        return text, passphrase
