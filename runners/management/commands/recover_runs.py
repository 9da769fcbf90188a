"""``manage.py recover_runs``: fail node jobs whose worker died (no heartbeat), killing what
they left on the node, re-attach soaks whose driver stopped, settle what the broker lost,
issue the signed report of a decision left without one, and sweep report files a killed writer
left. Workers also do this when they start, and beat every 30 s. Exit 2 with one line when the
task broker or the database does not answer."""

import sys

from django.core.management.base import BaseCommand
from django.db import Error as DatabaseError  # any driver fault: also InterfaceError

from runners.doorbell import BrokerUnavailable
from runners.tasks import recover_all


class Command(BaseCommand):
    help = "Detect runs lost by a dead worker and mark them failed with the reason."

    def handle(self, *args, **options):
        try:
            lines = recover_all()
        except (BrokerUnavailable, DatabaseError) as error:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            self.stderr.write(f"error: {reason}; nothing more recovered now (try again once "
                              f"it answers)")
            sys.exit(2)
        for line in lines:
            self.stdout.write(line)
        self.stdout.write(f"recovered {len(lines)} lost node job(s), soak(s), report(s) or "
                          f"report file(s)")
