"""The soak's default request rate, derived from G2's measured capacity (issue 16).

G2's benchmark runs ``vllm bench serve`` at a fixed concurrency *c* with requests of
``output_len`` output tokens; it measures the output throughput *T* (tok/s, over the whole
benchmark). In a closed loop of *c* requests in flight each request then lasts, on average,

    request time = c × output_len ÷ T   (R2 c16: 16 × 256 ÷ 53.6 = 76.4 s)

and the engine completes

    capacity = c ÷ request time = T ÷ output_len   requests/s   (R2 c16: 0.209 req/s)

The default soak rate is that capacity, per node (each inference node's load runs against its
own engine), from the node of the lowest capacity: a soak at a fixed rate above the capacity
only queues (1 req/s is about five times R2's), and its completion gaps then measure the queue.

The figure comes from the newest decided (reported) G2 decision: the measurements its
``output_throughput`` criterion used, with the ``output_len`` of the benchmark run that
produced each. Without them there is no default: ``SoakRefused`` says so, and the user enters
``load.request_rate`` in the plan. A plan whose ``load.request_rate`` is ``null`` asks for the
default (``gates.defaults.G4_SOAK_PLAN``); a number is used as entered.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gates.models import Decision, Gate
from runners.soak.plan import RATE_HIGH, RATE_LOW, SoakRefused

FORMULA = "rate = output_throughput ÷ output_len (= concurrency ÷ (concurrency × output_len ÷ " \
          "output_throughput))"


@dataclass(frozen=True)
class RateBasis:
    """The derived default and the G2 figure it came from."""

    rate: float              # requests/s
    output_throughput: float  # tok/s, G2's measurement
    output_len: int           # output tokens per request of G2's benchmark
    concurrency: int          # G2's --max-concurrency
    request_s: float          # mean request time at that concurrency
    measurement_id: int
    node: str
    gate_run_id: int
    attempt: int
    decision_id: int

    def text(self) -> str:
        """One line naming the figure and the formula."""
        return (f"{self.rate:.4g} req/s = G2's output throughput {self.output_throughput:g} "
                f"tok/s on {self.node} (measurement #{self.measurement_id}, G2 attempt "
                f"#{self.attempt}) ÷ {self.output_len} output tokens per request; at concurrency "
                f"{self.concurrency} a request takes {self.request_s:.1f} s")

    def as_dict(self) -> dict:
        return {**asdict(self), "formula": FORMULA}


NO_G2 = ("no default request rate: {why}; the default is derived from G2's measured output "
         "throughput, so enter load.request_rate (requests/s) in the soak plan")


def g2_rate_basis(gate: Gate) -> RateBasis:
    """The default rate for the soak of ``gate`` from its engagement's newest decided G2.

    SoakRefused (saying why and what to do) when there is no decided G2, its decision used no
    output-throughput measurement, or a measurement's run did not record its output_len."""
    engagement = gate.engagement
    decision = (Decision.objects.reported().filter(gate__engagement=engagement, gate__code="G2")
                .select_related("gate_run").order_by("-decided_at", "-id").first())
    if decision is None:
        raise SoakRefused(NO_G2.format(why=f"engagement {engagement.name} has no decided G2"))
    measurements = [m for v in decision.verdicts.filter(criterion__metric="output_throughput")
                    .prefetch_related("measurements__probe_run", "measurements__node")
                    for m in v.measurements.all() if m.metric == "output_throughput"]
    if not measurements:
        raise SoakRefused(NO_G2.format(
            why=f"G2's decision (attempt #{decision.gate_run.attempt}) used no output_throughput "
                f"measurement"))
    bases = []
    for m in sorted(measurements, key=lambda m: m.id):
        params = m.probe_run.parameters if m.probe_run else {}
        output_len = params.get("output_len")
        if not isinstance(output_len, int) or isinstance(output_len, bool) or output_len < 1 \
                or m.value <= 0:
            raise SoakRefused(NO_G2.format(
                why=f"G2 measurement #{m.id} ({m.value:g} {m.unit}) has no benchmark output_len "
                    f"or no positive throughput"))
        concurrency = params.get("concurrency")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise SoakRefused(NO_G2.format(
                why=f"G2 measurement #{m.id} came from a benchmark without a fixed concurrency "
                    f"(its requests were not a closed loop of known size)"))
        rate = m.value / output_len
        bases.append(RateBasis(
            rate=rate, output_throughput=m.value, output_len=output_len,
            concurrency=concurrency, request_s=concurrency * output_len / m.value,
            measurement_id=m.id, node=m.node.name if m.node else "", gate_run_id=
            decision.gate_run_id, attempt=decision.gate_run.attempt, decision_id=decision.id))
    return min(bases, key=lambda b: (b.rate, b.measurement_id))


def plan_with_rate(gate: Gate, plan: dict) -> tuple[dict, RateBasis | None]:
    """``plan`` with its default rate filled in when ``load.request_rate`` is null (and the
    basis it came from), else ``plan`` and None. SoakRefused when there is no default."""
    if plan["load"].get("request_rate") is not None:
        return plan, None
    basis = g2_rate_basis(gate)
    if not RATE_LOW <= basis.rate <= RATE_HIGH:  # the range an entered rate must meet
        raise SoakRefused(NO_G2.format(
            why=f"G2 measurement #{basis.measurement_id} gives {basis.rate:.4g} requests/s "
                f"({basis.output_throughput:g} tok/s ÷ {basis.output_len} tokens), outside "
                f"{RATE_LOW:g} … {RATE_HIGH:g}"))
    load = {**plan["load"], "request_rate": basis.rate, "request_rate_basis": basis.as_dict()}
    return {**plan, "load": load}, basis
