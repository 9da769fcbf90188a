"""Accepting a gate in review: a person, a reason, the audit trail; nothing else passes it."""

from datetime import date

import pytest

from acceptance.models import AuditEntry, Engagement
from gates.models import Gate
from gates.services import engagement_create, gate_review_accept


@pytest.fixture
def engagement(db):
    return engagement_create(name="acme-review", customer="ACME", start_date=date(2026, 1, 5))


def test_it_passes_a_reviewed_gate_and_records_who_and_why(engagement):
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    gate = engagement.gates.get(code="G3")
    gate.state = Gate.State.REVIEW
    gate.save()
    gate_review_accept(gate=gate, actor="pm-alice", reason="  gain confirmed on site  ")
    gate.refresh_from_db()
    assert gate.state == Gate.State.PASSED
    entry = AuditEntry.objects.get(engagement=engagement, action="review accepted")
    assert (entry.actor, entry.reason, entry.details["gate"]) == (
        "pm-alice", "gain confirmed on site", "G3")
    assert Engagement.objects.get(pk=engagement.pk).state == Engagement.State.ACTIVE


def test_accepting_the_last_gate_accepts_the_engagement(engagement):
    engagement.gates.update(state=Gate.State.PASSED)
    last = engagement.gates.get(code="G4")
    last.state = Gate.State.REVIEW
    last.save()
    gate_review_accept(gate=last, actor="pm", reason="ok")
    assert Engagement.objects.get(pk=engagement.pk).state == Engagement.State.ACCEPTED


@pytest.mark.parametrize("state", [Gate.State.PENDING, Gate.State.PASSED, Gate.State.STOPPED])
def test_it_refuses_a_gate_that_is_not_in_review(engagement, state):
    gate = engagement.gates.get(code="G3")
    gate.state = state
    gate.save()
    with pytest.raises(ValueError, match="not in review"):
        gate_review_accept(gate=gate, actor="pm", reason="why not")
    assert not AuditEntry.objects.filter(action="review accepted").exists()


def test_it_needs_a_reason(engagement):
    gate = engagement.gates.get(code="G3")
    gate.state = Gate.State.REVIEW
    gate.save()
    with pytest.raises(ValueError, match="needs a reason"):
        gate_review_accept(gate=gate, actor="pm", reason="   ")
    gate.refresh_from_db()
    assert gate.state == Gate.State.REVIEW
