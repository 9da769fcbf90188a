"""The soak page and the soak plan page, on a recorded soak (the rows a compressed lab soak
leaves, ``pages_fixtures``): what a person reads, the live fragment, and the actions'
refusals. A real lab soak watched through the pages: ``test_pages_lab.py``."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from acceptance.models import AuditEntry
from gates.models import Decision
from runners.models import GateRun
from runners.soak.models import FaultTarget, Soak
from runners.soak.plan import argv_sha256, plan_sha256

from .pages_fixtures import personas, recorded_soak


@pytest.fixture
def people(db):
    return personas("ACME")


def page(client, soak) -> str:
    response = client.get(reverse("soak-detail", args=[soak.id]))
    assert response.status_code == 200
    return response.content.decode()


def plan_of_gate():
    from gates.models import Gate

    return Gate.objects.get(engagement__name="acme-soak", code="G4").probe_plan[0]["soak"]


def plan_of(soak):
    soak.gate_run.gate.refresh_from_db()
    return soak.gate_run.gate.probe_plan[0]["soak"]


def test_it_shows_a_running_soak_with_progress_checks_charts_faults_gaps_and_events(people):
    soak = recorded_soak(drive_impact=True)
    html = page(people.customer.client, soak)
    # Progress: 18 of 30 real seconds = 43 h 12 min of the 72 h plan.
    assert 'id="soak-percent">60 %<' in html and 'style="width: 60.0%"' in html
    assert ">43 h 12 min</strong> of <strong>72 h</strong>" in html
    assert ">18 s</strong> of <strong>30 s</strong>" in html and "compressed ×8640" in html
    assert 'id="soak-state">running<' in html and "SIMULATED EVIDENCE" in html
    # Live: polls its fragment while running.
    assert f'hx-get="{reverse("soak-live", args=[soak.id])}?seen=running-0"' in html
    # Checks: the error rate failed during the drive fault, the rest holds; correctness shows
    # the diverging answer.
    assert 'class="check fail" data-check="error-rate"' in html and "18.75 %" in html
    assert 'class="check pass" data-check="ttft-p99"' in html and "+12.5 % vs baseline" in html
    assert 'class="check fail" data-check="correctness"' in html
    # the latest answer is exact again, the earlier divergence stays in view
    assert "<code>translate</code> exact <span class=\"error\">· diverges at token 5 at 12:00:09" \
        in html
    # Charts: four SVGs, the drive fault shaded, the link fault planned, the gap marked.
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg"') == 4
    assert html.count('class="fault-window" data-fault="drive-out"') == 4
    assert html.count('class="fault-planned" data-fault="link-down"') == 4
    assert html.count('class="collection-gap"') == 4
    # Fault table: window, heal armed and how it fired, per-phase checks, verdict.
    assert "12:00:07 → 12:00:12 UTC" in html and "4.5 s" in html
    assert "healed by <strong>timer</strong>" in html and "setsid" in html
    assert '<span class="badge fail">not met</span>' in html and "not yet" in html
    # Gap and events.
    assert "12:00:14 UTC" in html and "(1.7 s)" in html and "re-attached" in html
    assert "drive-out: drive 7 out" in html


def test_a_finished_soak_stops_polling_and_shows_the_decision(people):
    soak = recorded_soak(drive_impact=True, finished=True)
    Soak.objects.filter(id=soak.id).update(
        stop_reason="error-rate: 0.1875 — lab-inference-1 in fault window drive-out, during")
    Decision.objects.create(gate=soak.gate_run.gate, gate_run=soak.gate_run, outcome="stopped",
                            sentence="G4 Stability and acceptance: stopped.",
                            decided_by="service", decided_at=timezone.now())
    html = page(people.engineer.client, soak)
    assert "hx-get=" not in html.split('id="soak-live"')[1].split(">")[0]
    assert 'id="soak-decision"' in html and "G4 Stability and acceptance: stopped." in html
    assert "in fault window drive-out, during" in html
    assert 'id="soak-pause"' not in html and 'id="soak-abort"' not in html
    # The actions outside the fragment are replaced when the state changed since the last poll.
    running = people.engineer.client.get(reverse("soak-live", args=[soak.id]) + "?seen=done-0")
    assert b"soak-actions" not in running.content
    live = people.engineer.client.get(reverse("soak-live", args=[soak.id])).content.decode()
    assert live.startswith('<div id="soak-live" data-state="done">')
    assert '<div id="soak-actions" hx-swap-oob="true"' in live  # actions cleared live


def test_the_live_fragment_follows_the_soak(people):
    soak = recorded_soak()
    Soak.objects.filter(id=soak.id).update(loaded_s=27.0)
    live = people.customer.client.get(reverse("soak-live", args=[soak.id])).content.decode()
    assert 'id="soak-percent">90 %<' in live and "hx-trigger=\"every 2s\"" in live
    assert "<html" not in live  # a fragment, not a page


def test_pausing_or_aborting_without_a_reason_is_refused_and_changes_nothing(people):
    soak = recorded_soak()
    for name in ("soak-pause", "soak-abort"):
        response = people.engineer.client.post(reverse(name, args=[soak.id]), {"reason": " "},
                                               follow=True)
        assert "needs a reason" in response.content.decode()
    soak.refresh_from_db()
    assert soak.state == "running" and soak.abort_requested_at is None
    response = people.engineer.client.post(reverse("soak-resume", args=[soak.id]), follow=True)
    assert "Not resumed: the soak is running, not paused" in response.content.decode()


def test_an_engineer_edits_the_plan_with_a_reason_recorded_in_the_audit_trail(people):
    soak = recorded_soak()
    Soak.objects.filter(id=soak.id).update(state="done")
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    plan = plan_of(soak)
    old_sha = plan_sha256(plan)
    plan["load"]["concurrency"] = 8
    response = people.manager.client.post(
        reverse("soak-plan-edit", args=["acme-soak", "G4"]),
        {"plan": json.dumps(plan), "reason": "customer asked for c8"})
    assert response.status_code == 302
    assert plan_of(soak)["load"]["concurrency"] == 8
    entry = AuditEntry.objects.get(action="soak plan changed")
    assert entry.actor == "pm-paula" and entry.reason == "customer asked for c8"
    assert entry.details["changed"] == ["load.concurrency"]
    assert entry.details["old_sha256"] == old_sha
    assert entry.details["new_sha256"] == plan_sha256(plan_of(soak))
    html = people.customer.client.get(reverse("soak-plan", args=["acme-soak", "G4"])).content
    assert b"customer asked for c8" in html and plan_sha256(plan_of(soak)).encode() in html


@pytest.mark.parametrize(("change", "says"), [
    (lambda p: p["load"].update(window_s=1), "load.window_s compressed is"),
    (lambda p: p.update(duration_s="72h"), "duration_s must be a number"),
    (lambda p: p["faults"][0].update(start_s=10**9), "faults[0].start_s="),
])
def test_a_bad_plan_names_the_field_and_nothing_changes(people, change, says):
    soak = recorded_soak()
    Soak.objects.filter(id=soak.id).update(state="done")
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    before = plan_of(soak)
    plan = json.loads(json.dumps(before))
    change(plan)
    response = people.engineer.client.post(
        reverse("soak-plan-edit", args=["acme-soak", "G4"]),
        {"plan": json.dumps(plan), "reason": "try"})
    text = response.content.decode()
    assert response.status_code == 200 and "Not saved, nothing changed" in text
    assert says.replace("'", "&#x27;") in text or says in text
    assert plan_of(soak) == before and not AuditEntry.objects.filter(
        action="soak plan changed").exists()


def test_a_plan_edit_without_a_reason_or_valid_json_is_refused(people):
    soak = recorded_soak()
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    url = reverse("soak-plan-edit", args=["acme-soak", "G4"])
    before = plan_of(soak)
    text = people.engineer.client.post(url, {"plan": '{"duration_s": ', "reason": "x"}
                                       ).content.decode()
    assert "the plan is not valid JSON" in text and "line 1, column" in text
    text = people.engineer.client.post(url, {"plan": json.dumps(before), "reason": ""}
                                       ).content.decode()
    assert "This field is required" in text
    # While a soak runs, the plan it runs on does not move.
    GateRun.objects.filter(id=soak.gate_run_id).update(state="running")
    changed = dict(before, sampling_s=before["sampling_s"] * 2)
    text = people.engineer.client.post(url, {"plan": json.dumps(changed), "reason": "x"}
                                       ).content.decode()
    assert "a soak is in progress" in text and plan_of(soak) == before


def test_a_plan_json_python_cannot_hold_is_refused_in_one_line(people):
    soak = recorded_soak()
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    url = reverse("soak-plan-edit", args=["acme-soak", "G4"])
    before = plan_of(soak)
    for plan, says in [
            ('{"load": {"request_rate": 1' + "0" * 5000 + "}}",
             "the plan is not valid JSON: a number in it has more than 4300 digits"),
            ("[" * 100_000, "the plan is not valid JSON: it is nested too deeply")]:
        response = people.engineer.client.post(url, {"plan": plan, "reason": "x"})
        text = response.content.decode()
        assert response.status_code == 200 and "Not saved, nothing changed" in text
        assert says in text
    assert plan_of(soak) == before


def test_marking_a_fault_target_needs_a_confirmation_naming_node_and_target(people):
    recorded_soak()
    url = reverse("soak-target-mark", args=["acme-soak", "G4"])
    count = FaultTarget.objects.count()
    response = people.engineer.client.post(url, {"node": "lab-array", "kind": "drive_out",
                                                 "target": "3", "confirmation": "ok"})
    assert response.status_code == 200 and "Not marked, nothing stored" in response.content.decode()
    assert FaultTarget.objects.count() == count
    # Issue 13 item 4: a drive's confirmation binds the plan's command: drive 3 is in no
    # fault of the plan, and naming node and drive without the commands' sha256 is refused.
    response = people.engineer.client.post(url, {
        "node": "lab-array", "kind": "drive_out", "target": "3",
        "confirmation": "allow drive_out of 3 on lab-array"})
    assert "no drive fault of the soak plan takes drive 3 out" in response.content.decode()
    response = people.engineer.client.post(url, {
        "node": "lab-array", "kind": "drive_out", "target": "7",
        "confirmation": "allow drive_out of 7 on lab-array"})
    text = response.content.decode()
    assert "soak-array drive out 7" in text and "sha256" in text
    sha = argv_sha256({"inject": ["soak-array", "drive", "out", "7"],
                       "heal": ["soak-array", "drive", "in", "7"],
                       "status": ["soak-array", "drive", "status"]})
    response = people.engineer.client.post(url, {
        "node": "lab-array", "kind": "drive_out", "target": "7",
        "confirmation": f"allow drive_out of 7 on lab-array sha256 {sha[:12]}"})
    assert response.status_code == 302
    marked = FaultTarget.objects.get(target="7")
    assert marked.confirmed_by == "eng-erin" and marked.node.name == "lab-array"
    assert marked.argv["inject"] == ["soak-array", "drive", "out", "7"]
    assert marked.argv_sha256 == sha and marked.plan_sha256 == plan_sha256(plan_of_gate())
    html = people.engineer.client.get(reverse("soak-plan", args=["acme-soak", "G4"])).content
    assert f"allow drive_out of 7 on lab-array sha256 {sha[:12]}".encode() in html
    assert b'id="to-confirm"' in html and b"inject: soak-array drive out 7" in html
    assert f"sha256 <code>{sha}</code>".encode() in html


def test_starting_while_a_soak_runs_is_refused_and_creates_nothing(people):
    soak = recorded_soak()
    runs = GateRun.objects.count()
    response = people.engineer.client.post(reverse("soak-start", args=["acme-soak", "G4"]),
                                           follow=True)
    assert "Not started, nothing was created" in response.content.decode()
    assert GateRun.objects.count() == runs and Soak.objects.count() == 1
    assert soak.gate_run.gate.engagement.name == "acme-soak"


def test_the_engagement_page_links_the_soak_gate_only(people):
    soak = recorded_soak()
    html = people.customer.client.get("/engagements/acme-soak/").content.decode()
    assert html.count(reverse("soak-plan", args=["acme-soak", "G4"])) == 1
    assert reverse("soak-detail", args=[soak.id]) in html
    assert reverse("soak-plan", args=["acme-soak", "G2"]) not in html
    response = people.customer.client.get(reverse("soak-plan", args=["acme-soak", "G2"]))
    assert response.status_code == 404  # not a soak gate


def test_without_workers_a_soak_is_not_started_from_the_web(people):
    """Eager Celery (no broker) would drive the whole soak inside the request: refused, with
    the command that starts it instead."""
    soak = recorded_soak()
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    Soak.objects.filter(id=soak.id).update(state="done")
    plan = people.engineer.client.get(reverse("soak-plan", args=["acme-soak", "G4"])).content
    assert b'id="soak-start"' not in plan and b"manage.py run_gate acme-soak G4" in plan
    response = people.engineer.client.post(reverse("soak-start", args=["acme-soak", "G4"]),
                                           follow=True)
    assert "Not started, nothing was created" in response.content.decode()
    assert GateRun.objects.count() == 1


def test_the_generic_launch_page_sends_a_soak_gate_to_its_plan_page(people):
    """``Run G4`` on the engagement page must not start G4 as node probes (an empty run)."""
    soak = recorded_soak()
    GateRun.objects.filter(id=soak.gate_run_id).update(state="done")
    url = reverse("gate-run-start", args=["acme-soak", "G4"])
    for method in ("get", "post"):
        response = getattr(people.engineer.client, method)(url)
        assert response.status_code == 302
        assert response["Location"] == reverse("soak-plan", args=["acme-soak", "G4"])
    assert GateRun.objects.count() == 1
