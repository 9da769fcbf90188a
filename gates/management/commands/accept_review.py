"""``manage.py accept_review ENGAGEMENT GATE --reason TEXT``: accept a gate in review.

A figure outside the reference range on the good side (G3 throughput gain above +40 %) puts the
gate in review; a person either re-runs it or accepts it with a reason. Accepting passes the gate
and records who and why in the engagement's audit trail.
"""

import getpass

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from gates.services import GateRefused, gate_get, gate_review_accept


class Command(BaseCommand):
    help = "Accept a gate in review with a recorded reason (the gate passes)."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("gate", help="gate code, e.g. G3")
        parser.add_argument("--reason", required=True, help="why the figure is accepted "
                                                            "(recorded)")
        parser.add_argument("--actor", default=getpass.getuser())

    def handle(self, *args, engagement, gate, reason, actor, **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            raise CommandError(f"no engagement named {engagement!r}")
        try:
            accepted = gate_review_accept(gate=gate_get(engagement=found, code=gate),
                                          actor=actor, reason=reason)
        except (GateRefused, ValueError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"{found.name} {accepted.code} review accepted by {actor}: {reason}; "
                          f"{accepted.code} passed")
