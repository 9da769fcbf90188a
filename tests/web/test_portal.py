"""The customer portal: their engagements only, gates and decisions in plain words, and their
signed reports to download (only theirs)."""

from __future__ import annotations

from django.urls import reverse

from acceptance.models import AuditEntry
from acceptance.services import engagement_reopen
from tests.web.conftest import G1_HEALTHY, decide, report_for


def portal(client, user) -> str:
    client.force_login(user)
    response = client.get(reverse("portal"))
    assert response.status_code == 200
    return response.content.decode()


def test_a_passed_gate_reads_as_a_sentence(client, customer_a, engagement_a, tmp_path):
    decision = decide(engagement_a.gates.get(code="G1"), G1_HEALTHY, "passed")
    report_for(decision, tmp_path)
    html = portal(client, customer_a)
    assert (f"G1 arrival acceptance passed on {decision.decided_at:%Y-%m-%d}: all 4 criteria "
            f"met.") in html
    assert "G2 single-node baseline is due on" in html and "no decision yet." in html


def test_a_stopped_gate_says_which_figure_was_missed(client, customer_a, stopped_a):
    engagement, decision, report = stopped_a
    html = portal(client, customer_a)
    assert (f"G1 arrival acceptance stopped on {decision.decided_at:%Y-%m-%d}: All drives of "
            f"each array recognised (required &gt;= 24, measured 23).") in html
    assert "This engagement is stopped at the gate below that was not met." in html
    assert reverse("report-download", args=[report.id]) in html


def test_a_reopened_gate_says_it_will_run_again(client, customer_a, stopped_a):
    engagement_reopen(engagement=stopped_a[0], actor="pat-pm", reason="drive replaced")
    html = portal(client, customer_a)
    assert "The engagement was re-opened since; the gate will run again." in html


def test_the_customer_downloads_their_signed_report(client, customer_a, stopped_a):
    engagement, decision, report = stopped_a
    client.force_login(customer_a)
    response = client.get(reverse("report-download", args=[report.id]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert 'attachment; filename="acme-1-G1.pdf"' in response["Content-Disposition"]
    assert b"".join(response.streaming_content).startswith(b"%PDF-1.7")
    assert AuditEntry.objects.filter(engagement=engagement).count() == 0  # nothing recorded


def test_another_customers_report_is_404(client, customer_b, stopped_a):
    client.force_login(customer_b)
    assert client.get(reverse("report-download", args=[stopped_a[2].id])).status_code == 404


def test_an_unknown_report_is_404(client, customer_a, stopped_a):
    client.force_login(customer_a)
    assert client.get(reverse("report-download", args=[99999])).status_code == 404


def test_a_report_whose_file_is_gone_is_404(client, customer_a, stopped_a):
    engagement, decision, report = stopped_a
    client.force_login(customer_a)
    __import__("pathlib").Path(report.path).unlink()
    assert client.get(reverse("report-download", args=[report.id])).status_code == 404


def test_the_portal_shows_only_the_customers_engagements(client, customer_b, stopped_a,
                                                         engagement_b):
    html = portal(client, customer_b)
    assert "globex-1" in html and "acme-1" not in html
    assert "No signed report yet." in html


def test_the_portal_costs_a_fixed_number_of_queries(client, customer_a, stopped_a,
                                                    django_assert_max_num_queries):
    from gates.services import engagement_create

    for i in range(5):
        engagement_create(name=f"acme-{i + 2}", customer="ACME", start_date="2026-11-02")
    client.force_login(customer_a)
    # 8: session, user, membership, engagements, gates, decisions, verdicts, and every
    # report version joined with its sign-offs (the portal serves each series' latest).
    with django_assert_max_num_queries(8):
        assert client.get(reverse("portal")).status_code == 200
