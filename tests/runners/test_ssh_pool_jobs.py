"""Node jobs and the kept SSH connections (``runners.execution.SSH_POOL``) on a real lab sshd:
a node's next job reuses the connection a clean job left, and asks its tools' versions again
(a tool upgraded between two runs is recorded as the one that printed the output);
a node whose sshd died meanwhile gets a fresh one and its job succeeds; a node whose pinned
host key changed in the database never gets the old one."""

import pytest
from django.utils import timezone

from runners import execution
from runners.lab.server import keypair
from runners.models import GateRun, NodeJob
from tests.transport.test_pool import kill_and_restart

pytestmark = pytest.mark.slow

PLAN = [{"probe": "nvme_smart_log", "role": "array", "params": {"device": "/dev/nvme3"}}]


@pytest.fixture
def array(lab, monkeypatch):
    monkeypatch.setattr(execution, "gate_run_finish_if_complete", lambda **_: None)
    monkeypatch.setattr(execution, "SSH_POOL", execution.SSHPool(
        idle_s=60.0, max_age_s=600.0, size=8, check_timeout_s=5.0))
    engagement, server = lab("healthy")
    gate = engagement.gates.get(code="G1")
    gate.probe_plan = PLAN
    gate.save(update_fields=["probe_plan"])
    yield gate, engagement.nodes.get(role="array"), server
    execution.SSH_POOL.close_all()


def job_run(gate, node, attempt: int, **fields) -> NodeJob:
    run = GateRun.objects.create(gate=gate, attempt=attempt, started_by="engineer",
                                 state=GateRun.State.RUNNING, **fields)
    job = NodeJob.objects.create(gate_run=run, node=node)
    execution.node_job_execute(node_job_id=job.id)
    job.refresh_from_db()
    return job


def test_the_next_job_on_a_node_reuses_the_connection_and_asks_the_tool_version_again(array):
    gate, node, server = array
    first = job_run(gate, node, 1)
    assert first.state == "done", first.error
    kept = execution.SSH_POOL
    assert (kept.opened, kept.reused, kept.idle_count()) == (1, 0, 1)
    # the engineer upgrades nvme-cli between the two runs: same node session, new tool
    nvme = server.directory / "bin" / "nvme"
    real = nvme.with_name("nvme.real")
    nvme.rename(real)
    nvme.write_text('#!/bin/sh\ncase "$1" in version|--version) '
                    'echo "nvme version 9.99 (upgraded)"; exit 0;; esac\n'
                    f'exec "{real}" "$@"\n')
    nvme.chmod(0o755)
    second = job_run(gate, node, 2)
    assert second.state == "done", second.error
    assert (kept.opened, kept.reused, kept.idle_count()) == (1, 1, 1)
    versions = [job.gate_run.probe_runs.get().tool_version for job in (first, second)]
    assert versions[0].startswith("nvme version") and "9.99" not in versions[0]
    assert versions[1] == "nvme version 9.99 (upgraded)"


def test_a_node_whose_sshd_died_between_two_jobs_gets_a_fresh_connection(array):
    gate, node, server = array
    assert job_run(gate, node, 1).state == "done"
    kill_and_restart(server)
    second = job_run(gate, node, 2)
    assert second.state == "done", second.error
    assert second.gate_run.probe_runs.get().state == "parsed"
    assert (execution.SSH_POOL.opened, execution.SSH_POOL.reused) == (2, 0)


def test_a_node_whose_pinned_host_key_changed_never_gets_the_old_connection(array):
    gate, node, _ = array
    assert job_run(gate, node, 1).state == "done"
    node.host_key = keypair()[1]  # as if the node were re-enrolled with another key
    node.save(update_fields=["host_key"])
    second = job_run(gate, node, 2)
    assert (second.state, second.error_kind) == ("failed", "host_key"), second.error
    assert "not the pinned key" in second.error
    assert execution.SSH_POOL.reused == 0
    assert execution.SSH_POOL.idle_count() == 1  # the old one stays kept for the old key only


def test_a_cancelled_job_closes_the_connection_it_took(array):
    gate, node, _ = array
    assert job_run(gate, node, 1).state == "done"
    cancelled = job_run(gate, node, 2, cancel_requested_at=timezone.now())
    assert cancelled.state == "cancelled", cancelled.error
    assert (execution.SSH_POOL.reused, execution.SSH_POOL.idle_count()) == (1, 0)
