"""``manage.py engagement_create``: exit status 0 and one line, or 1 with a one-line
``CommandError`` naming the field, and nothing stored."""

from __future__ import annotations

import pytest
from django.core.management import ManagementUtility

from acceptance.models import Array, AuditEntry, Engagement, Organisation
from gates.defaults import DEFAULT_GATES, definition_sha256
from gates.models import Gate


def stored() -> tuple:
    return (Engagement.objects.count(), Organisation.objects.count(), Array.objects.count(),
            Gate.objects.count(), AuditEntry.objects.count())


def run(capsys, *args: str) -> tuple[int, str, str]:
    argv = ["manage.py", "engagement_create", *args]
    try:
        ManagementUtility(argv).execute()
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


def test_it_creates_the_engagement_and_says_so_in_one_line(db, capsys):
    code, out, err = run(capsys, "acme-prod", "--customer", "Acme", "--start-date",
                         "2026-11-02", "--language", "zh-hans", "--actor", "pat",
                         "--array", "serial=FX100-0001,layout=raid6",
                         "--array", "serial=FX100-0002, drives=12, link=200000, model=FX200, "
                         "drive_model=KCM6DRUL7T68")
    assert (code, err) == (0, "")
    assert out == ("acme-prod created for Acme with 2 array(s); due: G1 2026-11-16, "
                   "G2 2026-11-30, G3 2026-12-21, G4 2027-01-11\n")
    engagement = Engagement.objects.get(name="acme-prod")
    assert engagement.report_language == "zh-hans"
    assert list(engagement.arrays.order_by("serial").values_list(
        "serial", "model", "expected_drive_count", "link_speed_mbps", "layout",
        "drive_model")) == [
        ("FX100-0001", "FX100", 24, 100000, "raid6", ""),
        ("FX100-0002", "FX200", 12, 200000, "other", "KCM6DRUL7T68")]
    assert [g.defaults_sha256 for g in engagement.gates.order_by("order")] == [
        definition_sha256(d) for d in DEFAULT_GATES]
    entry = engagement.audit.get()
    assert (entry.actor, entry.reason) == (
        "pat", "engagement created with manage.py engagement_create")


@pytest.mark.parametrize("args,message", [
    (["bad name!", "--customer", "Acme", "--start-date", "2026-11-02"],
     "CommandError: not created: name: use letters, digits"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-02-30"],
     "CommandError: not created: start_date: “2026-02-30” value has the correct format "
     "(YYYY-MM-DD) but it is an invalid date."),
    (["acme-prod", "--customer", "", "--start-date", "2026-11-02"],
     "CommandError: not created: customer: give the customer organisation's name"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--reference-profile",
      "R9"], "CommandError: not created: reference_profile: reference profile 'R9' is unknown; "
     "known: R1-c16, R2-c8, R2-c16, R2-c32, R3-tp4x2"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--reference-profile",
      ""], "CommandError: not created: reference_profile: reference profile '' is unknown; "
     "known: R1-c16"),
    (["acme-prod", "--customer", "New Co", "--start-date", "2026-11-02", "--reference-profile",
      "R1-c16"], "CommandError: not created: reference_profile: reference profile R1-c16 (R1) "
     "has no local-NVMe output throughput"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--array",
      "serial=A,drives=none"],
     "CommandError: not created: arrays[1].expected_drive_count: “none” value must be an "
     "integer."),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--array", "serial=A",
      "--array", "serial=A"],
     "CommandError: not created: arrays[2].serial: serial A is already array 1's"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--array", "drives=24"],
     "CommandError: --array 1: serial=… is required"),
    (["acme-prod", "--customer", "Acme", "--start-date", "2026-11-02", "--array",
      "serial=A,colour=red"], "CommandError: --array 1: 'colour=red' is not one of serial=…"),
])
def test_bad_input_exits_1_with_one_line_and_stores_nothing(db, capsys, args, message):
    before = stored()
    code, out, err = run(capsys, *args)
    assert code == 1 and out == ""
    assert err.startswith(message), err
    assert err.count("\n") == 1
    assert stored() == before


def test_a_taken_name_is_refused(db, capsys):
    run(capsys, "acme-prod", "--customer", "Acme", "--start-date", "2026-11-02")
    before = stored()
    code, _out, err = run(capsys, "acme-prod", "--customer", "Other", "--start-date",
                          "2026-11-02")
    assert code == 1
    assert err == "CommandError: not created: name: Engagement with this Name already exists.\n"
    assert stored() == before
