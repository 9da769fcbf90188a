"""The services behind the project manager's buttons: a threshold change with its audit entry,
and a BOM tick."""

from __future__ import annotations

import pytest

from acceptance.models import AuditEntry, Engagement
from acceptance.services import bom_item_tick
from gates.models import Criterion
from gates.services import criterion_threshold_edit


def criterion(engagement, code, key) -> Criterion:
    return Criterion.objects.get(gate__engagement=engagement, gate__code=code, key=key)


def test_it_changes_a_within_criterion_and_records_both_requirements(engagement_a):
    c = criterion(engagement_a, "G2", "baseline-ttft")
    criterion_threshold_edit(criterion=c, actor="pat-pm", reason=" site reference ",
                             values={"reference_value": 18.0, "tolerance": 0.08})
    c.refresh_from_db()
    assert (c.reference_value, c.tolerance) == (18.0, 0.08)
    entry = AuditEntry.objects.get(action="criterion threshold changed")
    assert entry.reason == "site reference"
    assert entry.details["old_requirement"] == "17.31 s ± 10 %"
    assert entry.details["new_requirement"] == "18 s ± 8 %"


@pytest.mark.parametrize("values,message", [
    ({"threshold": float("inf")}, "finite number"),
    ({}, "finite number"),
    ({"threshold": 23, "threshold_high": 30}, "no editable threshold_high"),
    ({"threshold": 24}, "nothing changed"),
])
def test_it_refuses_bad_values_and_changes_nothing(engagement_a, values, message):
    c = criterion(engagement_a, "G1", "drive-count")
    with pytest.raises(ValueError, match=message):
        criterion_threshold_edit(criterion=c, actor="pm", reason="why", values=values)
    assert criterion(engagement_a, "G1", "drive-count").threshold == 24
    assert not AuditEntry.objects.exists()


def test_between_needs_low_at_most_high(engagement_a):
    c = criterion(engagement_a, "G3", "throughput-gain")
    with pytest.raises(ValueError, match="low threshold is above the high one"):
        criterion_threshold_edit(criterion=c, actor="pm", reason="why",
                                 values={"threshold": 0.5, "threshold_high": 0.4})


def test_it_needs_a_reason(engagement_a):
    with pytest.raises(ValueError, match="needs a reason"):
        criterion_threshold_edit(criterion=criterion(engagement_a, "G1", "drive-count"),
                                 actor="pm", reason=" ", values={"threshold": 23})


def test_an_accepted_engagement_is_final(engagement_a):
    Engagement.objects.filter(pk=engagement_a.pk).update(state=Engagement.State.ACCEPTED)
    with pytest.raises(ValueError, match="accepted"):
        criterion_threshold_edit(criterion=criterion(engagement_a, "G1", "drive-count"),
                                 actor="pm", reason="late", values={"threshold": 23})
    item = engagement_a.bom_items.create(position=1, description="cable")
    item.engagement.refresh_from_db()
    with pytest.raises(ValueError, match="accepted"):
        bom_item_tick(item=item, actor="pm")


def test_a_tick_records_who_and_when_once(engagement_a):
    item = engagement_a.bom_items.create(position=1, description="FX100 array")
    bom_item_tick(item=item, actor="pat-pm")
    first = item.ticked_at
    assert item.ticked_by == "pat-pm" and first is not None
    bom_item_tick(item=item, actor="someone-else")
    assert (item.ticked_by, item.ticked_at) == ("pat-pm", first)
