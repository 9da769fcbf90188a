"""``manage.py restore IN``: restore a backup archive into a fresh installation, then verify
every report ("restored: 12 reports, 12 verified"). A damaged or partial archive, or a target
that is not fresh, is refused with one line and exit status 1, changing nothing. Exit status 2
when the restore finished but some report does not verify (each named on stderr)."""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from acceptance.backup import BackupError, backup_restore


class Command(BaseCommand):
    help = "Restore a backup archive into a fresh database and verify every report."

    def add_arguments(self, parser):
        parser.add_argument("archive", help="the archive manage.py backup wrote")

    def handle(self, *args, archive, **options):
        try:
            summary = backup_restore(archive=Path(archive))
        except BackupError as error:
            raise CommandError(str(error)) from None
        if summary.moved_reports_from:
            self.stdout.write(f"report paths moved from {summary.moved_reports_from}")
        for note in summary.notes:
            self.stdout.write(note)
        for problem in summary.not_verified:
            self.stderr.write(f"not verified: {problem}")
        self.stdout.write(f"restored: {summary.reports} reports, {summary.verified} verified")
        if summary.not_verified:
            sys.exit(2)
