"""The business case: what a measured G3 gain is worth, as pure functions (no Django, no I/O).

``business_case(params, evidence) -> Case``. Every figure names the measurement ids and the
parameters it used; nothing missing is guessed (a missing parameter is named, its figure absent).

Formulas (T = output tokens per second of one inference node, from G3's measured pass):

* resume-weighted node throughput with the array tier, r = resume share of the output tokens:
  ``T_arr = 1 / (r / T_array + (1 − r) / T_local)`` (work that does not resume runs as on local
  NVMe); without the tier ``T_loc = T_local``.
* model switching, only where load times were measured: utilisation
  ``u = 1 − switches_per_hour × load_s / 3600`` per arm; T is multiplied by u.
* nodes needed = ⌈tokens_per_day ÷ (T × 86 400)⌉; GPUs needed = nodes × GPUs per node.
* GPU cost per year = GPU cost per hour × 8 760, or purchase price ÷ depreciation years;
  node cost per year = GPUs per node × that + hosting per node per year (when given).
* array cost per year = array price × arrays ÷ horizon years.
* cost per million output tokens = node cost per hour ÷ (T × 3 600) × 10⁶, plus, with the tier,
  the array's cost per year ÷ (tokens per year ÷ 10⁶).
* yearly saving = (nodes_local − nodes_array) × node cost per year − array cost per year.
* payback (months) = array price × arrays ÷ gross saving per year × 12; none when the gross
  saving is ≤ 0 or the payback is longer than the horizon.
* storage share of the GPU budget = array price × arrays ÷ (GPUs_array × GPU cost per year ×
  horizon years), shown beside the vendor's claim of "about a tenth".
* low / expected / high: T_array = mean(T_local) × (1 + g) with g the lowest round's gain, the
  mean gain, the highest round's gain (g_i = T_array,i ÷ T_local,i − 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

HOURS_PER_YEAR = 8760.0
SECONDS_PER_DAY = 86400.0
VENDOR_STORAGE_SHARE_CLAIM = 0.10  # the vendor's "within about a tenth" of the GPU budget
# FX100 reference price: platform ¥160,000 + 24 drives × ¥8,800 (a vendor figure)
ARRAY_PRICE_DEFAULT = 160_000.0 + 24 * 8_800.0


@dataclass(frozen=True)
class Parameters:
    """The customer's parameters; ``None`` is "not given" and is named, never guessed."""

    currency: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu_cost_per_hour: float | None = None
    gpu_purchase_price: float | None = None
    gpu_depreciation_years: float | None = None
    hosting_per_node_year: float | None = None
    tokens_per_day: float | None = None
    resume_share: float | None = None
    cache_hit_share: float | None = None
    switches_per_hour: float | None = None
    array_price: float | None = ARRAY_PRICE_DEFAULT
    arrays: int | None = None
    horizon_years: float | None = None


@dataclass(frozen=True)
class ArmRound:
    round: str
    local_tok_s: float
    array_tok_s: float
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Evidence:
    """What G3 decided and measured: per-round throughput of each arm on one node."""

    g3_passed: bool
    g3_reason: str = ""
    rounds: tuple[ArmRound, ...] = ()
    simulated: bool = False
    load_s_local: float | None = None  # model load time (s), measured; else switching is left out
    load_s_array: float | None = None
    load_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str  # low / expected / high
    gain: float
    local_tok_s: float
    array_tok_s: float  # resume-weighted, after switching
    nodes_local: int
    nodes_array: int
    gpus_local: int
    gpus_array: int
    cost_per_mtok_local: float
    cost_per_mtok_array: float
    saving_per_year: float
    payback_months: float | None  # None: does not pay back within the horizon
    storage_share: float
    cumulative_saving: tuple[float, ...]  # end of each year of the horizon, array cost paid at 0


@dataclass(frozen=True)
class Case:
    established: bool
    reason: str = ""
    missing: tuple[str, ...] = ()
    simulated: bool = False
    scenarios: tuple[Scenario, ...] = ()
    switching: str = ""
    measurement_ids: tuple[int, ...] = ()
    parameters_used: dict[str, float | int | str] = field(default_factory=dict)

    def scenario(self, name: str) -> Scenario:
        return next(s for s in self.scenarios if s.name == name)


REQUIRED = ("currency", "nodes", "gpus_per_node", "tokens_per_day", "resume_share",
            "array_price", "arrays", "horizon_years")


def missing_parameters(p: Parameters) -> tuple[str, ...]:
    missing = [name for name in REQUIRED if getattr(p, name) is None]
    if p.gpu_cost_per_hour is None and (p.gpu_purchase_price is None
                                        or p.gpu_depreciation_years is None):
        missing.append("gpu_cost_per_hour (or gpu_purchase_price and gpu_depreciation_years)")
    return tuple(missing)


