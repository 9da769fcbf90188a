"""The limit/offset lists (engagements, gate runs, probe runs, decisions, reports) answer a
page size or offset that is not a whole number in range with a 400 naming it: a 20-digit
``?limit=`` reached the database and came back as "503 the database is not answering", and
``?limit=abc`` or ``?offset=-3`` were silently ignored. A page is at most 1000 rows."""

from __future__ import annotations

import pytest

from acceptance.api.pagination import LedgerLimitOffsetPagination

LISTS = ["/api/engagements/", "/api/gate-runs/", "/api/probe-runs/", "/api/decisions/",
         "/api/reports/"]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("query,name,value", [
    ("limit=abc", "limit", "abc"), ("limit=0", "limit", "0"), ("limit=1_0", "limit", "1_0"),
    ("limit=%2B2", "limit", "+2"), ("limit=%D9%A3", "limit", "\u0663"),
    ("offset=-3", "offset", "-3"), ("offset=99999999999999999999", "offset",
                                    "99999999999999999999"),
    ("offset=1.5", "offset", "1.5"), ("offset=%201%20", "offset", " 1 ")])
def test_a_page_size_or_offset_out_of_range_is_a_400_naming_it(ledger, client_for, url, query,
                                                               name, value):
    response = client_for("pm").get(f"{url}?{query}")
    assert response.status_code == 400, (response.status_code, response.content)
    words = ("a whole number from 1 (a page holds at most 1000)" if name == "limit" else
             "a whole number 0 … 9223372036854775807")
    assert response.json() == {name: f"expected {words}, not {value!r}"}


@pytest.mark.parametrize("url", LISTS)
def test_a_large_page_is_at_most_the_maximum_and_a_plain_request_still_pages(ledger,
                                                                             client_for, url):
    client = client_for("pm")
    big = client.get(f"{url}?limit=99999999999999999999")  # clamped, as the measurements
    assert big.status_code == 200
    assert big.json()["count"] >= 1 and len(big.json()["results"]) <= 1000
    plain = client.get(url).json()
    assert plain["results"] and plain["count"] == big.json()["count"]
    assert LedgerLimitOffsetPagination.max_limit == 1000
