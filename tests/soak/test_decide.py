"""The door after the load: ``soak.soak_decide`` records the decision, issues the signed report
and finishes the run; a report that cannot be issued leaves the decision and fails the run
saying so; a soak not waiting for a decision is left alone."""

import pytest

from gates.models import Decision
from runners.models import GateRun, Measurement
from runners.soak import tasks
from runners.soak.models import Soak, SoakWindow

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


USED = {"request_error_rate": {"completed_requests", "failed_requests"},
        "completion_gap_max": {"completion_gap_max"}, "probe_mismatches": {"probe_mismatches"}}


def linked_metrics(soak):
    """{(metric, phase, fault, figure): the metrics of the rows the stored figure links}."""
    return {(f.metric, f.labels.get("phase", ""), f.labels.get("fault", ""),
             f.labels.get("figure", "")): {m.metric for m in f.inputs.all()}
            for f in Measurement.objects.filter(gate_run_id=soak.gate_run_id, derived=True)
            .prefetch_related("inputs")}


def test_each_stored_figure_links_only_the_rows_of_what_it_used(evaluating, monkeypatch):
    monkeypatch.setattr(tasks, "report_issue", lambda *, decision: None)
    tasks.soak_decide(soak_id=evaluating.id)
    linked = linked_metrics(evaluating)
    assert len(linked) > 10
    for (metric, _phase, _fault, figure), metrics in linked.items():
        if metric in USED:
            assert metrics == USED[metric], metric
        elif metric == "baseline_deviation":
            assert metrics == {figure}, figure
    duration = Measurement.objects.get(gate_run_id=evaluating.gate_run_id,
                                       metric="soak_duration")
    assert duration.inputs.count() == 30  # one row per window


def test_a_soak_folded_before_the_rows_per_metric_were_kept_still_evaluates(evaluating,
                                                                           monkeypatch):
    SoakWindow.objects.filter(soak=evaluating).update(metric_ids=[])
    monkeypatch.setattr(tasks, "report_issue", lambda *, decision: None)
    tasks.soak_decide(soak_id=evaluating.id)
    assert Decision.objects.filter(gate_run_id=evaluating.gate_run_id).exists()
    linked = linked_metrics(evaluating)  # every row of each window, as before
    assert linked[("request_error_rate", "steady", "", "")] == {
        "completed_requests", "failed_requests", "ttft_p99", "output_throughput",
        "completion_gap_max"}
