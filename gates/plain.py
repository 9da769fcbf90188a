"""What a criterion measured against what, in one plain sentence a procurement manager reads.

"TTFT p50 11.9 s with the array vs 17.3 s on local NVMe (−31 %); required: at least −25 %":
the judged figure (a ratio) with the figures it was made of beside it, in seconds, tokens per
second or GB/s, and the requirement in words. One place builds it for every surface (page 1 of
the gate and final reports, the engagement page's decision), from a verdict's criterion
snapshot, its judged figure and the measurements the verdict links to with their inputs
(:class:`Figure`, plain data: nothing here queries). The sentence follows the metric's kind
(a comparison of two arms, a line efficiency, a figure against a reference, a count), never the
gate's code. Figures and units are joined by a non-breaking space so a line never ends between
them. Words come from the active language's catalogue (English, Simplified Chinese).
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

NBSP = "\u00a0"
MINUS = "\u2212"

#: The measured figure each comparison is made of (gates.derivations.COMPARISONS), its unit and
#: the sign its change is said with: a TTFT reduction of 0.31 is "−31 %", a gain "+40 %".
COMPARED: dict[str, tuple[str, int]] = {"ttft_reduction": ("ttft_p50", -1),
                                        "throughput_gain": ("output_throughput", 1)}
#: Figures said by name (the rest by their criterion's description).
FIGURE_NAMES = {"ttft_p50": gettext_noop("TTFT p50"),
                "output_throughput": gettext_noop("Output throughput"),
                "ttft_p99": gettext_noop("TTFT p99"),
                "bom_open_items": gettext_noop("Bill-of-materials items not yet delivered "
                                               "and ticked"),
                "self_test_failures": gettext_noop("Drives whose self-test did not complete "
                                                   "and pass")}
#: How an arm of the G3 comparison reads after its figure.
ARM_WORDS = {"array": gettext_noop("with the array"), "local": gettext_noop("on local NVMe"),
             "recompute": gettext_noop("with recompute (no KV tier)")}


@dataclass(frozen=True)
class Figure:
    """One stored measurement as this module needs it; ``inputs``: what a derived one was
    made of (one level)."""

    metric: str
    value: float
    unit: str
    labels: Mapping[str, Any] = field(default_factory=dict)
    node: str = ""
    inputs: tuple[Figure, ...] = ()


def _nb(text: str) -> str:
    return text.replace(" ", NBSP)


def amount(value: float, unit: str) -> str:
    """A figure with its unit as people read it, unit joined by a non-breaking space:
    B/s in GB/s, seconds to one decimal (three below 1 s), tok/s to one decimal."""
    if unit == "B/s":
        text = f"{value / 1e9:.2f} GB/s"
    elif unit == "B":
        text = f"{value / 1e9:.2f} GB"
    elif unit == "s":
        if value >= 3600 and value % 3600 == 0:
            text = f"{value / 3600:g} h"
        else:
            text = f"{value:.1f} s" if value >= 1 else f"{value:.3f} s"
    elif unit == "tok/s":
        text = f"{value:.1f} tok/s"
    elif unit == "ratio":
        text = f"{value * 100:.0f} %"
    elif unit == "1":
        text = f"{value:g}"
    else:
        text = f"{value:g} {unit}"
    return _nb(text)


def percent(value: float, *, signed: bool = False, against: Sequence[float] = ()) -> str:
    """``value`` (a ratio) in whole percent, one decimal below 10 % where it is not whole
    (a round deviation of 1.5 % printed as "2 %" beside the table's 1.5 %), and more decimals
    where the figure would print equal to a bound of ``against`` that it is not on (24.6 %
    beside 25 %)."""
    decimals = 1 if abs(value) < 0.1 and round(value * 100) != round(value * 100, 1) else 0
    while decimals < 4 and any(
            round(value * 100, decimals) == round(b * 100, decimals)
            and abs(value - b) > 1e-9 * max(abs(value), abs(b), 1e-12) for b in against):
        decimals += 1
    text = f"{abs(value) * 100:.{decimals}f}{NBSP}%"
    if not signed:
        return f"{MINUS}{text}" if value < 0 else text
    return (MINUS if value < 0 else "+") + text


def requirement_words(snapshot: Mapping[str, Any], *, sign: int = 0) -> str:
    """The requirement as a sentence says it: "at least −25 %", "+29 % … +40 %",
    "within ±10 % of 17.3 s", "0 (none allowed)" (a count). ``sign``: a ratio said as a
    signed change (−1 for a reduction)."""
    operator, unit = snapshot.get("operator"), snapshot.get("unit", "")
    low, high = snapshot.get("threshold"), snapshot.get("threshold_high")

    def bound(value: float) -> str:
        if unit == "ratio":
            return percent(value * (sign or 1), signed=bool(sign))
        return amount(value, unit)

    if operator == "within":
        reference, tolerance = snapshot.get("reference_value"), snapshot.get("tolerance")
        if reference is None or tolerance is None:
            return str(snapshot.get("requirement", ""))
        return _("within ±%(tolerance)s of %(reference)s") % {
            "tolerance": percent(tolerance), "reference": amount(reference, unit)}
    if operator == "between" and low is not None and high is not None:
        return _("%(low)s … %(high)s") % {"low": bound(low), "high": bound(high)}
    if operator in (">=", "<=") and low is not None:
        # a reduction said as a negative change turns "at least 25 %" into "at least −25 %"
        # (the words: the array's TTFT is at least 25 % below local NVMe's)
        if operator == ">=":
            return _("at least %(bound)s") % {"bound": bound(low)}
        if low == 0 and unit == "1":
            # a count that must be zero: "at most 0" reads as a typo, "none" as no requirement
            return _("0 (none allowed)")
        return _("at most %(bound)s") % {"bound": bound(low)}
    return str(snapshot.get("requirement", ""))


def _judged(figures: Sequence[Figure], measured: float | None) -> Figure | None:
    """The figure the verdict judged: the one equal to ``measured`` (the worst of "each"), else
    the first."""
    if not figures:
        return None
    if measured is None:
        return figures[0]
    return min(figures, key=lambda f: abs(f.value - measured))


def _arm_means(figure: Figure, metric: str) -> dict[str, float]:
    by_arm: dict[str, list[float]] = defaultdict(list)
    for f in figure.inputs:
        if f.metric == metric and "arm" in f.labels:
            by_arm[str(f.labels["arm"])].append(f.value)
    return {arm: statistics.fmean(values) for arm, values in by_arm.items()}


def _comparison(snapshot: Mapping[str, Any], measured: float, figure: Figure) -> str | None:
    compared, sign = COMPARED[figure.metric]
    means = _arm_means(figure, compared)
    arm, base = str(figure.labels.get("arm", "")), str(figure.labels.get("baseline", ""))
    if arm not in means or base not in means:
        return None
    bounds = [b for b in (snapshot.get("threshold"), snapshot.get("threshold_high"))
              if b is not None]
    unit = "s" if compared == "ttft_p50" else "tok/s"
    rounds = figure.labels.get("rounds")
    values = {"figure": _(FIGURE_NAMES[compared]), "arm_value": amount(means[arm], unit),
              "arm": _(ARM_WORDS.get(arm, arm)), "base_value": amount(means[base], unit),
              "base": _(ARM_WORDS.get(base, base)),
              "change": percent(measured * sign, signed=True, against=[b * sign for b in bounds]),
              "required": requirement_words(snapshot, sign=sign)}
    text = _("%(figure)s %(arm_value)s %(arm)s vs %(base_value)s %(base)s (%(change)s); "
             "required: %(required)s") % values
    if rounds and rounds != "1":
        text = _("%(sentence)s (mean of %(n)s rounds)") % {"sentence": text, "n": rounds}
    return text


def _line_efficiency(snapshot: Mapping[str, Any], measured: float, figure: Figure,
                     count: int) -> str | None:
    reads = [f for f in figure.inputs if f.unit == "B/s" and f.metric != "link_speed"]
    if measured <= 0:
        return None
    try:
        port = float(figure.labels.get("array_line_rate") or 0)
    except ValueError:
        port = 0.0
    if reads:
        read = sum(f.value for f in reads)
        rate = port or read / measured
    elif figure.labels.get("scope") == "aggregate" and port > 0:
        # the shared read-back: its inputs are counter readings (bytes) over the overlap
        # window; the aggregate rate is the figure times the array port's line rate
        read, rate = measured * port, port
    else:
        return None
    values = {"read": amount(read, "B/s"), "rate": amount(rate, "B/s"),
              "share": percent(measured, against=[b for b in (snapshot.get("threshold"),)
                                                  if b is not None]),
              "required": requirement_words(snapshot), "node": figure.node,
              "n": figure.labels.get("nodes") or len({f.node for f in reads}),
              "array": figure.labels.get("array", ""), "link": figure.labels.get("link", "")}
    if figure.labels.get("scope") == "aggregate" and str(values["n"]) == "1":
        text = _("One node read %(read)s from array %(array)s, against its port's "
                 "line rate of %(rate)s (%(share)s); required: %(required)s") % values
    elif figure.labels.get("scope") == "aggregate":
        text = _("%(n)s nodes together read %(read)s from array %(array)s, against its port's "
                 "line rate of %(rate)s (%(share)s); required: %(required)s") % values
    elif str(values["link"]).startswith("array"):
        text = _("Sequential read %(read)s on %(node)s against the array port's line rate of "
                 "%(rate)s (%(share)s); required: %(required)s") % values
    else:
        text = _("Sequential read %(read)s on %(node)s against its network card's line rate "
                 "of %(rate)s (%(share)s); required: %(required)s") % values
    if count > 1:
        text = _("%(sentence)s (lowest of %(n)s)") % {"sentence": text, "n": count}
    return text


def _against_reference(snapshot: Mapping[str, Any], measured: float, unit: str,
                       description: str) -> str:
    reference = snapshot["reference_value"]
    name = FIGURE_NAMES.get(str(snapshot.get("metric", "")))
    values = {"figure": _(name) if name else description, "measured": amount(measured, unit),
              "reference": amount(reference, unit),
              "change": percent(measured / reference - 1, signed=True) if reference else "—",
              "required": requirement_words(snapshot)}
    return _("%(figure)s %(measured)s vs the reference %(reference)s (%(change)s); "
             "required: %(required)s") % values


def plain_sentence(*, snapshot: Mapping[str, Any], description: str, measured: float | None,
                   unit: str, figures: Sequence[Figure] = ()) -> str:
    """What the criterion (``snapshot``: the verdict's copy of it) measured against what, in
    the active language. ``description``: the criterion in words (already in that language);
    ``figures``: the measurements the verdict links to, each with its inputs."""
    if measured is None:
        return _("%(what)s: not measured; required: %(required)s") % {
            "what": description, "required": requirement_words(snapshot)}
    figure = _judged(figures, measured)
    text: str | None = None
    if figure is not None and figure.metric in COMPARED:
        text = _comparison(snapshot, measured, figure)
    elif figure is not None and figure.metric == "line_efficiency":
        text = _line_efficiency(snapshot, measured, figure, len(figures))
    elif snapshot.get("operator") == "within" and snapshot.get("reference_value"):
        text = _against_reference(snapshot, measured, unit, description)
    if text is not None:
        return text
    bounds = [b for b in (snapshot.get("threshold"), snapshot.get("threshold_high"))
              if b is not None]
    shown = percent(measured, against=bounds) if unit == "ratio" else amount(measured, unit)
    name = FIGURE_NAMES.get(str(snapshot.get("metric", "")))
    return _("%(what)s: %(measured)s; required: %(required)s") % {
        "what": _(name) if name else description, "measured": shown,
        "required": requirement_words(snapshot)}


def headline(snapshot: Mapping[str, Any], verdict: str) -> bool:
    """Whether page 1 leads with this criterion: a figure compared with another (a ratio or a
    reference) always; a count or check only when it was not met."""
    return (snapshot.get("unit") == "ratio" and snapshot.get("metric") != "round_deviation"
            or snapshot.get("operator") == "within" or verdict != "pass")


# Internal document references that older criterion sources carry ("DOMAIN.md G1: …",
# "RUNBOOK §3.2: …", "issue 7 §2: …"): a reader of the report has none of these documents, so
# they are left out where a source is shown; the vendor's published reports keep their names
# (R1–R9).
_INTERNAL = re.compile(
    r"(?:DOMAIN\.md|METRICS\.md|RUNBOOK|[Ii]ssue \d+)(?: §[\d.]+| G\d| repeatability| 可重复性)?"
    r"(?:\s*[:;：；]\s*|$)")
#: The vendor's published reports a source may name, with what a reader looks up.
REPORT_TITLES = {
    "R1": gettext_noop("FX100 cold-read test report, Qwen2.5-32B, single accelerator"),
    "R2": gettext_noop("FX100 KV Cache performance test report, 480B TP8, 2026-07-05"),
    "R3": gettext_noop("FX100 KV Cache test report, 480B, TP4 × 2 on one host"),
}
_REPORT = re.compile(r"\bR(\d)\b")
_DOCS = r"(?:DOMAIN\.md|METRICS\.md|RUNBOOK)"
# an aside naming an internal document, in brackets or as a later clause: left out whole
_ASIDE = re.compile(r"\s*[(（][^)）]*" + _DOCS + r"[^)）]*[)）]|[;；]\s*" + _DOCS + r"[^;；]*")


#: Tools whose names are written in small letters, also at the start of a sentence.
_TOOLS = frozenset({"fio", "vllm", "nvme", "smartctl", "ethtool", "iperf3", "lmcache"})


def source_words(text: str) -> str:
    """A criterion's source as a reader of the report sees it: internal document references
    left out, the rest as written ("DOMAIN.md G3; R2: −26 % … −32 %" → "R2: −26 % … −32 %")."""
    cleaned = _INTERNAL.sub("", _ASIDE.sub("", text)).strip(" ;:；：")
    first = re.split(r"[\s:'’]", cleaned, maxsplit=1)[0]
    if cleaned[:1].islower() and not cleaned[1:2].isupper() and first not in _TOOLS:
        cleaned = cleaned[:1].upper() + cleaned[1:]  # "vLLM's …", "fio: …" keep their case
    return cleaned


def reports_named(texts: Sequence[str]) -> list[str]:
    """The published reports ``texts`` name, each as "R2: its title" (in the active language),
    in number order, for a report's list of references."""
    found = sorted({f"R{n}" for text in texts for n in _REPORT.findall(text)})
    return [_("%(code)s: %(title)s") % {"code": code, "title": _(REPORT_TITLES[code])}
            for code in found if code in REPORT_TITLES]
