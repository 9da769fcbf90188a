"""``manage.py backup OUT``: the database, signed reports, signing identity and credentials key
in one tar archive with a sha256 manifest (``acceptance.backup``), created 0600."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from acceptance.backup import BackupError, backup_write


class Command(BaseCommand):
    help = "Write a backup archive (database, reports, signing identity, credentials key)."

    def add_arguments(self, parser):
        parser.add_argument("out", help="the archive to write (must not exist)")

    def handle(self, *args, out, **options):
        try:
            summary = backup_write(out=Path(out))
        except BackupError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"backup: {summary.path} ({summary.engine} database, "
                          f"{summary.reports} reports, {summary.members} files; "
                          f"sha256 {summary.sha256})")
