"""``manage.py lab up --scenario NAME [--nodes N]`` / ``lab down`` / ``lab status``.

``up`` starts real OpenSSH servers on 127.0.0.1 — the array controller and N inference nodes
(default 1), each on its own free port with its own host key, config and authorised key — whose
PATH starts with stand-in tools printing the scenario's figures, creates or resets the
engagement ``lab-NAME`` and prints that name on the last line. ``down`` stops every lab server
(and any stand-in engine a run left running).
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runners.lab import server
from runners.lab.services import MAX_NODES, lab_down, lab_up, scenario_names


class Command(BaseCommand):
    help = "Start or stop lab nodes (simulated evidence from stand-in tools)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        up = sub.add_parser("up", help="start lab nodes and (re)create their engagement")
        up.add_argument("--scenario", required=True,
                        help=f"one of: {', '.join(scenario_names())}")
        up.add_argument("--nodes", type=int, default=1,
                        help=f"inference nodes, each its own sshd (1 … {MAX_NODES}; default 1)")
        sub.add_parser("down", help="stop every lab server")
        sub.add_parser("status", help="list lab servers")

    def handle(self, *args, action, **options):
        if action == "up":
            name = options["scenario"]
            if name not in scenario_names():
                raise CommandError(f"unknown scenario {name!r}; known: "
                                   f"{', '.join(scenario_names())}")
            try:
                engagement, _ = lab_up(scenario_name=name, nodes=options["nodes"])
            except server.LabError as error:
                raise CommandError(str(error)) from None
            for node in engagement.nodes.order_by("role", "name"):
                self.stdout.write(f"lab node {node.name} ({node.role}): ssh {node.ssh_user}@"
                                  f"{node.address} -p {node.port}, host key pinned "
                                  f"{node.host_key_fingerprint}")
            self.stdout.write(f"scenario {name}; stand-in tools: SIMULATED evidence")
            self.stdout.write(engagement.name)
        elif action == "down":
            stopped = lab_down()
            self.stdout.write(f"stopped {len(stopped)} lab server(s)"
                              + (f": {', '.join(stopped)}" if stopped else ""))
        else:
            found = sorted({*settings.LAB_DIR.glob("*/server.json"),
                            *settings.LAB_DIR.glob("*/*/server.json")})
            for info in found:
                running = (info.parent / "sshd.pid").exists()
                where = info.parent.relative_to(settings.LAB_DIR)
                self.stdout.write(f"{where}: {'running' if running else 'stopped'} "
                                  f"{info.read_text()}")
