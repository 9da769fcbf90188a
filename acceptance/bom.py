"""The bill of materials of an engagement: adding, editing and removing items, and reading a
whole list from a CSV file.

G1 requires every item "delivered and checked" (DOMAIN.md), so the list is evidence: every change
goes into the audit trail with who and why, an edit of a ticked item clears its tick (the tick
vouched for what the item said before), and an accepted engagement's list is final.

A CSV upload is all or nothing: the first bad line refuses the whole file with the line and the
column named, and nothing stored changes. Columns (a header line, any order, case and ``_`` /
``-`` / space alike): ``description``, ``quantity``, ``part number``, ``serials`` (serial numbers
separated by spaces or ``;``). Commas or semicolons separate the columns.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils.translation import gettext as _

from acceptance.models import AuditEntry, BomItem, Engagement

CSV_COLUMNS = ("description", "quantity", "part number", "serials")
CSV_MAX_BYTES = 1 << 20  # a bill of materials is a few hundred lines; 1 MiB is generous
CSV_MAX_ITEMS = 2000
QUANTITY_MAX = 1_000_000
SERIAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")
SERIAL_SEPARATORS = re.compile(r"[\s;,]+")


class CsvRefused(ValueError):
    """The CSV file was refused whole; the message names the line (and column)."""


@dataclass(frozen=True)
class BomLineData:
    description: str
    quantity: int
    part_number: str
    serials: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"description": self.description, "quantity": self.quantity,
                "part_number": self.part_number, "serials": list(self.serials)}


def serials_text(serials: list[str] | tuple[str, ...]) -> str:
    """Serial numbers as a person types them: ``SN1 SN2``."""
    return " ".join(serials)


def bom_line_check(*, description: str, quantity: int | str, part_number: str = "",
                   serials: str | list[str] | tuple[str, ...] = "") -> BomLineData:
    """One item's fields, checked and normalised. ValidationError keyed by field."""
    errors: dict[str, str] = {}
    description = (description or "").strip()
    if not description:
        errors["description"] = _("describe the item")
    elif len(description) > 300:
        errors["description"] = _("at most 300 characters (this one has %(n)d)") % {
            "n": len(description)}
    try:
        count = int(str(quantity).strip())
    except ValueError:
        count = None
    if count is None or not 1 <= count <= QUANTITY_MAX:
        errors["quantity"] = _("%(value)s is not a whole number from 1 to %(max)d") % {
            "value": repr(str(quantity).strip()), "max": QUANTITY_MAX}
    part_number = (part_number or "").strip()
    if len(part_number) > 100:
        errors["part_number"] = _("at most 100 characters")
    words = (SERIAL_SEPARATORS.split(serials.strip()) if isinstance(serials, str)
             else [str(s).strip() for s in serials])
    words = [w for w in words if w]
    bad = [w for w in words if not SERIAL.fullmatch(w)]
    twice = sorted({w for w in words if words.count(w) > 1})
    if bad:
        errors["serials"] = _("%(serial)s is not a serial number (letters, digits, '.', '_', "
                              "':', '/', '-'; at most 64)") % {"serial": repr(bad[0])}
    elif twice:
        errors["serials"] = _("serial %(serial)s is given twice") % {"serial": twice[0]}
    elif count is not None and len(words) > count:
        errors["serials"] = _("%(n)d serial numbers for a quantity of %(quantity)d") % {
            "n": len(words), "quantity": count}
    if errors:
        raise ValidationError(errors)
    return BomLineData(description, count, part_number, tuple(words))


def _header_key(cell: str) -> str:
    return " ".join(re.split(r"[\s_-]+", cell.strip().lower())).strip()


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line_start = raw.rfind(b"\n", 0, error.start) + 1
        line = raw.count(b"\n", 0, error.start) + 1
        column = raw.count(b",", line_start, error.start) + 1
        raise CsvRefused(_("line %(line)d, column %(column)d: byte 0x%(byte)02x is not UTF-8 "
                           "text; save the file as CSV UTF-8") % {
            "line": line, "column": column, "byte": raw[error.start]}) from None


def bom_csv_parse(raw: bytes) -> list[BomLineData]:
    """The items of a CSV bill of materials, or CsvRefused naming the first bad line."""
    if len(raw) > CSV_MAX_BYTES:
        raise CsvRefused(_("the file has %(size)d bytes; at most %(max)d") % {
            "size": len(raw), "max": CSV_MAX_BYTES})
    text = _decoded(raw)
    expected = ", ".join(CSV_COLUMNS)
    if not text.strip():
        raise CsvRefused(_("the file is empty: expected a header line (%(columns)s) and one "
                           "line per item") % {"columns": expected})
    first = text.lstrip("\r\n").splitlines()[0]
    delimiter = ";" if ";" in first and "," not in first else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    items: list[BomLineData] = []
    columns: dict[str, int] = {}
    width = 0
    line = 1
    try:
        for row in reader:
            start, line = line, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if not columns:
                columns, width = _header(row, start, expected), len(row)
                continue
            if len(row) != width:
                raise CsvRefused(_("line %(line)d: %(n)d cells, the header has %(width)d") % {
                    "line": start, "n": len(row), "width": width})
            items.append(_item(row, columns, start))
            if len(items) > CSV_MAX_ITEMS:
                raise CsvRefused(_("line %(line)d: more than %(max)d items") % {
                    "line": start, "max": CSV_MAX_ITEMS})
    except csv.Error as error:
        raise CsvRefused(_("line %(line)d: not valid CSV (%(error)s)") % {
            "line": reader.line_num, "error": error}) from None
    if not items:
        raise CsvRefused(_("the file has a header but no items"))
    return items


