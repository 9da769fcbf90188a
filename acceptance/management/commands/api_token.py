"""``manage.py api_token USER [--reset] [--name NAME] [--days N]``: make USER a REST API token.

Use it as ``Authorization: Token KEY`` on /api/. The key is printed once, now: the service keeps
only its sha256 (``acceptance.tokens``), so it cannot be shown again. Without ``--reset`` a user
who already has an active token of that name is refused (say ``--reset`` to revoke it and print
a new one). ``--days``: until it expires (default: the setting API_TOKEN_EXPIRY_DAYS; 0 never).
The token carries the user's role: it sees what the user's pages show. People make and revoke
their own tokens on the "API tokens" page. Exit status 0 done, 1 with ``CommandError: …`` for an
unknown or inactive user, or a token of that name that exists.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from acceptance.permissions import role_of
from acceptance.tokens import ApiToken, api_token_create

DEFAULT_NAME = "manage.py api_token"


class Command(BaseCommand):
    help = "Make a user a REST API token and print it (once: only its sha256 is kept)."

    def add_arguments(self, parser):
        parser.add_argument("user", help="user name")
        parser.add_argument("--reset", action="store_true",
                            help="revoke the user's active token of this name and make a new one")
        parser.add_argument("--name", default=DEFAULT_NAME, help="the token's name")
        parser.add_argument("--days", type=int, default=None,
                            help="days until it expires (0: never)")

    def handle(self, *args, user, reset, name, days, **options):
        User = get_user_model()  # noqa: N806
        try:
            account = User.objects.get(**{User.USERNAME_FIELD: user})
        except User.DoesNotExist:
            raise CommandError(f"no user named {user!r}") from None
        if not account.is_active:
            raise CommandError(f"user {user!r} is inactive")
        if days is not None and days < 0:
            raise CommandError(f"--days must be 0 or more, not {days}")
        with transaction.atomic():
            same = [t for t in ApiToken.objects.select_for_update().filter(
                        user=account, name=name, revoked_at=None) if t.state == "active"]
            if same and not reset:
                raise CommandError(
                    f"{user} already has an active token named {name!r} (made "
                    f"{same[0].created_at:%Y-%m-%d %H:%M} UTC, {same[0].prefix}…); its key "
                    "was shown once when it was made: --reset revokes it and prints a new one")
            ApiToken.objects.filter(pk__in=[t.pk for t in same]).update(
                revoked_at=timezone.now())
            token, raw = api_token_create(user=account, name=name, days=days)
        if role_of(account) is None:
            self.stderr.write(f"warning: {user} has no role yet: the API will show them nothing")
        expiry = f"expires {token.expires_at:%Y-%m-%d}" if token.expires_at else "never expires"
        self.stderr.write(f"created token {name!r} for {user} ({expiry}); it is shown only now")
        self.stdout.write(raw)
