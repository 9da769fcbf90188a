"""Reference profiles: the vendor's published figures a customer's results are compared with, as
data (DOMAIN.md "Reference figures"; the vendor's test reports are cited by their names R1, R2,
R3, as the vendor publishes them).

A profile is one row of one report: its platform, model, parallelism, workload and concurrency,
and the figures that row has. An engagement chooses one profile (``Engagement.reference_profile``,
default ``R2-c16``); a criterion that compares with a reference figure names the figure
(``Criterion.reference_figure``) and holds the chosen profile's value with the profile's key
(``Criterion.reference_profile``), so a comparison never mixes profiles. A profile lacking a
figure a criterion needs is refused (``ProfileLacksFigure``), never replaced by another
profile's figure.

Figures (units of METRICS.md):

* ``local_nvme_ttft_p50`` (s), ``local_nvme_output_throughput`` (tok/s): the baseline the G2
  benchmark reproduces (criteria ``baseline-ttft``, ``baseline-throughput``);
* ``array_ttft_p50``, ``array_output_throughput``, ``recompute_ttft_p50``,
  ``recompute_output_throughput``: the other arms of the same row (shown, not judged);
* ``throughput_gain_range`` (ratio, low … high): G3's reference range of the array tier's
  output-throughput gain over local NVMe (criterion ``throughput-gain``).

R2's gain range +29 % … +40 % spans R2's c8 and c16 rows (DOMAIN.md), so every R2 row carries
it; R3 reports its own (+35 … +36 %, whole host, two TP4 instances); R1 reports no gain and no
throughput, so a criterion needing either refuses R1 by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_PROFILE = "R2-c16"

#: figure -> (words for a page or a refusal, unit)
FIGURES: dict[str, tuple[str, str]] = {
    "local_nvme_ttft_p50": ("local-NVMe TTFT p50", "s"),
    "local_nvme_output_throughput": ("local-NVMe output throughput", "tok/s"),
    "array_ttft_p50": ("array-tier TTFT p50", "s"),
    "array_output_throughput": ("array-tier output throughput", "tok/s"),
    "recompute_ttft_p50": ("full-recompute TTFT p50", "s"),
    "recompute_output_throughput": ("full-recompute output throughput", "tok/s"),
    "throughput_gain_range": ("array-tier output-throughput gain range", "ratio"),
}

_R2 = {"report": "R2", "platform": "8 × AMD Instinct MI308X (192 GB HBM each), ROCm 7.2",
       "model": "Qwen3-Coder-480B-FP8", "parallelism": "TP=8",
       "workload": "long-context cold resume; vLLM 0.20.1 + LMCache; array FX100 4-drive RAID0, "
                   "RoCEv2, one 100 GbE port; baseline one local PCIe Gen4 NVMe drive"}
_R2_GAIN = (0.29, 0.40)  # R2: +29 % (c8) … +40 % (c16)


@dataclass(frozen=True)
class Profile:
    """One row of a vendor report. ``figures``: figure -> value (a (low, high) pair for a
    range); a figure the row does not have is absent."""

    key: str
    report: str
    platform: str
    model: str
    parallelism: str
    workload: str
    concurrency: int | None
    figures: dict[str, float | tuple[float, float]] = field(default_factory=dict)

    @property
    def report_title(self) -> str:
        """The report's row without its concurrency (a range spanning the report's rows)."""
        return f"{self.report}: {self.model}, {self.parallelism}, {self.platform}"

    @property
    def title(self) -> str:
        """One line naming the profile: report, model, parallelism, concurrency, platform."""
        at = "" if self.concurrency is None else f", concurrency {self.concurrency}"
        return f"{self.report}: {self.model}, {self.parallelism}{at}, {self.platform}"


PROFILES: dict[str, Profile] = {
    "R1-c16": Profile("R1-c16", "R1", "single accelerator", "Qwen2.5-32B", "TP=1",
                      "cold read from disk (TTFT 37.97 s; 9.30 s with LMCache's parallel-read "
                      "patch)", 16, {"local_nvme_ttft_p50": 37.97}),
    "R2-c8": Profile("R2-c8", concurrency=8, figures={
        "array_ttft_p50": 7.53, "local_nvme_ttft_p50": 10.17, "array_output_throughput": 56.6,
        "local_nvme_output_throughput": 43.9, "throughput_gain_range": _R2_GAIN}, **_R2),
    "R2-c16": Profile("R2-c16", concurrency=16, figures={
        "array_ttft_p50": 11.85, "local_nvme_ttft_p50": 17.31, "recompute_ttft_p50": 149.48,
        "array_output_throughput": 74.9, "local_nvme_output_throughput": 53.6,
        "recompute_output_throughput": 4.1, "throughput_gain_range": _R2_GAIN}, **_R2),
    "R2-c32": Profile("R2-c32", concurrency=32, figures={
        "array_ttft_p50": 26.35, "local_nvme_ttft_p50": 35.73, "array_output_throughput": 71.6,
        "local_nvme_output_throughput": 53.9, "throughput_gain_range": _R2_GAIN}, **_R2),
    "R3-tp4x2": Profile("R3-tp4x2", "R3", _R2["platform"], _R2["model"],
                        "TP4×2 (two 4-GPU instances on one host)",
                        "long-context cold resume, whole-host throughput; one LMCache fs:// "
                        "cache pool shared across the instances", None,
                        {"throughput_gain_range": (0.35, 0.36)}),
}


class ProfileError(ValueError):
    """A profile was refused; the message names the profile (and the figure)."""


class ProfileLacksFigure(ProfileError):
    pass


def profile_get(key: str) -> Profile:
    """The profile ``key``; ProfileError naming it and the known keys when there is none."""
    try:
        return PROFILES[key]
    except KeyError:
        raise ProfileError(f"reference profile {key!r} is unknown; known: "
                           f"{', '.join(PROFILES)}") from None


def figure_of(profile: Profile, figure: str, *, needed_by: str) -> float | tuple[float, float]:
    """The value of ``figure`` in ``profile``; ProfileLacksFigure naming both (and what needs
    it) when the profile's report has no such figure."""
    words = FIGURES.get(figure, (figure, ""))[0]
    if figure not in profile.figures:
        raise ProfileLacksFigure(f"reference profile {profile.key} ({profile.report}) has no "
                                 f"{words} ({figure}), which {needed_by} needs")
    return profile.figures[figure]


def _percent(value: float) -> str:
    return f"{value * 100:+g} %"


def criterion_values(profile: Profile, figure: str, *, needed_by: str) -> dict[str, Any]:
    """The fields of a criterion that compares with ``figure`` of ``profile``: the bounds
    (``reference_value`` for a single figure, ``threshold`` … ``threshold_high`` for a range),
    the concurrency its benchmark runs at (a ``label_filter`` entry, for the single figures of
    one row) and the ``source`` text naming the report and the figure."""
    value = figure_of(profile, figure, needed_by=needed_by)
    words, unit = FIGURES[figure]
    if isinstance(value, tuple) or profile.concurrency is None:
        assert isinstance(value, tuple)  # noqa: S101 (a row without concurrency has ranges only)
        return {"threshold": value[0], "threshold_high": value[1],
                "source": f"{profile.report_title}: {words} {_percent(value[0])} … "
                          f"{_percent(value[1])}"}
    return {"reference_value": value, "label_filter": {"concurrency": str(profile.concurrency)},
            "source": f"{profile.title}: {words} {value:g} {unit}"}
