"""The bill-of-materials checklist snapshot the service takes when a gate run starts.

Raw input is JSON written by the service itself:
``{"engagement": NAME, "items": [{"position", "description", "quantity", "ticked_by",
"ticked_at"}]}``. Emits ``bom_open_items`` (unit 1): the items nobody has ticked (DOMAIN.md G1:
"every item of the bill of materials delivered and checked"). A checklist with no items at all is
an error: an empty BOM proves nothing.
"""

from .base import MeasurementData, ParseError, decode_text, extract_json

TOOL = "bom_checklist"
PARSER_VERSION = "1"


def parse(raw: bytes) -> list[MeasurementData]:
    document, _ = extract_json(TOOL, decode_text(TOOL, raw))
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ParseError(TOOL, 1, 'an object with an "items" list')
    if not items:
        raise ParseError(TOOL, 1, "at least one bill-of-materials item", "an empty checklist")
    if not all(isinstance(item, dict) for item in items):
        raise ParseError(TOOL, 1, "an object per bill-of-materials item")
    open_items = sum(1 for item in items if not item.get("ticked_at"))
    return [MeasurementData("bom_open_items", float(open_items), "1",
                            {"items": str(len(items))})]
