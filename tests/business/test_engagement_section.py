"""The business case inside the engagement page: the project manager and the engagement's
customer see its figures and both charts there, the same as on its own page; a G3 not passed
gives "not established" with the reason; a lab engagement marks every figure simulated; other
customers get 404, the engineer gets the link only. Under the gate's latest decision, what
was measured against what in plain words."""

from __future__ import annotations

import re

from acceptance.models import Engagement
from business.services import parameters_save
from tests.business.test_services_api import PARAMS, g3_decide

PAGE = "/engagements/acme-1/"
CASE = "/engagements/acme-1/business-case/"
FIGURES = ("176 → 128", "621.89 → 451.82", "+39.7 %", "1.4 months", "1.5 %")


def _section(html: str) -> str:
    found = re.search(r'<section class="business-case" id="business-case">.*?</section>', html,
                      re.S)
    assert found, "no business-case section in the page"
    return found[0]


def test_pm_and_customer_see_the_case_in_the_engagement_page(client, engagement_a, pm,
                                                             customer_a):
    g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    for user in (pm, customer_a):
        client.force_login(user)
        section = _section(client.get(PAGE).content.decode())
        own_page = client.get(CASE).content.decode()
        for figure in FIGURES:
            assert figure in section and figure in own_page, (user.username, figure)
        assert 'id="chart-cost-per-mtok"' in section
        assert 'id="chart-cumulative-saving"' in section
        assert "simulated evidence" not in section  # a customer engagement's own evidence


def test_a_g3_not_passed_gives_not_established_and_why(client, engagement_a, pm):
    g3_decide(engagement_a, outcome="stopped", rounds=((53.6, 60.0),),
              sentence="throughput gain +11.9 % is below +29 %")
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    client.force_login(pm)
    section = _section(client.get(PAGE).content.decode())
    assert "Not established:" in section
    assert "G3 stopped: throughput gain +11.9 % is below +29 %" in section
    assert "176 → 128" not in section and "chart-cost-per-mtok" not in section


def test_a_lab_engagement_says_simulated_evidence_on_every_figure(client, engagement_a, pm):
    Engagement.objects.filter(pk=engagement_a.pk).update(is_lab=True)
    g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    client.force_login(pm)
    section = _section(client.get(PAGE).content.decode())
    # each scenario's column, the sentence under the figures and each chart
    assert section.count("simulated evidence") >= 3 + 1 + 2
    assert "Every figure above comes from simulated evidence." in section


def test_others_do_not_see_the_case_in_the_page(client, engagement_a, engagement_b,
                                               customer_b, engineer):
    g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    client.force_login(customer_b)
    assert client.get(PAGE).status_code == 404
    client.force_login(engineer)
    html = client.get(PAGE).content.decode()
    assert 'id="business-case"' not in html and "176 → 128" not in html
    assert f'href="{CASE}"' in html  # the link to its own page stays
