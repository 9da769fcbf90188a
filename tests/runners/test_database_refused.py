"""A node job whose worker cannot get a database connection yet (PostgreSQL's max_connections
reached: 'too many clients') waits for one within RUNS_DB_RETRY_SECONDS and then runs, instead
of raising out of the task and leaving its job queued for the sweep's re-send (issue 17: a
128-node wave on a server with max_connections 100)."""

import pytest
from django.db import OperationalError, connection

from runners import execution, lease
from runners.models import GateRun, NodeJob

pytestmark = pytest.mark.slow


def test_a_refused_connection_is_waited_for_then_the_job_runs(lab, monkeypatch, settings):
    engagement, _ = lab("healthy")
    monkeypatch.setattr(execution, "gate_run_finish_if_complete", lambda **_: None)
    gate = engagement.gates.get(code="G2")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="engineer",
                                 state=GateRun.State.RUNNING)
    job = NodeJob.objects.create(gate_run=run, node=engagement.nodes.get(role="inference"))
    settings.RUNS_DB_RETRY_SECONDS = 30
    waits: list[float] = []
    monkeypatch.setattr(lease.time, "sleep", waits.append)
    real, refusals = connection.ensure_connection, []

    def ensure() -> None:
        if len(refusals) < 2:
            refusals.append(1)
            raise OperationalError("FATAL:  sorry, too many clients already")
        real()

    monkeypatch.setattr(connection, "ensure_connection", ensure)
    execution.node_job_execute(node_job_id=job.id)
    job.refresh_from_db()
    assert (len(refusals), waits) == (2, [1.0, 1.0])
    assert job.state == "done", job.error
    assert run.probe_runs.filter(state="parsed").count() == 3


def test_a_database_that_stays_full_raises_after_the_bound(db, monkeypatch, settings):
    settings.RUNS_DB_RETRY_SECONDS = 0  # no second try
    monkeypatch.setattr(lease.time, "sleep", lambda _: None)

    def ensure() -> None:
        raise OperationalError("FATAL:  sorry, too many clients already")

    claimed = []
    monkeypatch.setattr(execution, "job_claim", claimed.append)
    with monkeypatch.context() as patched, pytest.raises(OperationalError):
        patched.setattr(connection, "ensure_connection", ensure)  # undone before teardown
        execution.node_job_execute(node_job_id=1)
    assert claimed == []  # nothing was claimed without a connection
