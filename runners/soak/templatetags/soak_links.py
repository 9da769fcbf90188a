"""``{% soak_gate_links engagement gate_code %}``: links to a soak gate's plan and its latest soak,
for the engagement page (nothing for a gate whose plan is not a soak: data decides)."""

from django import template

from gates.models import Gate
from runners.soak.models import Soak
from runners.soak.services import gate_is_soak

register = template.Library()


@register.inclusion_tag("soak/_gate_links.html")
def soak_gate_links(engagement_name: str, code: str) -> dict:
    gate = Gate.objects.filter(engagement__name=engagement_name, code=code).first()
    if gate is None or not gate_is_soak(gate):
        return {"show": False}
    latest = Soak.objects.filter(gate_run__gate=gate).order_by("-id").first()
    return {"show": True, "name": engagement_name, "code": code, "latest": latest}
