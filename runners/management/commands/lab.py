"""``manage.py lab up --scenario NAME`` / ``lab down`` / ``lab status``.

``up`` starts a real OpenSSH server on 127.0.0.1 (free port, own host key, config and authorised
key) whose PATH starts with stand-in tools printing the scenario's figures, creates or resets the
engagement ``lab-NAME`` and prints that name on the last line. ``down`` stops every lab server.
"""

from django.core.management.base import BaseCommand, CommandError

from runners.lab import server
from runners.lab.services import lab_down, lab_up, scenario_names


class Command(BaseCommand):
    help = "Start or stop lab nodes (simulated evidence from stand-in tools)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        up = sub.add_parser("up", help="start a lab node and (re)create its engagement")
        up.add_argument("--scenario", required=True,
                        help=f"one of: {', '.join(scenario_names())}")
        sub.add_parser("down", help="stop every lab server")
        sub.add_parser("status", help="list lab servers")

    def handle(self, *args, action, **options):
        if action == "up":
            name = options["scenario"]
            if name not in scenario_names():
                raise CommandError(f"unknown scenario {name!r}; known: "
                                   f"{', '.join(scenario_names())}")
            try:
                engagement, lab = lab_up(scenario_name=name)
            except server.LabError as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"lab node: ssh {lab.user}@127.0.0.1 -p {lab.port} "
                              f"(scenario {name}; stand-in tools: SIMULATED evidence)")
            self.stdout.write(f"host key pinned: {engagement.nodes.first().host_key_fingerprint}")
            self.stdout.write(engagement.name)
        elif action == "down":
            stopped = lab_down()
            self.stdout.write(f"stopped {len(stopped)} lab server(s)"
                              + (f": {', '.join(stopped)}" if stopped else ""))
        else:
            from django.conf import settings

            for directory in sorted(settings.LAB_DIR.glob("*/server.json")):
                running = (directory.parent / "sshd.pid").exists()
                self.stdout.write(f"{directory.parent.name}: "
                                  f"{'running' if running else 'stopped'} {directory.read_text()}")
