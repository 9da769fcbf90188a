"""``{% soak_gate_links engagement_name gate_code %}``: links to a soak gate's plan and its latest
soak, for the engagement page (nothing for a gate whose plan is not a soak: data decides).

One query per page, whatever the number of gates: the engagement's soak gates and their latest
soak are read once and kept in the template's render context."""

from django import template
from django.db.models import OuterRef, Subquery

from gates.models import Gate
from runners.soak.models import Soak

register = template.Library()


def _soak_gates(context, engagement_name: str) -> dict[str, dict]:
    key = ("soak_gate_links", engagement_name)
    cache = context.render_context
    if key not in cache:
        latest = Soak.objects.filter(gate_run__gate=OuterRef("pk")).order_by("-id")
        rows = Gate.objects.filter(engagement__name=engagement_name).annotate(
            latest_id=Subquery(latest.values("id")[:1]),
            latest_state=Subquery(latest.values("state")[:1]),
        ).values("code", "probe_plan", "latest_id", "latest_state")
        cache[key] = {r["code"]: r for r in rows
                      if any(step.get("expand") == "soak" for step in r["probe_plan"])}
    return cache[key]


@register.inclusion_tag("soak/_gate_links.html", takes_context=True)
def soak_gate_links(context, engagement_name: str, code: str) -> dict:
    row = _soak_gates(context, engagement_name).get(code)
    if row is None:
        return {"show": False}
    return {"show": True, "name": engagement_name, "code": code,
            "latest_id": row["latest_id"], "latest_state": row["latest_state"]}
