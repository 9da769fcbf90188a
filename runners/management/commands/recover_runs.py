"""``manage.py recover_runs``: fail node jobs whose worker died (no heartbeat), killing what
they left on the node, and re-attach soaks whose driver stopped. Workers also do this when
they start."""

from django.core.management.base import BaseCommand

from runners.launch import runs_recover


class Command(BaseCommand):
    help = "Detect runs lost by a dead worker and mark them failed with the reason."

    def handle(self, *args, **options):
        lines = runs_recover()
        for line in lines:
            self.stdout.write(line)
        self.stdout.write(f"recovered {len(lines)} lost node job(s)")