def _header(row: list[str], line: int, expected: str) -> dict[str, int]:
    columns: dict[str, int] = {}
    for number, cell in enumerate(row, start=1):
        key = _header_key(cell)
        if key not in CSV_COLUMNS:
            raise CsvRefused(_("line %(line)d, column %(column)d: unknown column %(name)s "
                               "(expected %(columns)s)") % {
                "line": line, "column": number, "name": repr(cell.strip()),
                "columns": expected})
        if key in columns:
            raise CsvRefused(_("line %(line)d, column %(column)d: column %(name)s appears "
                               "twice") % {"line": line, "column": number, "name": repr(key)})
        columns[key] = number - 1
    missing = [c for c in CSV_COLUMNS if c not in columns]
    if missing:
        raise CsvRefused(_("line %(line)d: missing column %(name)s (expected %(columns)s)") % {
            "line": line, "name": repr(missing[0]), "columns": expected})
    return columns


FIELD_COLUMNS = {"description": "description", "quantity": "quantity",
                 "part_number": "part number", "serials": "serials"}


def _item(row: list[str], columns: dict[str, int], line: int) -> BomLineData:
    try:
        return bom_line_check(description=row[columns["description"]],
                              quantity=row[columns["quantity"]],
                              part_number=row[columns["part number"]],
                              serials=row[columns["serials"]])
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        column = FIELD_COLUMNS[field]
        raise CsvRefused(_("line %(line)d, column %(column)d (%(name)s): %(message)s") % {
            "line": line, "column": columns[column] + 1, "name": column,
            "message": " ".join(messages)}) from None


def _locked_open(engagement: Engagement) -> Engagement:
    """The engagement row, locked (positions are numbered under the lock); ValueError when it is
    accepted: its bill of materials is final."""
    locked = Engagement.objects.select_for_update().get(pk=engagement.pk)
    if locked.state == Engagement.State.ACCEPTED:
        raise ValueError(_("engagement %(name)s is accepted; its BOM is final") % {
            "name": locked.name})
    return locked


def _next_position(engagement: Engagement) -> int:
    return (engagement.bom_items.aggregate(last=Max("position"))["last"] or 0) + 1


def _item_details(item: BomItem) -> dict:
    return {"position": item.position, "description": item.description,
            "quantity": item.quantity, "part_number": item.part_number,
            "serials": list(item.serials), "ticked_by": item.ticked_by,
            "ticked_at": item.ticked_at.isoformat() if item.ticked_at else None}


@transaction.atomic
def bom_item_add(*, engagement: Engagement, line: BomLineData, actor: str) -> BomItem:
    """Append an item to the list (open: nobody has ticked it) and record it."""
    engagement = _locked_open(engagement)
    item = BomItem.objects.create(engagement=engagement, position=_next_position(engagement),
                                  description=line.description, quantity=line.quantity,
                                  part_number=line.part_number, serials=list(line.serials))
    AuditEntry.objects.create(engagement=engagement, actor=actor, action="BOM item added",
                              reason=_("added on the engagement page"),
                              details={"bom": _item_details(item)})
    return item


@transaction.atomic
def bom_item_edit(*, item: BomItem, line: BomLineData, actor: str, reason: str) -> BomItem:
    """Change an item; a ticked item loses its tick (it vouched for the old text). The old and
    new item go into the audit trail. ValueError when nothing changes or the reason is blank."""
    if not reason or not reason.strip():
        raise ValueError(_("changing a BOM item needs a reason"))
    _locked_open(item.engagement)
    item = BomItem.objects.select_for_update().get(pk=item.pk)
    old = _item_details(item)
    new = line.as_dict()
    if all(old[key] == value for key, value in new.items()):
        raise ValueError(_("nothing changed: these are the item's current values"))
    for key, value in new.items():
        setattr(item, key, value)
    untick = item.ticked_at is not None
    item.ticked_by, item.ticked_at = "", None
    item.save(update_fields=[*new, "ticked_by", "ticked_at"])
    AuditEntry.objects.create(engagement=item.engagement, actor=actor, action="BOM item changed",
                              reason=reason.strip(),
                              details={"bom": _item_details(item), "old": old,
                                       "tick_cleared": untick})
    return item


@transaction.atomic
def bom_item_remove(*, item: BomItem, actor: str, reason: str) -> None:
    """Remove an item from the list; what it was (and its tick) stays in the audit trail."""
    if not reason or not reason.strip():
        raise ValueError(_("removing a BOM item needs a reason"))
    engagement = _locked_open(item.engagement)
    item = BomItem.objects.select_for_update().get(pk=item.pk)
    details = _item_details(item)
    item.delete()
    AuditEntry.objects.create(engagement=engagement, actor=actor, action="BOM item removed",
                              reason=reason.strip(), details={"bom": details})


@transaction.atomic
def bom_csv_import(*, engagement: Engagement, raw: bytes, filename: str,
                   actor: str) -> list[BomItem]:
    """Append every item of a CSV file (``bom_csv_parse``) after the existing ones, or none:
    CsvRefused (the line and column named) or ValueError (accepted engagement), nothing
    stored."""
    lines = bom_csv_parse(raw)
    engagement = _locked_open(engagement)
    first = _next_position(engagement)
    items = BomItem.objects.bulk_create(
        BomItem(engagement=engagement, position=first + offset, description=line.description,
                quantity=line.quantity, part_number=line.part_number,
                serials=list(line.serials))
        for offset, line in enumerate(lines))
    AuditEntry.objects.create(
        engagement=engagement, actor=actor, action="BOM uploaded",
        reason=_("%(n)d items from %(file)s") % {"n": len(items), "file": filename},
        details={"file": filename, "sha256": hashlib.sha256(raw).hexdigest(),
                 "positions": [first, first + len(items) - 1], "items": len(items)})
    return items
