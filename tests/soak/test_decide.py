"""The door after the load: ``soak.soak_decide`` records the decision, issues the signed report
and finishes the run; a report that cannot be issued leaves the decision and fails the run
saying so; a soak not waiting for a decision is left alone."""

import pytest

from gates.models import Decision
from runners.models import GateRun
from runners.soak import tasks
from runners.soak.models import Soak

from .pages_fixtures import recorded_soak


@pytest.fixture
def evaluating(db):
    soak = recorded_soak(windows=30)
    Soak.objects.filter(id=soak.id).update(state=Soak.State.EVALUATING)
    return soak


def test_a_report_that_cannot_be_issued_fails_the_run_and_keeps_the_decision(evaluating,
                                                                            monkeypatch):
    def report_issue(*, decision):
        raise OSError("disk full")

    monkeypatch.setattr(tasks, "report_issue", report_issue)
    tasks.soak_decide(soak_id=evaluating.id)
    decision = Decision.objects.get(gate_run_id=evaluating.gate_run_id)
    gate_run = GateRun.objects.get(id=evaluating.gate_run_id)
    assert gate_run.state == GateRun.State.FAILED and gate_run.finished_at
    assert gate_run.error == (f"decision recorded ({decision.outcome}) but the signed report "
                              f"could not be issued: OSError: disk full")
    assert Soak.objects.get(id=evaluating.id).state == Soak.State.DONE


def test_it_issues_the_report_after_the_decision_then_finishes_the_run(evaluating,
                                                                      monkeypatch):
    issued = []
    monkeypatch.setattr(tasks, "report_issue", lambda *, decision: issued.append(decision))
    tasks.soak_decide(soak_id=evaluating.id)
    decision = Decision.objects.get(gate_run_id=evaluating.gate_run_id)
    assert issued == [decision]
    assert GateRun.objects.get(id=evaluating.gate_run_id).state == GateRun.State.DONE
    tasks.soak_decide(soak_id=evaluating.id)  # a duplicate delivery decides nothing again
    assert issued == [decision] and Decision.objects.filter(
        gate_run_id=evaluating.gate_run_id).count() == 1
