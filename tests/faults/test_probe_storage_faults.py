"""A node's output the database cannot hold, and an outputs directory that cannot be written:
before, a NUL in a tool's output (PostgreSQL's text and jsonb hold none) was retried for
30 seconds as a "lost connection" and left its probe run ``running`` in a failed run; a full
outputs directory failed the job as ``internal`` with a traceback and the same running probe.
Now the NUL shows as U+FFFD and the gate decides; a full disk fails the probe and its job with
kind ``storage`` and one sentence, nothing left running, nothing half-written kept; and any
database error that is not the connection's is not retried.

The full disk is ``ENOSPC`` raised by ``fsync`` at the exact step (no tmpfs here), as in
``test_report_disk_full.py``."""

from __future__ import annotations

import errno
import os

import pytest
from django.db import DataError, OperationalError

from runners import lease, outputs
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.parsers import NUL_SHOWN
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow


def test_a_nul_in_a_drive_model_is_shown_as_the_replacement_character_and_g1_decides(lab):
    engagement, _ = lab("healthy", drives={"model": "FX100\u00007.68TB"})
    code, out, err = run_gate(engagement.name, "G1")
    assert code in (0, 1), out + err  # decided (the model is not the array's: it may stop)
    run = GateRun.objects.get(gate__engagement=engagement)
    assert run.state == GateRun.State.DONE and run.decision is not None
    models = set(Measurement.objects.filter(gate_run=run, metric="drive_present")
                 .values_list("labels__model", flat=True))
    assert models == {f"FX100{NUL_SHOWN}7.68TB"}
    assert not ProbeRun.objects.filter(gate_run=run, state=ProbeRun.State.RUNNING).exists()


def no_room_to_fsync(monkeypatch):
    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", fsync)


def test_a_full_outputs_disk_fails_the_probe_and_job_as_storage_with_nothing_left_running(
        lab, settings, monkeypatch):
    engagement, _ = lab("healthy")
    with monkeypatch.context() as patch:
        no_room_to_fsync(patch)
        code, out, err = run_gate(engagement.name, "G1")
    # the service's own evidence (the BOM snapshot) cannot be kept either: nothing starts
    assert (code, err.strip()) == (2, (
        f"refused: G1: the bill-of-materials snapshot could not be stored: the raw output could "
        f"not be written under {settings.OUTPUTS_DIR} (No space left on device): nothing of it "
        f"is kept; nothing was started.")), out + err
    assert not GateRun.objects.filter(gate__engagement=engagement).exists()

    # The disk fills after the launch: the first probe on the node cannot be kept.
    real_store = outputs.output_store
    with monkeypatch.context() as patch:
        def store_then_fill(*args, **kwargs):
            stored = real_store(*args, **kwargs)
            no_room_to_fsync(patch)
            return stored

        patch.setattr(outputs, "output_store", store_then_fill)
        code, out, err = run_gate(engagement.name, "G1")
    assert code == 2, out + err
    assert "Traceback" not in out + err
    run = GateRun.objects.get(gate__engagement=engagement)
    job = NodeJob.objects.get(gate_run=run)
    assert (run.state, job.state, job.error_kind) == ("failed", "failed", "storage")
    assert job.error.endswith(f"the raw output could not be written under "
                              f"{settings.OUTPUTS_DIR} (No space left on device): nothing of "
                              f"it is kept")
    first = ProbeRun.objects.get(gate_run=run, node__isnull=False)  # the job's first probe
    assert (first.state, first.error_kind, first.stdout_file) == ("failed", "storage", "")
    assert first.error.startswith("the raw output could not be written")
    live = outputs.outputs_dir() / outputs.LIVE_DIRNAME
    assert not any(live.iterdir()), list(live.iterdir())  # no half-written live file kept

    # Room again: the gate runs.
    code, out, err = run_gate(engagement.name, "G1")
    assert code == 0, out + err


def test_only_a_lost_connection_is_retried_not_data_the_database_refuses(settings,
                                                                        monkeypatch):
    settings.RUNS_DB_RETRY_SECONDS = 30
    monkeypatch.setattr(lease.time, "sleep", lambda s: None)
    calls = []

    def refused():
        calls.append(1)
        raise DataError("unsupported Unicode escape sequence")

    with pytest.raises(DataError):
        lease.db_retry(refused, what="probe run 1")
    assert len(calls) == 1  # not retried: it would be refused again

    answers = [OperationalError("server closed the connection unexpectedly"), "written"]

    def flaky():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert lease.db_retry(flaky, what="probe run 1") == "written"


def test_a_job_that_breaks_between_a_probes_start_and_its_result_leaves_no_probe_running(
        lab, monkeypatch):
    """A parser that breaks unexpectedly (a bug, not a ParseError): the result is saved as
    ``parsing``, the job fails as ``internal``, and the probe run ends failed with the job's
    words instead of staying ``parsing`` for ever."""
    from runners.parsers import nvme_list

    def broken(raw):
        raise RuntimeError("parser bug")

    monkeypatch.setattr(nvme_list, "parse", broken)
    engagement, _ = lab("healthy")
    code, out, err = run_gate(engagement.name, "G1")
    assert code == 2, out + err
    run = GateRun.objects.get(gate__engagement=engagement)
    job = NodeJob.objects.get(gate_run=run)
    assert (job.state, job.error_kind, job.error) == ("failed", "internal",
                                                      "RuntimeError: parser bug")
    probe = ProbeRun.objects.get(gate_run=run, probe="nvme_inventory")
    assert (probe.state, probe.error_kind) == ("failed", "internal")
    assert probe.error == ("the node job ended (internal) before this probe's result was "
                           "stored: RuntimeError: parser bug")
    assert probe.stdout_sha256  # its raw output was kept before the parser ran
    assert not ProbeRun.objects.filter(gate_run=run, state__in=["running", "parsing"]).exists()
