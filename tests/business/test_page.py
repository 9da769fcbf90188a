"""The business-case page: the project manager enters the parameters (audited, one-line
refusals), the page shows the case and its charts, the customer sees the same figures; other
customers get 404; the engineer sees it but may not edit."""

from __future__ import annotations

from acceptance.models import AuditEntry
from tests.business.test_services_api import PARAMS, g3_decide

URL = "/engagements/acme-1/business-case/"


def test_pm_enters_the_parameters_and_the_customer_sees_the_same(client, engagement_a, pm,
                                                                 customer_a):
    g3_decide(engagement_a)
    client.force_login(pm)
    before = client.get(URL).content.decode()
    assert "Not established:" in before and "parameters missing: nodes" in before
    assert "vendor figure: FX100 platform ¥160,000 + 24 × ¥8,800" in before
    refused = client.post(URL, {**PARAMS, "resume_share": "7"})
    assert refused.status_code == 400
    assert ("share of tokens from long-context resumes: 7 is outside 0 … 1 (share 0–1)"
            in refused.content.decode())
    # the form keeps what was typed; the Inputs table what is stored (nothing yet)
    assert 'name="resume_share" value="7"' in refused.content.decode()
    assert refused.content.decode().count('<span class="error">not given</span>') >= 1
    saved = client.post(URL, {**PARAMS, "array_price": "371200"})
    assert saved.status_code == 302
    page = client.get(URL).content.decode()
    assert "176 → 128" in page and "621.89 → 451.82" in page and "+39.7 %" in page
    assert 'id="chart-cost-per-mtok"' in page and 'id="chart-cumulative-saving"' in page
    assert "1.4 months" in page and "1.5 %" in page
    # stored figures come back as typed (15, 100000000), not as floats (15.0, 100000000.0)
    assert 'name="gpu_cost_per_hour" value="15"' in page
    assert 'name="tokens_per_day" value="100000000"' in page
    # the GPU purchase price is the alternative to the cost per hour: not given, not an error
    assert '<td>GPU purchase price</td><td><span class="muted">not given</span>' in page
    assert "only that share of the tokens (100 %) gets it" in page
    assert AuditEntry.objects.filter(action="business parameters changed",
                                     actor="pat-pm").count() == 1
    client.force_login(customer_a)
    seen = client.get(URL).content.decode()
    assert "176 → 128" in seen and "621.89 → 451.82" in seen


def test_who_may_see_and_edit(client, engagement_a, engagement_b, customer_b, engineer):
    client.force_login(customer_b)
    assert client.get(URL).status_code == 404
    client.force_login(engineer)
    assert client.get(URL).status_code == 200
    assert client.post(URL, PARAMS).status_code == 403
    assert not AuditEntry.objects.filter(action="business parameters changed").exists()


def test_a_post_that_leaves_fields_out_keeps_their_stored_values(client, engagement_a, pm):
    g3_decide(engagement_a)
    client.force_login(pm)
    assert client.post(URL, PARAMS).status_code == 302
    assert client.post(URL, {"nodes": "30"}).status_code == 302
    row = engagement_a.business_parameters
    row.refresh_from_db()
    assert (row.nodes, row.gpus_per_node, row.tokens_per_day, row.currency, row.array_price) \
        == (30, 8, 100e6, "CNY", 371_200)
    refused = client.post(URL, {"arrays": "many"})
    assert refused.status_code == 400
    assert "arrays: &#x27;many&#x27; is not a number (arrays)" in refused.content.decode()
    # a field the form did not send is shown with its stored value, not emptied
    assert 'value="30"' in refused.content.decode()
    row.refresh_from_db()
    assert row.arrays == 2
