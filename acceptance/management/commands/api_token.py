"""``manage.py api_token USER [--reset]``: print USER's REST API token, creating it if needed.

Use it as ``Authorization: Token KEY`` on /api/. ``--reset`` replaces the token (the old one
stops working at once). The token carries the user's role: it sees what the user's pages show.
Exit status 0 done, 1 with ``CommandError: …`` for an unknown or inactive user.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from acceptance.permissions import role_of


class Command(BaseCommand):
    help = "Print a user's REST API token (created if the user has none)."

    def add_arguments(self, parser):
        parser.add_argument("user", help="user name")
        parser.add_argument("--reset", action="store_true",
                            help="replace the user's token with a new one")

    def handle(self, *args, user, reset, **options):
        User = get_user_model()  # noqa: N806
        try:
            account = User.objects.get(**{User.USERNAME_FIELD: user})
        except User.DoesNotExist:
            raise CommandError(f"no user named {user!r}") from None
        if not account.is_active:
            raise CommandError(f"user {user!r} is inactive")
        if reset:
            Token.objects.filter(user=account).delete()
        token, created = Token.objects.get_or_create(user=account)
        if role_of(account) is None:
            self.stderr.write(f"warning: {user} has no role yet: the API will show them nothing")
        if created and not reset:
            self.stderr.write(f"created a token for {user}")
        self.stdout.write(token.key)
