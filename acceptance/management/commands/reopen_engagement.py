"""``manage.py reopen_engagement ENGAGEMENT --reason TEXT``: re-open a stopped engagement.

The stopped gate goes back to pending so it can be re-run; the reason and the actor are
recorded in the engagement's audit trail.
"""

import getpass

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from acceptance.services import engagement_reopen


class Command(BaseCommand):
    help = "Re-open a stopped engagement with a recorded reason."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("--reason", required=True, help="why it may go on (recorded)")
        parser.add_argument("--actor", default=getpass.getuser())

    def handle(self, *args, engagement, reason, actor, **options):
        found = Engagement.objects.filter(name=engagement).first()
        if found is None:
            raise CommandError(f"no engagement named {engagement!r}")
        try:
            engagement_reopen(engagement=found, actor=actor, reason=reason)
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"{found.name} re-opened by {actor}: {reason}")
