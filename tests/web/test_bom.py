"""The bill of materials on the engagement page: a project manager adds, edits and removes items
(each audited) or uploads a CSV list; a bad CSV is refused whole with the line and column named
and nothing stored changes. Engineers may not change it (403), another organisation's customer
does not see it (404)."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from acceptance.bom import CsvRefused, bom_csv_parse
from acceptance.models import AuditEntry, BomItem, Engagement

GOOD_CSV = (b"description,quantity,part number,serials\n"
            b"FX100 all-flash array,1,FX100-24-768,FXA0001\n"
            b"100 GbE QSFP28 cable,2,CAB-Q28-3M,C-11 C-12\n")


def bom_of(engagement) -> list[tuple]:
    return list(BomItem.objects.filter(engagement=engagement).order_by("position").values_list(
        "position", "description", "quantity", "part_number", "serials", "ticked_by",
        "ticked_at"))


def stored(engagement) -> tuple:
    return bom_of(engagement), AuditEntry.objects.filter(engagement=engagement).count()


def upload(client, user, engagement, content: bytes, name: str = "bom.csv"):
    client.force_login(user)
    return client.post(reverse("bom-upload", args=[engagement.name]),
                       {"file": SimpleUploadedFile(name, content, "text/csv")})


def add(client, user, engagement, **data):
    client.force_login(user)
    fields = {"description": "Spare U.2 drive 7.68 TB", "quantity": "2",
              "part_number": "DRV-768", "serials": "S1 S2"}
    fields.update(data)
    return client.post(reverse("bom-add", args=[engagement.name]), fields)


# --- Items one by one ---------------------------------------------------------------------------

def test_a_project_manager_adds_an_item_after_the_others(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    response = add(client, pm, engagement)
    assert response.status_code == 302
    assert response["Location"].endswith("#bom")
    item = engagement.bom_items.get(position=3)
    assert (item.description, item.quantity, item.part_number, item.serials, item.ticked_at) == (
        "Spare U.2 drive 7.68 TB", 2, "DRV-768", ["S1", "S2"], None)
    entry = engagement.audit.get(action="BOM item added")
    assert entry.actor == "pat-pm"
    assert entry.details["bom"]["serials"] == ["S1", "S2"]
    page = client.get(reverse("engagement-detail", args=[engagement.name])).content.decode()
    assert "2 × Spare U.2 drive 7.68 TB" in page and "part DRV-768 · serials S1 S2" in page
    assert "2 items open" in page


@pytest.mark.parametrize("data,message", [
    ({"quantity": "0"}, "Ensure this value is greater than or equal to 1."),
    ({"quantity": "two"}, "Enter a whole number."),
    ({"description": ""}, "This field is required."),
    ({"serials": "S1 S2 S3"}, "3 serial numbers for a quantity of 2"),
    ({"serials": "S1 S1"}, "serial S1 is given twice"),
    ({"serials": "S1 <b>"}, "is not a serial number"),
])
def test_a_bad_item_is_refused_naming_the_field(client, pm, stopped_a, data, message):
    engagement, _decision, _report = stopped_a
    before = stored(engagement)
    response = add(client, pm, engagement, **data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert stored(engagement) == before


def test_editing_a_ticked_item_clears_its_tick_and_records_old_and_new(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    ticked = engagement.bom_items.get(position=1)
    client.force_login(pm)
    response = client.post(reverse("bom-edit", args=[engagement.name, 1]), {
        "description": "FX100 array", "quantity": "1", "part_number": "FX100-24-768",
        "serials": "FXA0001", "reason": "the delivery note gives the part number and serial"})
    assert response.status_code == 302
    item = engagement.bom_items.get(position=1)
    assert (item.part_number, item.serials, item.ticked_by, item.ticked_at) == (
        "FX100-24-768", ["FXA0001"], "", None)
    entry = engagement.audit.get(action="BOM item changed")
    assert entry.reason == "the delivery note gives the part number and serial"
    assert entry.details["tick_cleared"] is True
    assert entry.details["old"]["ticked_by"] == "pat-pm"
    assert entry.details["old"]["ticked_at"] == ticked.ticked_at.isoformat()
    assert entry.details["bom"]["part_number"] == "FX100-24-768"


@pytest.mark.parametrize("data,message", [
    ({"reason": ""}, "Give a reason"),
    ({"reason": "typo"}, "nothing changed: these are the item&#x27;s current values"),
])
def test_an_edit_without_a_reason_or_a_change_is_refused(client, pm, stopped_a, data,
                                                         message):
    engagement, _decision, _report = stopped_a
    before = stored(engagement)
    client.force_login(pm)
    response = client.post(reverse("bom-edit", args=[engagement.name, 2]), {
        "description": "100 GbE cable", "quantity": "2", "part_number": "", "serials": "",
        **data})
    assert response.status_code == 400 and message in response.content.decode()
    assert stored(engagement) == before


def test_removing_an_item_needs_a_reason_and_keeps_what_it_was(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    client.force_login(pm)
    url = reverse("bom-remove", args=[engagement.name, 1])
    before = stored(engagement)
    refused = client.post(url, {"reason": ""})
    assert refused.status_code == 400 and "Give a reason" in refused.content.decode()
    assert stored(engagement) == before
    assert client.post(url, {"reason": "counted twice"}).status_code == 302
    assert [row[0] for row in bom_of(engagement)] == [2]
    entry = engagement.audit.get(action="BOM item removed")
    assert entry.reason == "counted twice"
    assert entry.details["bom"]["description"] == "FX100 array"
    assert entry.details["bom"]["ticked_by"] == "pat-pm"


def test_an_accepted_engagements_bom_is_final(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    Engagement.objects.filter(pk=engagement.pk).update(state=Engagement.State.ACCEPTED)
    before = stored(engagement)
    response = add(client, pm, engagement)
    assert response.status_code == 400
    assert "engagement acme-1 is accepted; its BOM is final" in response.content.decode()
    response = upload(client, pm, engagement, GOOD_CSV)
    assert response.status_code == 400 and "its BOM is final" in response.content.decode()
    assert stored(engagement) == before


@pytest.mark.parametrize("who,status", [("engineer", 403), ("customer_a", 403),
                                        ("customer_b", 404)])
def test_only_the_project_manager_changes_the_bom(client, request, stopped_a, who, status):
    engagement, _decision, _report = stopped_a
    user = request.getfixturevalue(who)
    before = stored(engagement)
    client.force_login(user)
    name = engagement.name
    assert client.get(reverse("bom-add", args=[name])).status_code == status
    assert add(client, user, engagement).status_code == status
    assert upload(client, user, engagement, GOOD_CSV).status_code == status
    assert client.get(reverse("bom-edit", args=[name, 1])).status_code == status
    assert client.post(reverse("bom-edit", args=[name, 1]), {
        "description": "x", "quantity": "1", "reason": "r"}).status_code == status
    assert client.post(reverse("bom-remove", args=[name, 1]),
                       {"reason": "r"}).status_code == status
    assert stored(engagement) == before


def test_the_page_offers_the_bom_actions_to_the_project_manager_only(client, pm, engineer,
                                                                    stopped_a):
    engagement, _decision, _report = stopped_a
    url = reverse("engagement-detail", args=[engagement.name])
    client.force_login(pm)
    page = client.get(url).content.decode()
    for action in (reverse("bom-add", args=[engagement.name]),
                   reverse("bom-upload", args=[engagement.name]),
                   reverse("bom-edit", args=[engagement.name, 1])):
        assert action in page
    client.force_login(engineer)
    page = client.get(url).content.decode()
    assert reverse("bom-add", args=[engagement.name]) not in page
    assert reverse("bom-edit", args=[engagement.name, 1]) not in page


# --- A CSV list ---------------------------------------------------------------------------------

def test_a_csv_list_is_added_after_the_items_there_and_recorded(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    response = upload(client, pm, engagement, GOOD_CSV, name="acme-bom.csv")
    assert response.status_code == 302
    assert bom_of(engagement)[2:] == [
        (3, "FX100 all-flash array", 1, "FX100-24-768", ["FXA0001"], "", None),
        (4, "100 GbE QSFP28 cable", 2, "CAB-Q28-3M", ["C-11", "C-12"], "", None),
    ]
    entry = engagement.audit.get(action="BOM uploaded")
    assert entry.reason == "2 items from acme-bom.csv"
    assert entry.details == {"file": "acme-bom.csv",
                             "sha256": hashlib.sha256(GOOD_CSV).hexdigest(),
                             "positions": [3, 4], "items": 2}


def test_a_spreadsheets_csv_is_read_as_people_write_it():
    # Excel's "CSV UTF-8": a byte-order mark, CRLF, columns in another order and case,
    # semicolons, a quoted cell, a blank line, empty part number and serials.
    raw = ("\ufeffSerials;Quantity;Part_Number;Description\r\n"
           "FXA0001;1;FX100-24-768;\"FX100; 24 × 7.68 TB\"\r\n\r\n"
           ";4;;Rack rails\r\n").encode()
    lines = bom_csv_parse(raw)
    assert [line.as_dict() for line in lines] == [
        {"description": "FX100; 24 × 7.68 TB", "quantity": 1, "part_number": "FX100-24-768",
         "serials": ["FXA0001"]},
        {"description": "Rack rails", "quantity": 4, "part_number": "", "serials": []},
    ]


REFUSED = [
    ("bad quantity",
     b"description,quantity,part number,serials\nFX100,1,P1,S1\ncable,two,P2,\n",
     "line 3, column 2 (quantity): 'two' is not a whole number from 1 to 1000000"),
    ("zero quantity",
     b"description,quantity,part number,serials\ncable,0,P2,\n",
     "line 2, column 2 (quantity): '0' is not a whole number from 1 to 1000000"),
    ("missing column", b"description,quantity,part number\nFX100,1,P1\n",
     "line 1: missing column 'serials' (expected description, quantity, part number, "
     "serials)"),
    ("wrong header", b"description,qty,part number,serials\nFX100,1,P1,S1\n",
     "line 1, column 2: unknown column 'qty' (expected description, quantity, part number, "
     "serials)"),
    ("no header", b"FX100,1,P1,S1\n",
     "line 1, column 1: unknown column 'FX100'"),
    ("empty file", b"",
     "the file is empty: expected a header line (description, quantity, part number, "
     "serials) and one line per item"),
    ("blank file", b"\n \n",
     "the file is empty"),
    ("header only", b"description,quantity,part number,serials\n",
     "the file has a header but no items"),
    ("not UTF-8", "description,quantity,part number,serials\nFX100,1,P1,S1\n"
                  "Câble,2,P2,\n".encode("latin-1"),
     "line 3, column 1: byte 0xe2 is not UTF-8 text; save the file as CSV UTF-8"),
    ("short line", b"description,quantity,part number,serials\nFX100,1\n",
     "line 2: 2 cells, the header has 4"),
    ("too many serials", b"description,quantity,part number,serials\ncable,1,P,S1 S2\n",
     "line 2, column 4 (serials): 2 serial numbers for a quantity of 1"),
    ("no description", b"description,quantity,part number,serials\n ,1,P,\n",
     "line 2, column 1 (description): describe the item"),
    ("unclosed quote", b'description,quantity,part number,serials\n"FX100,1,P,S\n',
     "not valid CSV"),
]


@pytest.mark.parametrize("raw,message", [(raw, message) for _, raw, message in REFUSED],
                         ids=[case for case, _, _ in REFUSED])
def test_a_bad_csv_is_refused_naming_the_line_and_column(raw, message):
    with pytest.raises(CsvRefused) as refusal:
        bom_csv_parse(raw)
    assert message in str(refusal.value)


@pytest.mark.parametrize("raw,message", [(raw, message) for _, raw, message in REFUSED],
                         ids=[case for case, _, _ in REFUSED])
def test_a_refused_upload_changes_nothing_and_says_why(client, pm, stopped_a, raw, message):
    engagement, _decision, _report = stopped_a
    before = stored(engagement)
    response = upload(client, pm, engagement, raw)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Refused, nothing was added" in page
    assert response.context["form"].errors["file"][0].endswith(message) or \
        message in response.context["form"].errors["file"][0]
    assert stored(engagement) == before


def test_a_bad_line_after_good_ones_adds_none_of_them(client, pm, stopped_a):
    engagement, _decision, _report = stopped_a
    before = stored(engagement)
    raw = GOOD_CSV + b"rack rails,-1,,\n"
    response = upload(client, pm, engagement, raw)
    assert response.status_code == 400
    assert "line 4, column 2 (quantity)" in response.context["form"].errors["file"][0]
    assert stored(engagement) == before
