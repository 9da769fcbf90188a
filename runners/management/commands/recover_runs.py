"""``manage.py recover_runs``: fail node jobs whose worker died (no heartbeat), killing what
they left on the node, re-attach soaks whose driver stopped, issue the signed report of a
decision left without one, and sweep report files a killed writer left. Workers also do this
when they start, and beat every 30 s."""

from django.core.management.base import BaseCommand

from runners.tasks import recover_all


class Command(BaseCommand):
    help = "Detect runs lost by a dead worker and mark them failed with the reason."

    def handle(self, *args, **options):
        lines = recover_all()
        for line in lines:
            self.stdout.write(line)
        self.stdout.write(f"recovered {len(lines)} lost node job(s), soak(s), report(s) or "
                          f"report file(s)")
