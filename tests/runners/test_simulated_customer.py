"""Simulated evidence never decides a customer engagement: a run of an engagement whose
``is_lab`` is false on nodes answering with the lab's stand-in tools — over SSH, as an imported
bundle, or as a soak — ends as an error, with no decision and no report; the run page then says
"customer engagement", never "Lab engagement". The lab keeps deciding on its stand-ins."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from acceptance.models import Engagement, Membership, Node, Organisation
from gates.models import Decision
from reports.models import Report
from runners.decision import SIMULATED_ON_CUSTOMER
from runners.evidence import evidence_import
from runners.models import GateRun
from runners.soak import tasks as soak_tasks
from runners.soak.models import Soak, SoakAgent
from tests.soak.pages_fixtures import recorded_soak

from .test_evidence import collect_on_node

MESSAGE = "simulated evidence on a customer engagement"


def as_customer_engagement(engagement: Engagement) -> Engagement:
    """The lab's engagement and nodes turned into a customer's: its nodes still run the lab's
    stand-in tools (as a mis-set PATH on a customer node would)."""
    Engagement.objects.filter(pk=engagement.pk).update(is_lab=False)
    Node.objects.filter(engagement=engagement).update(is_lab=False)
    engagement.refresh_from_db()
    return engagement


def client_for(username: str, role: str, organisation: str | None = None) -> Client:
    org = Organisation.objects.get_or_create(name=organisation)[0] if organisation else None
    user = User.objects.create_user(username)
    Membership.objects.create(user=user, role=role, organisation=org)
    client = Client()
    client.force_login(user)
    return client


def assert_undecided(gate_run: GateRun) -> None:
    gate_run.refresh_from_db()
    assert gate_run.state == GateRun.State.FAILED
    assert gate_run.error.startswith(MESSAGE + ": ")
    assert not Decision.objects.filter(gate_run=gate_run).exists()
    assert not Report.objects.filter(decision__gate_run=gate_run).exists()
    gate_run.gate.refresh_from_db()
    assert gate_run.gate.state == "pending"
    assert Engagement.objects.get(pk=gate_run.gate.engagement_id).state == "active"


@pytest.mark.slow
def test_an_ssh_run_on_stand_ins_of_a_customer_engagement_ends_as_an_error(lab):
    engagement = as_customer_engagement(lab("healthy")[0])
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G1", stdout=out, stderr=err)
    assert exit_info.value.code == 2  # neither passed (0) nor stopped (1): no decision
    assert f"run failed (no decision): {MESSAGE}" in err.getvalue() + out.getvalue()
    gate_run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    assert_undecided(gate_run)
    assert gate_run.error == (
        f"{MESSAGE}: 49 evidence run(s) on lab-array-controller carry the lab stand-in marker "
        "('acceptance-lab: simulated output'); a customer engagement is decided only on its "
        "own nodes' real tools, so no decision was recorded. Check the node's PATH, then run "
        "the gate again.")

    url = reverse("run-detail", args=[gate_run.id])
    viewers = {
        "pm": client_for("pat-pm", Membership.Role.PROJECT_MANAGER),
        "engineer": client_for("erin-engineer", Membership.Role.ENGINEER),
        "customer": client_for("carla-lab", Membership.Role.CUSTOMER, engagement.customer.name),
    }
    for who, client in viewers.items():
        page = client.get(url)
        assert page.status_code == 200, who
        text = page.content.decode()
        assert MESSAGE in text, who
        assert "Lab engagement" not in text, who
        assert "Customer engagement: some outputs below come from lab stand-in tools" in text
    other = client_for("bob-globex", Membership.Role.CUSTOMER, "Globex")
    assert other.get(url).status_code == 404


@pytest.mark.slow
def test_the_lab_engagement_still_says_lab_on_its_run_page(lab):
    engagement, _ = lab("healthy")
    with pytest.raises(SystemExit):
        call_command("run_gate", engagement.name, "G1", stdout=io.StringIO(),
                     stderr=io.StringIO())
    gate_run = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    assert gate_run.decision.outcome == "passed"
    client = client_for("pat-pm", Membership.Role.PROJECT_MANAGER)
    text = client.get(reverse("run-detail", args=[gate_run.id])).content.decode()
    assert "Lab engagement: the outputs below come from stand-in tools" in text
    assert "Customer engagement" not in text


@pytest.mark.slow
def test_an_imported_bundle_of_stand_ins_on_a_customer_engagement_ends_as_an_error(lab,
                                                                                   tmp_path):
    engagement, _ = lab("missing-drive")
    gate, bundles = collect_on_node(engagement, "G1", tmp_path)
    as_customer_engagement(engagement)
    gate.refresh_from_db()
    gate_run = evidence_import(gate=gate, bundles=bundles, imported_by="customer-ops")
    assert gate_run.origin == GateRun.Origin.IMPORTED
    assert_undecided(gate_run)
    assert "47 evidence run(s) on lab-array-controller" in gate_run.error


def evaluating_soak(*, lab: bool, simulated: bool) -> Soak:
    soak = recorded_soak(windows=30, lab=lab)
    SoakAgent.objects.filter(soak=soak).update(simulated=simulated)
    Soak.objects.filter(id=soak.id).update(state=Soak.State.EVALUATING)
    return soak


def test_a_soak_on_stand_ins_of_a_customer_engagement_ends_as_an_error(db, monkeypatch):
    issued = []
    monkeypatch.setattr(soak_tasks, "report_issue", lambda *, decision: issued.append(decision))
    soak = evaluating_soak(lab=False, simulated=True)
    soak_tasks.soak_decide(soak_id=soak.id)
    assert issued == []
    assert_undecided(GateRun.objects.get(id=soak.gate_run_id))
    soak.refresh_from_db()
    assert soak.state == Soak.State.FAILED and soak.error.startswith(MESSAGE)
    assert "lab-inference-1" in soak.error
    assert soak.events.get(kind="no decision").text == soak.error


def test_a_lab_soak_on_stand_ins_is_still_decided(db, monkeypatch):
    issued = []
    monkeypatch.setattr(soak_tasks, "report_issue", lambda *, decision: issued.append(decision))
    soak = evaluating_soak(lab=True, simulated=True)
    soak_tasks.soak_decide(soak_id=soak.id)
    assert [d.gate_run_id for d in issued] == [soak.gate_run_id]


def test_the_message_is_the_documented_one():
    assert SIMULATED_ON_CUSTOMER == MESSAGE
