"""The engagement page: header, BOM checklist (ticked by project managers), inventory, every
gate with its criteria, latest decision and evidence, threshold changes and re-opening with a
reason in the audit trail; bad input changes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from acceptance.models import Array, AuditEntry, BomItem, Credential, Engagement, Node
from gates.models import Criterion, Gate
from gates.plain import source_words
from runners.models import GateRun

HOST_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl "
            "node")


def page(client, user, name="acme-1") -> str:
    client.force_login(user)
    response = client.get(reverse("engagement-detail", args=[name]))
    assert response.status_code == 200
    return response.content.decode()


def test_it_shows_every_gate_with_its_criteria_and_requirement(client, pm, engagement_a):
    html = page(client, pm)
    for code in ("G1", "G2", "G3", "G4"):
        assert f'id="gate-{code}"' in html
    assert "drive_count" in html and "&gt;= 24" in html
    assert "0.29 … 0.4" in html  # G3 throughput gain, between
    assert "17.31 s ± 10 %" in html  # G2 baseline, within
    assert "G1 gate text: all 24 drives of each array (FX100: 24 × 7.68 TB)" in html
    # the sources name the vendor's reports and the chosen reference profile, no internal file
    assert ("R2: Qwen3-Coder-480B-FP8, TP=8, concurrency 16, 8 × AMD Instinct MI308X (192 GB "
            "HBM each), ROCm 7.2: local-NVMe TTFT p50 17.31 s") in html
    # the source as a reader sees it: the published reports named, no internal document
    source = engagement_a.gates.get(code="G1").criteria.get(key="drive-count").source
    assert source_words(source) in html
    assert "DOMAIN.md" not in html and "RUNBOOK" not in html
    assert "ACME" in html and "No decision yet." in html


def test_it_shows_the_latest_decision_with_measured_values_and_the_report(client, pm,
                                                                          stopped_a):
    engagement, decision, report = stopped_a
    html = page(client, pm)
    assert decision.sentence.replace(">", "&gt;") in html
    assert '<span class="badge fail">not met</span>' in html
    assert ">23</td>" in html  # the measured drive count, as measurement_text writes it
    assert reverse("report-download", args=[report.id]) in html
    assert "acme-1-G1.pdf" in html
    assert f'href="/runs/{decision.gate_run_id}/"' in html


def test_customers_see_no_buttons(client, customer_a, stopped_a):
    engagement, decision, report = stopped_a
    html = page(client, customer_a)
    assert f"/runs/{decision.gate_run_id}/" in html  # run pages are readable by them
    assert "Run G1" not in html and "Evidence without SSH" not in html
    assert "Tick as delivered" not in html
    assert "Change threshold" not in html
    assert "Re-open the engagement" not in html
    assert "delivered and checked" in html  # the BOM, read-only
    assert reverse("report-download", args=[report.id]) in html


def test_it_shows_the_inventory(client, pm, engagement_a):
    array = Array.objects.create(engagement=engagement_a, serial="FX-0001",
                                 layout=Array.Layout.RAID0)
    credential = Credential.from_secret("acme-key", "-----BEGIN OPENSSH PRIVATE KEY-----")
    credential.save()
    Node.objects.create(engagement=engagement_a, name="fx-ctl", role=Node.Role.ARRAY,
                        address="10.0.0.5", ssh_user="acctest", host_key=HOST_KEY,
                        credential=credential, array=array)
    html = page(client, pm)
    node = Node.objects.get(name="fx-ctl")
    assert "fx-ctl" in html and "array controller" in html and "10.0.0.5:22" in html
    assert node.host_key_fingerprint in html
    assert "FX-0001" in html and "100 Gb/s" in html and "no redundancy" in html
    assert "BEGIN OPENSSH" not in html


def test_the_audit_trail_is_on_the_page(client, pm, engagement_a):
    AuditEntry.objects.create(engagement=engagement_a, actor="pat-pm", action="node enrolled",
                              reason="fingerprint confirmed on the console")
    html = page(client, pm)
    assert "node enrolled" in html and "fingerprint confirmed on the console" in html


def test_every_audit_action_reads_as_words_not_a_machine_key(client, pm, engagement_a):
    for action in ("report_signoff", "report_reissue", "final_report", "webhook_set"):
        AuditEntry.objects.create(engagement=engagement_a, actor="pat-pm", action=action)
    html = page(client, pm)
    for words in ("report signed off", "report re-issued", "final report issued", "webhook set"):
        assert f"{words}</td>" in html or f"{words}<br>" in html, words
    assert "report_signoff" not in html and "webhook_set" not in html


# --- the BOM checklist -----------------------------------------------------------------------


def test_a_project_manager_ticks_a_bom_item_and_who_and_when_are_recorded(client, pm,
                                                                          stopped_a):
    client.force_login(pm)
    response = client.post(reverse("bom-tick", args=["acme-1", 2]), follow=True)
    assert response.status_code == 200
    item = BomItem.objects.get(engagement__name="acme-1", position=2)
    assert item.ticked_by == "pat-pm" and item.ticked_at is not None
    assert "Ticked: 2 × 100 GbE cable." in response.content.decode()


def test_ticking_with_htmx_answers_the_row(client, pm, stopped_a):
    client.force_login(pm)
    response = client.post(reverse("bom-tick", args=["acme-1", 2]), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<tr id="bom-2">')
    assert "pat-pm" in html and "Tick as delivered" not in html


def test_ticking_twice_keeps_the_first_tick(client, pm, engineer, stopped_a):
    item = BomItem.objects.get(engagement__name="acme-1", position=1)
    client.force_login(pm)
    client.post(reverse("bom-tick", args=["acme-1", 1]))
    again = BomItem.objects.get(pk=item.pk)
    assert (again.ticked_by, again.ticked_at) == (item.ticked_by, item.ticked_at)


def test_ticking_needs_a_post(client, pm, stopped_a):
    client.force_login(pm)
    assert client.get(reverse("bom-tick", args=["acme-1", 2])).status_code == 405


def test_an_unknown_bom_item_is_404(client, pm, stopped_a):
    client.force_login(pm)
    assert client.post(reverse("bom-tick", args=["acme-1", 99])).status_code == 404


# --- threshold changes ----------------------------------------------------------------------


def edit(client, user, data, code="G1", key="drive-count"):
    client.force_login(user)
    return client.post(reverse("criterion-edit", args=["acme-1", code, key]), data)


def criterion(code: str, key: str) -> Criterion:
    return Criterion.objects.get(gate__engagement__name="acme-1", gate__code=code, key=key)


def test_a_threshold_change_records_old_and_new_with_the_reason(client, pm, engagement_a):
    response = edit(client, pm, {"threshold": "23", "reason": "array ships with a spare slot"})
    assert response.status_code == 302
    assert criterion("G1", "drive-count").threshold == 23
    entry = AuditEntry.objects.get(engagement=engagement_a, action="criterion threshold changed")
    assert (entry.actor, entry.reason) == ("pat-pm", "array ships with a spare slot")
    assert entry.details["old"] == {"threshold": 24.0}
    assert entry.details["new"] == {"threshold": 23.0}
    html = page(client, pm)
    assert "G1 drive-count: &gt;= 24 → &gt;= 23" in html


def test_a_between_criterion_changes_both_ends(client, pm, engagement_a):
    response = edit(client, pm, {"threshold": "0.28", "threshold_high": "0.45",
                                 "reason": "customer's own reference"}, "G3", "throughput-gain")
    assert response.status_code == 302
    c = criterion("G3", "throughput-gain")
    assert (c.threshold, c.threshold_high) == (0.28, 0.45)


@pytest.mark.parametrize("code,key,data,error", [
    ("G1", "drive-count", {"threshold": "23", "reason": ""},
     "Give a reason: it is recorded in the audit trail."),
    ("G1", "drive-count", {"threshold": "23", "reason": "   "},
     "Give a reason: it is recorded in the audit trail."),
    ("G1", "drive-count", {"threshold": "twenty", "reason": "typo"},
     "Enter a number, e.g. 24 or 0.83."),
    ("G1", "drive-count", {"threshold": "nan", "reason": "typo"},
     "Enter a number, e.g. 24 or 0.83."),
    ("G1", "drive-count", {"threshold": "", "reason": "typo"}, "Enter a number."),
    ("G1", "drive-count", {"threshold": "24", "reason": "no change"},
     "Nothing changed: these are the current values."),
    ("G3", "throughput-gain", {"threshold": "0.5", "threshold_high": "0.4", "reason": "swap"},
     "threshold: the low threshold is above the high one (0.5 &gt; 0.4)"),
    ("G2", "baseline-ttft", {"reference_value": "17.31", "tolerance": "0", "reason": "tight"},
     "tolerance: the tolerance is a ratio above 0 and at most 1 (0.10 means ±10 %); 0 is not"),
    ("G2", "baseline-ttft", {"reference_value": "0", "tolerance": "0.1", "reason": "zero"},
     "reference_value: ttft_p50 is a time in seconds above 0; 0 is not"),
])
def test_bad_threshold_input_shows_an_error_and_changes_nothing(client, pm, engagement_a, code,
                                                                key, data, error):
    before = Criterion.objects.filter(pk=criterion(code, key).pk).values().get()
    response = edit(client, pm, data, code, key)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert Criterion.objects.filter(pk=before["id"]).values().get() == before
    assert not AuditEntry.objects.filter(action="criterion threshold changed").exists()


def test_a_threshold_cannot_change_while_the_gate_runs(client, pm, engagement_a):
    GateRun.objects.create(gate=engagement_a.gates.get(code="G1"), attempt=1,
                           started_by="erin", state=GateRun.State.RUNNING)
    response = edit(client, pm, {"threshold": "23", "reason": "spare slot"})
    assert "a run is in progress" in response.content.decode()
    assert criterion("G1", "drive-count").threshold == 24


def test_the_edit_form_shows_the_current_requirement(client, pm, engagement_a):
    client.force_login(pm)
    html = client.get(reverse("criterion-edit", args=["acme-1", "G1", "drive-count"])).content
    assert b"&gt;= 24" in html and b'value="24"' in html


# --- re-opening -----------------------------------------------------------------------------


def test_reopening_needs_a_reason_and_changes_nothing_without_one(client, pm, stopped_a):
    client.force_login(pm)
    response = client.post(reverse("engagement-reopen", args=["acme-1"]), {"reason": " "})
    assert "Give a reason: it is recorded in the audit trail." in response.content.decode()
    assert Engagement.objects.get(name="acme-1").state == Engagement.State.STOPPED
    assert not AuditEntry.objects.filter(action="engagement re-opened").exists()


def test_reopening_with_a_reason_puts_the_gate_back_to_pending(client, pm, stopped_a):
    client.force_login(pm)
    response = client.post(reverse("engagement-reopen", args=["acme-1"]),
                           {"reason": "the 24th drive arrived and is seated"}, follow=True)
    assert response.status_code == 200
    engagement = Engagement.objects.get(name="acme-1")
    assert engagement.state == Engagement.State.ACTIVE
    assert engagement.gates.get(code="G1").state == Gate.State.PENDING
    html = response.content.decode()
    assert "engagement re-opened" in html and "the 24th drive arrived and is seated" in html
    assert "gates back to pending: G1" in html


def test_the_stopped_engagement_offers_the_reopen_form(client, pm, stopped_a):
    html = page(client, pm)
    assert reverse("engagement-reopen", args=["acme-1"]) in html
    assert "Re-open the engagement" in html


def test_an_active_engagement_has_nothing_to_reopen(client, pm, engagement_a):
    client.force_login(pm)
    response = client.post(reverse("engagement-reopen", args=["acme-1"]), {"reason": "why"})
    assert "not stopped: there is nothing to re-open" in response.content.decode()
    assert not AuditEntry.objects.filter(action="engagement re-opened").exists()


# --- accepting a review -----------------------------------------------------------------------


def test_a_review_is_accepted_with_a_reason(client, pm, engagement_a):
    engagement_a.gates.filter(code="G3").update(state=Gate.State.REVIEW)
    html = page(client, pm)
    assert reverse("gate-accept-review", args=["acme-1", "G3"]) in html
    response = client.post(reverse("gate-accept-review", args=["acme-1", "G3"]), {"reason": ""})
    assert "Give a reason" in response.content.decode()
    assert engagement_a.gates.get(code="G3").state == Gate.State.REVIEW
    client.post(reverse("gate-accept-review", args=["acme-1", "G3"]),
                {"reason": "gain of 45 % confirmed by a second run"})
    assert engagement_a.gates.get(code="G3").state == Gate.State.PASSED
    assert AuditEntry.objects.filter(action="review accepted", actor="pat-pm").exists()


def test_engagement_names_with_dots_have_pages(client, pm):
    from gates.services import engagement_create

    engagement_create(name="acme.eu-2", customer="ACME", start_date="2026-11-02")
    assert "acme.eu-2" in page(client, pm, "acme.eu-2")


def test_the_page_costs_a_fixed_number_of_queries(client, pm, stopped_a,
                                                  django_assert_max_num_queries):
    from acceptance.services import engagement_reopen
    from tests.web.conftest import G1_MISSING_DRIVE, decide

    engagement = stopped_a[0]
    for _ in range(3):  # more decisions, runs and audit entries: the same queries
        engagement_reopen(engagement=Engagement.objects.get(pk=engagement.pk), actor="pat-pm",
                          reason="again")
        decide(engagement.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    client.force_login(pm)
    # +1: the soak gates and their latest soak; +3: the latest decisions' verdicts, their
    # measurements and inputs (the plain words); +3: the business case shown to the PM
    with django_assert_max_num_queries(20):
        assert client.get(reverse("engagement-detail", args=["acme-1"])).status_code == 200