def gpu_cost_per_year(p: Parameters) -> float:
    if p.gpu_cost_per_hour is not None:
        return p.gpu_cost_per_hour * HOURS_PER_YEAR
    assert p.gpu_purchase_price is not None and p.gpu_depreciation_years
    return p.gpu_purchase_price / p.gpu_depreciation_years


def weighted_throughput(local: float, array: float, resume_share: float) -> float:
    """Tokens per second of a node whose resume share runs at ``array``, the rest at ``local``."""
    return 1.0 / (resume_share / array + (1.0 - resume_share) / local)


def utilisation(switches_per_hour: float, load_s: float) -> float:
    return max(0.0, 1.0 - switches_per_hour * load_s / 3600.0)


def _scenario(name: str, gain: float, local: float, p: Parameters, e: Evidence) -> Scenario:
    assert p.tokens_per_day and p.gpus_per_node and p.horizon_years is not None
    assert p.array_price is not None and p.arrays is not None and p.resume_share is not None
    array = weighted_throughput(local, local * (1.0 + gain), p.resume_share)
    if p.switches_per_hour and e.load_s_local is not None and e.load_s_array is not None:
        local *= utilisation(p.switches_per_hour, e.load_s_local)
        array *= utilisation(p.switches_per_hour, e.load_s_array)
    per_node = SECONDS_PER_DAY
    nodes_local = math.ceil(p.tokens_per_day / (local * per_node))
    nodes_array = math.ceil(p.tokens_per_day / (array * per_node))
    gpu_year = gpu_cost_per_year(p)
    node_year = p.gpus_per_node * gpu_year + (p.hosting_per_node_year or 0.0)
    node_hour = node_year / HOURS_PER_YEAR
    capex = p.array_price * p.arrays
    array_year = capex / p.horizon_years if p.horizon_years else capex
    mtok_year = p.tokens_per_day * 365.0 / 1e6
    gross = (nodes_local - nodes_array) * node_year
    payback = capex / gross * 12.0 if gross > 0 else None
    if payback is not None and payback > p.horizon_years * 12.0:
        payback = None
    gpus_array = nodes_array * p.gpus_per_node
    share = capex / (gpus_array * gpu_year * p.horizon_years) if gpus_array and gpu_year else 0.0
    years = max(1, math.ceil(p.horizon_years))
    return Scenario(
        name=name, gain=gain, local_tok_s=local, array_tok_s=array,
        nodes_local=nodes_local, nodes_array=nodes_array,
        gpus_local=nodes_local * p.gpus_per_node, gpus_array=gpus_array,
        cost_per_mtok_local=node_hour / (local * 3600.0) * 1e6,
        cost_per_mtok_array=node_hour / (array * 3600.0) * 1e6 + array_year / mtok_year,
        saving_per_year=gross - array_year, payback_months=payback, storage_share=share,
        cumulative_saving=tuple(gross * y - capex for y in range(1, years + 1)),
    )


def business_case(p: Parameters, e: Evidence) -> Case:
    """The case, or "not established" with the reason (G3 not passed, no rounds, missing input)."""
    if not e.g3_passed:
        return Case(False, reason=e.g3_reason or "G3 has not passed", simulated=e.simulated)
    if not e.rounds:
        return Case(False, reason="G3 has no measured rounds of both arms", simulated=e.simulated)
    missing = missing_parameters(p)
    if missing:
        return Case(False, reason="parameters missing: " + ", ".join(missing), missing=missing,
                    simulated=e.simulated)
    gains = [r.array_tok_s / r.local_tok_s - 1.0 for r in e.rounds]
    local = sum(r.local_tok_s for r in e.rounds) / len(e.rounds)
    mean_gain = sum(r.array_tok_s for r in e.rounds) / len(e.rounds) / local - 1.0
    scenarios = tuple(_scenario(name, g, local, p, e) for name, g in
                      (("low", min(gains)), ("expected", mean_gain), ("high", max(gains))))
    ids = tuple(dict.fromkeys(i for r in e.rounds for i in r.ids))
    if p.switches_per_hour and e.load_s_local is not None and e.load_s_array is not None:
        switching = (f"model switching applied: {p.switches_per_hour:g} switches per hour, "
                     f"measured load {e.load_s_local:.1f} s local vs {e.load_s_array:.1f} s array")
        ids += e.load_ids
    else:
        switching = ("model switching left out: the engagement did not measure model load times"
                     if p.switches_per_hour else "model switching left out: no switches per hour")
    used = {k: v for k, v in vars(p).items() if v is not None}
    return Case(True, simulated=e.simulated, scenarios=scenarios, switching=switching,
                measurement_ids=ids, parameters_used=used)
