"""``manage.py issue_final_report ENGAGEMENT``: issue the final acceptance report (all gates) —
once every gate has a decision, or the engagement stopped at a gate. A later call issues a new
version naming the one it replaces. Prints ``report: PATH``; exit 0 issued, 2 refused (the
``refused: …`` line says why), 1 with ``CommandError`` for an unknown engagement."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from acceptance.models import Engagement
from reports.services import ReportRefused, final_report_issue


class Command(BaseCommand):
    help = "Issue the signed final acceptance report of an engagement."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("engagement", help="engagement name")
        parser.add_argument("--by", default="command line", help="who issues it (audit trail)")

    def handle(self, *args: object, **options: object) -> None:
        name = str(options["engagement"])
        engagement = Engagement.objects.filter(name=name).first()
        if engagement is None:
            raise CommandError(f"no engagement named {name!r}")
        try:
            report = final_report_issue(engagement=engagement, issued_by=str(options["by"]))
        except ReportRefused as refusal:
            self.stdout.write(f"refused: {refusal}")
            raise SystemExit(2) from None
        self.stdout.write(f"version: {report.version}")
        self.stdout.write(f"report: {report.path}")
