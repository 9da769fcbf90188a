"""Existing rest_framework.authtoken keys become ApiToken rows (their sha256 only), so clients
keep working; then the table with the raw keys is dropped. The app is no longer installed, so
its table is read with SQL where it exists."""

import hashlib
from datetime import UTC

from django.db import migrations
from django.utils.dateparse import parse_datetime

LEGACY_TABLE = "authtoken_token"


def tokens_hash(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("acceptance", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {LEGACY_TABLE}")  # noqa: S608  # nosec B608 # a constant name
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        if isinstance(created, str):  # SQLite hands back text
            created = parse_datetime(created)
        if created.tzinfo is None:  # stored in UTC (USE_TZ)
            created = created.replace(tzinfo=UTC)
        ApiToken.objects.create(
            user_id=user_id, name="API token (from before tokens were hashed)",
            digest=hashlib.sha256(key.encode()).hexdigest(), prefix=key[:8],
            created_at=created, expires_at=None)
    schema_editor.execute(f"DROP TABLE {LEGACY_TABLE}")


class Migration(migrations.Migration):

    dependencies = [("acceptance", "0007_api_token")]

    operations = [migrations.RunPython(tokens_hash, migrations.RunPython.noop)]
