"""The API tests' personas and evidence ledger, for the security tests too."""

from tests.api.conftest import client_for, ledger, users  # noqa: F401 (fixtures)
