"""``manage.py member_add ENGAGEMENT EMAIL ROLE [--create-user] [--actor NAME]``: give the
account with that e-mail address a role, for scripts (no mail is sent).

ROLE is ``project_manager``, ``engineer`` or ``customer`` (a customer of ENGAGEMENT's
organisation). ``--create-user`` makes an account for an address that has none, without a
password: its owner sets one with "Forgot your password?" on the login page. The addition is
recorded in the engagement's audit trail. Prints one line. Exit status 0 added, 2 with
``CommandError: …`` (no such engagement, a bad address or role, no such account, a person who
has a role already).
"""

import getpass

from django.core.management.base import BaseCommand, CommandError

from acceptance.models import Engagement
from acceptance.people.services import PeopleRefused, member_add, role_word

BAD_INPUT = 2


class Command(BaseCommand):
    help = "Give the account with an e-mail address a role (project_manager, engineer, customer)."

    def add_arguments(self, parser):
        parser.add_argument("engagement")
        parser.add_argument("email")
        parser.add_argument("role", help="project_manager, engineer or customer")
        parser.add_argument("--create-user", action="store_true",
                            help="make an account (without a password) if the address has none")
        parser.add_argument("--actor", default=getpass.getuser(),
                            help="who is recorded in the audit trail")

    def handle(self, *args, engagement, email, role, create_user, actor, **options):
        found = Engagement.objects.select_related("customer").filter(name=engagement).first()
        if found is None:
            raise CommandError(f"engagement: no engagement named {engagement!r}",
                               returncode=BAD_INPUT)
        try:
            membership, created = member_add(engagement=found, email=email, role=role,
                                             actor=actor, create_user=create_user)
        except PeopleRefused as refusal:
            raise CommandError(str(refusal), returncode=BAD_INPUT) from None
        who = membership.user.get_username()
        made = (" (account created without a password: set it with 'Forgot your password?' on "
                "the login page)" if created else "")
        self.stdout.write(f"{who} is {role_word(membership.role, found)} ({found.name}){made}")
