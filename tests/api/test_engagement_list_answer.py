"""``GET /api/engagements/``'s answer, byte for byte, for a small seeded case: its keys, their
order and every value's form (dates, the creation time, the gates' due dates — moved or not),
so that a change made for speed cannot change what clients read."""

import json
from datetime import UTC, date, datetime

from acceptance.api.serializers import EngagementSerializer, GateSummarySerializer
from gates.models import Gate
from gates.services import engagement_create

GATES = [("G1", "Arrival acceptance", 1, 2), ("G2", "Single-node baseline", 2, 4),
         ("G3", "Main joint test", 3, 7), ("G4", "Stability and acceptance", 4, 10)]


def _gates(start: date, moved: dict[str, str], states: dict[str, str]) -> list[dict]:
    from datetime import timedelta

    return [{"code": code, "name": name, "order": order, "due_week": week,
             "due_date": moved.get(code, (start + timedelta(weeks=week)).isoformat()),
             "state": states.get(code, "pending")} for code, name, order, week in GATES]


def test_the_engagements_list_answers_the_same_bytes(users, client_for):
    first = engagement_create(name="acme.site-1", customer="Acme", start_date=date(2026, 9, 1))
    second = engagement_create(name="globex-1", customer="Globex", start_date=date(2026, 3, 30),
                               is_lab=True)
    type(first).objects.filter(pk=first.pk).update(created_at=datetime(
        2026, 8, 20, 9, 30, 15, 123456, tzinfo=UTC))
    type(second).objects.filter(pk=second.pk).update(
        created_at=datetime(2026, 3, 1, 0, 0, tzinfo=UTC), state="stopped",
        stopped_reason="G2 stopped: 9.1 GB/s < 10 GB/s", report_language="zh-hans",
        max_parallel_nodes=16)
    Gate.objects.filter(engagement=first, code="G2").update(
        rescheduled_due_date=date(2026, 10, 16), state="passed")
    Gate.objects.filter(engagement=second, code="G1").update(state="stopped")
    names = [g["name"] for g in Gate.objects.filter(engagement=first).order_by(
        "order").values("name")]
    assert names == [g[1] for g in GATES]  # the defaults' names, as seeded

    response = client_for("pm").get("/api/engagements/")

    assert response.status_code == 200
    expected = {"count": 2, "next": None, "previous": None, "results": [
        {"name": "acme.site-1", "customer": "Acme", "start_date": "2026-09-01",
         "end_date": "2026-11-10", "state": "active", "stopped_reason": "",
         "report_language": "en", "is_lab": False, "max_parallel_nodes": 128,
         "created_at": "2026-08-20T09:30:15.123456Z",
         "gates": _gates(date(2026, 9, 1), {"G2": "2026-10-16"}, {"G2": "passed"})},
        {"name": "globex-1", "customer": "Globex", "start_date": "2026-03-30",
         "end_date": "2026-06-08", "state": "stopped",
         "stopped_reason": "G2 stopped: 9.1 GB/s < 10 GB/s", "report_language": "zh-hans",
         "is_lab": True, "max_parallel_nodes": 16, "created_at": "2026-03-01T00:00:00Z",
         "gates": _gates(date(2026, 3, 30), {}, {"G1": "stopped"})},
    ]}
    assert response.content == json.dumps(expected, ensure_ascii=False,
                                           separators=(",", ":")).encode()
    for shown in expected["results"]:  # one engagement's own answer: the same object
        alone = client_for("pm").get(f"/api/engagements/{shown['name']}/")
        assert alone.content == json.dumps(shown, ensure_ascii=False,
                                           separators=(",", ":")).encode()


def test_a_customer_sees_only_their_engagements_in_the_same_form(users, client_for):
    engagement_create(name="acme.site-1", customer="Acme", start_date=date(2026, 9, 1))
    engagement_create(name="globex-1", customer="Globex", start_date=date(2026, 9, 1))
    body = client_for("customer").get("/api/engagements/").json()
    assert [e["name"] for e in body["results"]] == ["acme.site-1"]
    assert list(body["results"][0]) == [
        "name", "customer", "start_date", "end_date", "state", "stopped_reason",
        "report_language", "is_lab", "max_parallel_nodes", "created_at", "gates"]
    assert [g["code"] for g in body["results"][0]["gates"]] == ["G1", "G2", "G3", "G4"]
    # The answer is written out by hand (for speed): a field added to a serializer's Meta
    # must be written there too, or this fails.
    assert list(body["results"][0]) == EngagementSerializer.Meta.fields
    assert list(body["results"][0]["gates"][0]) == GateSummarySerializer.Meta.fields
