"""The business case as shown (page and final report): parameters, figures, two charts."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from acceptance.models import Engagement
from business.case import REQUIRED, Case
from business.services import FIELDS, case_dict, case_for, parameters_of
from runners.charts import Chart, Point, bar_chart

LABELS = {
    "currency": "currency (ISO code)", "nodes": "inference nodes", "gpus_per_node": "GPUs per node",
    "gpu_cost_per_hour": "GPU cost per hour", "gpu_purchase_price": "GPU purchase price",
    "gpu_depreciation_years": "GPU depreciation",
    "hosting_per_node_year": "electricity and hosting per node per year",
    "tokens_per_day": "expected output tokens per day",
    "resume_share": "share of tokens from long-context resumes",
    "cache_hit_share": "share of requests that resume a session",
    "switches_per_hour": "model switches per hour", "array_price": "array price (vendor figure)",
    "arrays": "arrays", "horizon_years": "horizon / array depreciation",
}


def case_charts(case: Case, currency: str) -> list[Chart]:
    if not case.established:
        return []
    note = _("simulated evidence") if case.simulated else ""
    cost = bar_chart(
        key="cost-per-mtok", title=_("Cost per million output tokens"), unit=currency,
        points=[Point(s.name, arm, value) for s in case.scenarios
                for arm, value in (("local", s.cost_per_mtok_local),
                                   ("array", s.cost_per_mtok_array))],
        series_names={"local": _("local NVMe"), "array": _("with the array")},
        simulated=case.simulated, note=note,
        value_text=lambda v: f"{v:,.2f} {currency}")
    expected = case.scenario("expected")
    saving = bar_chart(
        key="cumulative-saving", title=_("Cumulative saving (expected), array paid at start"),
        unit=currency,
        points=[Point(_("year %(n)d") % {"n": year}, "array", value)
                for year, value in enumerate(expected.cumulative_saving, start=1)],
        series_names={"array": _("cumulative saving")}, simulated=case.simulated, note=note,
        value_text=lambda v: f"{v:,.0f} {currency}")
    return [cost, saving]


def _value_text(value: Any) -> str:
    """A parameter as a reader reads it: 100000000.0 → "100,000,000", 0.25 → "0.25"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.6g}" if abs(value) < 1000 else f"{value:,.2f}"


def _input_text(value: Any) -> str:
    """A stored parameter as the form's field shows it: 18.0 → "18", 2e9 → "2000000000"."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return "" if value is None else str(value)


def business_page(engagement: Engagement, *, can_edit: bool = False) -> dict[str, Any]:
    """The page's (and the final report's) values, in the active language."""
    row = parameters_of(engagement)
    case = case_for(engagement)
    currency = row.currency or "?"
    shown = case_dict(case)
    for s in shown["scenarios"]:
        s["gain_text"] = f"{s['gain'] * 100:+.1f} %"
        s["share_text"] = f"{s['storage_share'] * 100:.1f} %"
        s["saving_text"] = f"{s['saving_per_year']:,.0f}"
    fields = [{"name": name, "label": _(LABELS[name]), "value": getattr(row, name),
               "value_text": _value_text(getattr(row, name)),
               "input": _input_text(getattr(row, name)),
               "unit": FIELDS[name][0] if name in FIELDS else "",
               "required": name in REQUIRED, "vendor": name == "array_price"}
              for name in LABELS]
    resume = row.resume_share
    return {"engagement": engagement, "case": shown, "currency": currency,
            "resume_share_text": "" if resume is None else f"{resume * 100:.0f} %",
            "fields": fields, "can_edit": can_edit, "charts": case_charts(case, currency),
            "updated_by": row.updated_by, "updated_at": row.updated_at}
