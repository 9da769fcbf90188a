"""The portal serves each gate's latest report version and says which it is: version 1
"awaiting sign-off", then — once the vendor's project manager and the customer have both
signed off — version 2 "signed off by both parties" (real WeasyPrint and pyHanko)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from acceptance.pages.words import minute
from reports.models import Report
from reports.services import report_issue, signoff_record
from reports.signing import verify_pdf
from tests.web.conftest import G1_MISSING_DRIVE, decide


def portal(client, user) -> str:
    client.force_login(user)
    response = client.get(reverse("portal"))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def g1_report(engagement_a) -> Report:
    return report_issue(decision=decide(engagement_a.gates.get(code="G1"), G1_MISSING_DRIVE,
                                        "stopped"))


def test_the_portal_serves_version_1_awaiting_sign_off(client, customer_a, g1_report):
    html = portal(client, customer_a)
    assert "version 1 of 1, awaiting sign-off" in html
    assert reverse("report-download", args=[g1_report.id]) in html
    assert "Download PDF (v1)" in html


def test_after_both_sign_offs_the_portal_serves_version_2(client, pm, customer_a, customer_b,
                                                          g1_report):
    signoff_record(report=g1_report, user=pm)
    html = portal(client, customer_a)
    assert "version 1 of 1, signed off by the vendor; awaiting the customer&#x27;s sign-off" \
        in html
    _, second = signoff_record(report=g1_report, user=customer_a)
    assert second.version == 2 and second.signoff_complete

    html = portal(client, customer_a)
    v2_url = reverse("report-download", args=[second.id])
    assert v2_url in html
    assert reverse("report-download", args=[g1_report.id]) not in html
    assert f"version 2 of 2, signed off by both parties on {minute(second.signed_at)}" in html
    assert "awaiting sign-off" not in html and "Download PDF (v2)" in html

    response = client.get(v2_url)  # the link the portal gives is the signed version 2
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert data == Path(second.path).read_bytes() and verify_pdf(data).valid

    # A customer of another organisation sees neither the engagement nor the report.
    other = portal(client, customer_b)
    assert "acme-1" not in other and v2_url not in other
    assert client.get(v2_url).status_code == 404


def test_the_portal_is_the_customers_page(client, pm, engineer, g1_report):
    for user in (pm, engineer):
        client.force_login(user)
        assert client.get(reverse("portal")).status_code == 403


def test_the_portal_still_costs_a_fixed_number_of_queries(client, pm, customer_a, g1_report,
                                                          django_assert_max_num_queries):
    signoff_record(report=g1_report, user=pm)
    signoff_record(report=g1_report, user=customer_a)
    client.force_login(customer_a)
    with django_assert_max_num_queries(8):
        assert client.get(reverse("portal")).status_code == 200
