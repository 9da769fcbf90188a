"""No input the API's own schema allows answers 500: schemathesis generates requests for every
operation from /api/schema/ and sends them to a real server on loopback (pytest-django's
live_server), as a customer (everything) and as an engineer (reads only: an engineer's POST
would start runs on nodes). Bounded: a few examples per operation, the whole test well under
90 s."""

import time

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from acceptance.tokens import api_token_create

pytestmark = pytest.mark.slow

EXAMPLES = 5
BUDGET_S = 90


def _run_operation(operation, base_url: str, headers: dict, failures: list,
                   examples: int = EXAMPLES) -> None:
    session = requests.Session()

    @given(case=operation.as_strategy())
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def run(case):
        response = case.call(base_url=base_url, headers=headers, session=session, timeout=30)
        if response.status_code >= 500:
            failures.append(f"{operation.label}: {response.status_code} for "
                            f"{response.request.method} {response.request.url} "
                            f"{(response.request.body or b'')[:200]!r}: {response.text[:200]}")

    try:
        run()
    finally:
        session.close()  # no keep-alive connection outlives the operation (or the server)


def test_no_request_the_schema_allows_is_a_server_error(live_server, ledger, users, settings):
    settings.API_THROTTLE_RATES = {"anon": "10000/min", "user": "10000/min",
                                   "upload": "10000/min"}
    started = time.monotonic()
    base_url = live_server.url
    keys = {role: api_token_create(user=users[role], name="schemathesis")[1]
            for role in ("customer", "engineer")}
    headers = {"Authorization": f"Token {keys['customer']}"}
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/?format=json",
                                           headers=headers)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30
    for operation in operations:
        _run_operation(operation, base_url, headers, failures)
        if operation.method.upper() == "GET":
            _run_operation(operation, base_url,
                           {"Authorization": f"Token {keys['engineer']}"}, failures,
                           examples=2)
    assert failures == []
    assert time.monotonic() - started < BUDGET_S
