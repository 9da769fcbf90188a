"""``manage.py raw_outputs_prune [--dry-run] [--days N]``: prune the raw outputs the retention
rule allows (``runners.retention``): accepted engagements only, only what a verified signed
report embeds, audited. Off (says so, exit 0) while ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS is
unset and no ``--days`` is given."""

from django.core.management.base import BaseCommand, CommandError

from runners.retention import raw_outputs_prune


class Command(BaseCommand):
    help = "Prune raw outputs of accepted engagements that their signed reports embed."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true",
                            help="say what would be pruned; change nothing")
        parser.add_argument("--days", type=int, default=None,
                            help="instead of ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS")

    def handle(self, *args, dry_run, days, **options):
        try:
            summary = raw_outputs_prune(dry_run=dry_run, days=days)
        except ValueError as error:
            raise CommandError(str(error)) from None
        if not summary.enabled:
            self.stdout.write("retention is off (ACCEPTANCE_RAW_OUTPUT_RETENTION_DAYS unset): "
                              "nothing pruned")
            return
        verb = "would prune" if dry_run else "pruned"
        for item in summary.engagements:
            self.stdout.write(f"{item.engagement}: {verb} {item.probe_runs} raw outputs "
                              f"({item.bytes} bytes) embedded in reports "
                              f"{', '.join(map(str, item.reports)) or '-'}; kept "
                              f"{item.kept_not_embedded} not embedded")
        for problem in summary.unverified_reports:
            self.stderr.write(f"not used (does not verify): {problem}")
        self.stdout.write(f"{verb} {summary.probe_runs} raw outputs ({summary.bytes} bytes) of "
                          f"{len(summary.engagements)} accepted engagements older than "
                          f"{summary.days} days")
