"""``manage.py engagement_create NAME --customer ORG --start-date YYYY-MM-DD [--language en]
[--reference-profile R2-MI308X-TP8] [--array serial=SN,model=FX100,drives=24,link=100000,
layout=raid6 …] [--actor WHO]``: create an engagement with its arrays and G1–G4 seeded.

The customer organisation is created when no organisation has that name. Each ``--array`` is
one array, ``key=value`` pairs separated by commas (``serial`` required; the others default to
FX100, 24 drives, 100000 Mb/s, layout "other"). All or nothing: exit status 0 and one line
naming the engagement and its gates' due dates, or 1 with ``CommandError: field: message`` and
nothing stored.
"""

import getpass

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from acceptance.models import DEFAULT_REFERENCE_PROFILE, Engagement
from acceptance.services import validation_text
from gates.services import engagement_create

# --array keys → Array fields.
ARRAY_KEYS = {"serial": "serial", "model": "model", "drives": "expected_drive_count",
              "drive_model": "drive_model", "link": "link_speed_mbps", "layout": "layout"}


def array_parse(text: str, number: int) -> dict:
    """``serial=SN1,drives=24`` → the Array fields; CommandError naming the array and key."""
    fields = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ARRAY_KEYS:
            raise CommandError(f"--array {number}: {part!r} is not one of "
                               f"{', '.join(k + '=…' for k in ARRAY_KEYS)}")
        fields[ARRAY_KEYS[key]] = value.strip()
    if not fields.get("serial"):
        raise CommandError(f"--array {number}: serial=… is required")
    return fields


class Command(BaseCommand):
    help = "Create an engagement with its arrays; G1–G4 are seeded from the defaults."

    def add_arguments(self, parser):
        parser.add_argument("name", help="letters, digits, '.', '_' or '-', e.g. acme-prod")
        parser.add_argument("--customer", required=True,
                            help="the customer organisation (created if new)")
        parser.add_argument("--start-date", required=True, metavar="YYYY-MM-DD")
        parser.add_argument("--language", default="en", choices=Engagement.Language.values,
                            help="report language (default en)")
        parser.add_argument("--reference-profile", default=DEFAULT_REFERENCE_PROFILE)
        parser.add_argument("--array", action="append", default=[], metavar="serial=SN,…",
                            help="one array: serial=…,model=…,drives=…,drive_model=…,link=…,"
                                 "layout=… (drive_model: the drives' model as nvme list prints "
                                 "it, which G1 counts; repeat --array for more)")
        parser.add_argument("--actor", default=getpass.getuser(), help="who creates (recorded)")

    def handle(self, *args, name, customer, start_date, language, reference_profile, array,
               actor, **options):
        arrays = [array_parse(text, number) for number, text in enumerate(array, start=1)]
        try:
            engagement = engagement_create(
                name=name, customer=customer, start_date=start_date, report_language=language,
                reference_profile=reference_profile, arrays=arrays, actor=actor,
                via="with manage.py engagement_create")
        except ValidationError as error:
            raise CommandError(f"not created: {validation_text(error)}") from None
        due = ", ".join(f"{g.code} {g.due_date:%Y-%m-%d}"
                        for g in engagement.gates.order_by("order"))
        self.stdout.write(f"{engagement.name} created for {engagement.customer.name} with "
                          f"{engagement.arrays.count()} array(s); due: {due}")
