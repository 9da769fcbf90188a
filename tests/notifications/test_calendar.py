"""A person's calendar feed: RFC 5545 (parsed back with icalendar), each gate's due date with a
stable UID, the soak window and awaited sign-offs; a schedule change raises SEQUENCE and moves
DTSTAMP / LAST-MODIFIED; a revoked URL answers 404; a customer sees only their organisation."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import icalendar
from django.utils import timezone

from acceptance.models import Engagement
from notifications import services
from notifications.models import CalendarEntry, CalendarFeed
from reports.models import Report
from tests.web.conftest import G1_HEALTHY, decide


def _feed(client, token: str, name: str | None = None):
    url = f"/calendar/{token}.ics" if name is None else f"/calendar/{token}/{name}.ics"
    return client.get(url)


def _events(response) -> dict[str, icalendar.Event]:
    assert response.status_code == 200
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    calendar = icalendar.Calendar.from_ical(response.content)
    assert str(calendar["VERSION"]) == "2.0"
    return {str(e["UID"]): e for e in calendar.walk("VEVENT")}


def test_the_feed_lists_each_gates_due_date_and_the_planned_soak_window(client, acme, pm):
    token = services.calendar_feed_renew(user=pm)
    events = _events(_feed(client, token, "acme-prod"))
    gates = {g.code: g for g in acme.gates.all()}
    g1 = events[f"gate-{gates['G1'].id}-due@acceptance-service"]
    assert str(g1["SUMMARY"]) == "acme-prod G1 Arrival acceptance due"
    assert g1.decoded("DTSTART") == acme.start_date + timedelta(weeks=2)
    assert g1.decoded("DTEND") == acme.start_date + timedelta(weeks=2, days=1)
    assert int(g1["SEQUENCE"]) == 0
    assert str(g1["URL"]) == "https://acceptance.vendor.example/engagements/acme-prod/"
    soak = events[f"gate-{gates['G4'].id}-soak-plan@acceptance-service"]
    end = datetime.combine(acme.start_date + timedelta(weeks=10), datetime.min.time(), UTC)
    assert soak.decoded("DTEND") == end
    assert soak.decoded("DTSTART") == end - timedelta(hours=72)  # DOMAIN.md G4: 72 h
    assert len([uid for uid in events if uid.endswith("-due@acceptance-service")]) == 4


def test_a_changed_due_date_keeps_the_uid_and_raises_the_sequence(client, acme, pm):
    token = services.calendar_feed_renew(user=pm)
    g1 = acme.gates.get(code="G1")
    uid = f"gate-{g1.id}-due@acceptance-service"
    before = _events(_feed(client, token))[uid]
    CalendarEntry.objects.update(modified_at=timezone.now() - timedelta(hours=1))
    stamp = _events(_feed(client, token))[uid].decoded("DTSTAMP")  # unchanged: same revision
    assert _events(_feed(client, token))[uid].decoded("DTSTAMP") == stamp
    Engagement.objects.filter(pk=acme.pk).update(start_date=acme.start_date + timedelta(days=7))
    after = _events(_feed(client, token))[uid]
    assert after.decoded("DTSTART") == before.decoded("DTSTART") + timedelta(days=7)
    assert int(after["SEQUENCE"]) == int(before["SEQUENCE"]) + 1
    assert after.decoded("DTSTAMP") > stamp
    assert after.decoded("LAST-MODIFIED") == after.decoded("DTSTAMP")


def test_a_report_awaiting_signoff_is_on_the_calendar_until_both_signed(
        client, acme, pm, tmp_path):
    decision = decide(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    path = tmp_path / "r.pdf"
    path.write_bytes(b"%PDF-1.7\n")
    report = Report.objects.create(decision=decision, path=str(path),
                                   sha256=hashlib.sha256(b"%PDF-1.7\n").hexdigest(),
                                   size_bytes=9, signer="dev", signed_at=timezone.now())
    token = services.calendar_feed_renew(user=pm)
    uid = f"signoff-{acme.id}-gate-{decision.id}@acceptance-service"
    event = _events(_feed(client, token))[uid]
    assert str(event["SUMMARY"]) == "acme-prod: sign-off awaited, acme-prod G1 report v1"
    assert str(event["DESCRIPTION"]) == ("Awaiting the vendor's project manager and the "
                                         "customer's representative.")
    report.signoff_complete = True
    report.save(update_fields=["signoff_complete"])
    assert uid not in _events(_feed(client, token))


def test_a_revoked_or_replaced_url_answers_404(client, acme, pm):
    first = services.calendar_feed_renew(user=pm)
    assert _feed(client, first).status_code == 200
    second = services.calendar_feed_renew(user=pm)
    assert _feed(client, first).status_code == 404
    assert _feed(client, second).status_code == 200
    services.calendar_feed_revoke(user=pm)
    assert _feed(client, second).status_code == 404
    assert _feed(client, "not-a-token").status_code == 404


def test_only_the_tokens_hash_is_stored(pm):
    token = services.calendar_feed_renew(user=pm)
    feed = CalendarFeed.objects.get(user=pm)
    assert feed.token_sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert token not in feed.token_sha256


def test_a_customers_feed_covers_only_their_organisation(
        client, acme, globex, customer, pm):
    token = services.calendar_feed_renew(user=customer)
    summaries = {str(e["SUMMARY"]) for e in _events(_feed(client, token)).values()}
    assert "acme-prod G1 Arrival acceptance due" in summaries
    assert not any(s.startswith("globex-prod") for s in summaries)
    assert _feed(client, token, "globex-prod").status_code == 404
    staff = services.calendar_feed_renew(user=pm)
    assert any(str(e["SUMMARY"]).startswith("globex-prod")
               for e in _events(_feed(client, staff)).values())


def test_an_inactive_persons_feed_answers_404(client, acme, customer):
    token = services.calendar_feed_renew(user=customer)
    customer.is_active = False
    customer.save(update_fields=["is_active"])
    assert _feed(client, token).status_code == 404
