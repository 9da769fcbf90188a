"""Fault fixtures: a gate run left where a fault leaves it — its decision committed, its signed
report not yet issued — without SSH (the decision is recorded as ``runners.decision`` records
it; rendering and signing are real: WeasyPrint and pyHanko)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from gates.models import Decision
from runners.models import GateRun
from tests.web.conftest import G1_HEALTHY, G1_MISSING_DRIVE, decide  # noqa: F401


class Killed(BaseException):
    """Stands for SIGKILL at the injected point: no ``except Exception`` of the service sees
    it, so nothing after that point runs (the task's error handling included)."""


def evaluating_decision(gate, figures, outcome: str, *, age_s: float = 600) -> Decision:
    """A run in ``evaluating`` whose decision is committed (``age_s`` ago) and whose report is
    not issued: the state a worker killed while rendering the PDF leaves."""
    decision = decide(gate, figures, outcome, settle=False)
    GateRun.objects.filter(id=decision.gate_run_id).update(state=GateRun.State.EVALUATING,
                                                           finished_at=None)
    Decision.objects.filter(id=decision.id).update(
        decided_at=timezone.now() - timedelta(seconds=age_s))
    decision.refresh_from_db()
    decision.gate_run.refresh_from_db()
    return decision


@pytest.fixture
def acme(db):
    from gates.services import engagement_create

    return engagement_create(name="acme-faults", customer="ACME",
                             start_date=timezone.localdate() - timedelta(weeks=3))


def files_in(directory) -> list[str]:
    """Every file under ``directory`` (names relative to it), hidden ones included."""
    from pathlib import Path

    root = Path(directory)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) \
        if root.exists() else []
