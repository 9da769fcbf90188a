"""``manage.py soak ACTION ENGAGEMENT …``: an engineer's hands on a running G4 soak.

``status`` prints the soak's state, progress, fault windows, gaps and check states;
``pause --reason``, ``resume`` and ``abort --reason`` act on the soak of the engagement's
latest G4 run (abort heals every fault on first); ``mark-target NODE KIND TARGET --confirm
TEXT`` marks a fault-injection target (the confirmation must name node and target);
``recover`` re-attaches soaks whose worker died; ``plan`` prints the engagement's soak plan
(JSON). Exit 0 done, 1 with ``CommandError`` on bad input or a refused action.
"""

import getpass
import json

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from runners.soak import queries
from runners.soak.driver import soak_abort, soak_pause, soak_recover, soak_resume
from runners.soak.faults import fault_target_mark
from runners.soak.models import Soak
from runners.soak.plan import SoakRefused, plan_sha256, soak_plan_of
from runners.transport import TransportError

ACTIONS = ("status", "pause", "resume", "abort", "mark-target", "recover", "plan")


class Command(BaseCommand):
    help = "Status, pause, resume or abort a G4 soak; mark fault-injection targets."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("engagement", nargs="?", help="engagement name, e.g. lab-soak-clean")
        parser.add_argument("extra", nargs="*", help="mark-target: NODE KIND TARGET")
        parser.add_argument("--reason", default="", help="why (pause, abort): recorded")
        parser.add_argument("--confirm", default="", help="mark-target: the confirmation "
                            "words, naming the node and the target")
        parser.add_argument("--by", default=getpass.getuser(), help="who acts (recorded)")

    def handle(self, *args, action, engagement, extra, reason, confirm, by, **options):
        if action == "recover":
            lines = soak_recover()
            self.stdout.write("\n".join(lines) if lines else "no soak needed re-attaching")
            return
        if not engagement:
            raise CommandError(f"{action} needs the engagement name")
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            raise CommandError(f"no engagement named {engagement!r}")
        if action == "plan":
            gate = next((g for g in found.gates.all() if g.is_soak), None)
            if gate is None:
                raise CommandError(f"engagement {found.name} has no soak gate")
            try:
                plan = soak_plan_of(gate)
            except (ValueError, SoakRefused) as error:
                raise CommandError(str(error)) from None
            self.stdout.write(json.dumps(plan, indent=1))
            self.stdout.write(f"sha256 {plan_sha256(plan)}")
            return
        if action == "mark-target":
            if len(extra) != 3:
                raise CommandError("mark-target needs NODE KIND TARGET, e.g. lab-inference-1 "
                                   "link_down ens1f1")
            node = found.nodes.filter(name=extra[0]).first()
            if node is None:
                raise CommandError(f"engagement {found.name} has no node {extra[0]!r}")
            try:
                row = fault_target_mark(node=node, kind=extra[1], target=extra[2], actor=by,
                                        confirmation=confirm)
            except ValueError as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"marked: {row.kind} of {row.target} on {node.name}, confirmed "
                              f"by {row.confirmed_by} at {row.confirmed_at:%Y-%m-%d %H:%M:%S} UTC")
            return
        soak = Soak.objects.filter(gate_run__gate__engagement=found).order_by("-id").first()
        if soak is None:
            raise CommandError(f"engagement {found.name} has no soak")
        try:
            if action == "pause":
                soak = soak_pause(soak=soak, actor=by, reason=reason)
            elif action == "resume":
                soak = soak_resume(soak=soak, actor=by)
            elif action == "abort":
                soak = soak_abort(soak=soak, actor=by, reason=reason)
        except (ValueError, TransportError) as error:
            raise CommandError(str(error)) from None
        self.print_status(soak)

    def print_status(self, soak: Soak) -> None:
        progress = queries.soak_progress(soak)
        self.stdout.write(
            f"soak of {soak.gate_run}: {progress['state']}, {progress['percent']:.0f} % "
            f"({progress['loaded_s']:.0f} of {progress['duration_s']:.0f} s real; "
            f"plan {progress['plan_duration_s'] / 3600:g} h ×{progress['time_compression']:g})")
        for row in queries.soak_fault_rows(soak):
            self.stdout.write(f"  fault {row['name']} ({row['kind']} on {row['node']}): "
                              f"{row['state']} — {row['verdict']}")
        for gap in queries.soak_gaps(soak):
            self.stdout.write(f"  gap {gap['started_at']} … {gap['ended_at'] or 'open'}: "
                              f"{gap['reason']}")
        for key, check in (soak.checks or {}).items():
            self.stdout.write(f"  check {key}: {check['state']} ({check['explanation']})")
