"""G3's shared read-back over the nodes' overlap window (issue 16): per-second RDMA counter
series put on the service's clock with each node's skew, the planned node count, the shortest
overlap — computed through the real parser (``runners.parsers.rdma_series``) and the pure
derivation, judged by the default criterion, on both sides of and exactly on each bound."""

import pytest

from gates.defaults import DEFAULT_GATES
from gates.derivations import ReadbackPlan, derive_readback
from gates.evaluation import CriterionSpec, Sample, evaluate_criterion
from runners.parsers import ParseError, rdma_series

RATE = 12.5e9  # the array port: 100 GbE
G3 = next(g for g in DEFAULT_GATES if g["code"] == "G3")
SPEC = next(c for c in G3["criteria"] if c["key"] == "readback-efficiency")


def criterion():
    fields = {k: SPEC[k] for k in ("key", "metric", "operator", "threshold", "unit",
                                   "label_filter") if k in SPEC}
    return CriterionSpec(**fields)


def node_output(start: float, seconds: int, rate: float, base: int = 10**9) -> bytes:
    """What the probe's stop prints: one sample a second, port_rcv_data in 4-byte words."""
    lines = [f"time={start + i:.9f} device=mlx5_0 port=1 counter=port_rcv_data "
             f"value={base + int(rate * i / 4)}" for i in range(seconds + 1)]
    return ("\n".join(lines) + "\n").encode()


def samples_of(nodes: dict[str, tuple[float, int, float, float]]) -> list[Sample]:
    """node → (node-clock start, seconds, rate B/s, skew s): parsed through rdma_series."""
    out: list[Sample] = []
    for node, (start, seconds, rate, skew) in nodes.items():
        service_mid = 1_800_000_000.0
        clock = rdma_series.parse(f"clock time={service_mid + skew:.9f}\n".encode())
        for m in clock:
            out.append(Sample(len(out) + 1, m.metric, m.value, m.unit, {
                **m.labels, "phase": "readback", "service_sent": f"{service_mid - 0.01:.6f}",
                "service_received": f"{service_mid + 0.01:.6f}"}, node))
        for m in rdma_series.parse(node_output(start + skew, seconds, rate)):
            out.append(Sample(len(out) + 1, m.metric, m.value, m.unit,
                              {**m.labels, "phase": "readback"}, node))
    return out


def arrays(*names):
    return {name: ("FX-1", RATE) for name in names}


def aggregate(derived, metric):
    return next(d for d in derived if d.metric == metric)


def test_three_planned_nodes_reading_together_pass_over_their_overlap_only():
    # Node c starts 4 s after a and b (all 20 s long): the overlap is 4 … 20 = 16 s.
    nodes = {"a": (1000.0, 20, 3.8e9, 0.0), "b": (1000.0, 20, 3.6e9, 0.0),
             "c": (1004.0, 20, 3.7e9, 0.0)}
    derived = derive_readback(samples_of(nodes), arrays("a", "b", "c"), ReadbackPlan(3, 10))
    total = aggregate(derived, "rx_bandwidth")
    assert total.value == pytest.approx(3.8e9 + 3.6e9 + 3.7e9, rel=1e-6)
    assert total.labels["window_s"] == "16.000" and total.labels["nodes"] == "3"
    assert total.labels["planned_nodes"] == "3" and "invalid" not in total.labels
    eff = aggregate(derived, "line_efficiency")
    verdict = evaluate_criterion(criterion(), [*samples_of(nodes), *[
        Sample(1000 + i, d.metric, d.value, d.unit, d.labels, d.node)
        for i, d in enumerate(derived)]])
    assert eff.value == pytest.approx(11.1e9 / RATE, rel=1e-6) and verdict.verdict == "pass"


def test_the_clock_skew_is_taken_out_before_the_windows_are_aligned():
    # Node b's clock runs 30 s ahead: on its own clock it read 30 s "later", on the service's
    # clock at the same time as a; without the skew the windows would not overlap.
    nodes = {"a": (1000.0, 20, 5e9, 0.0), "b": (1000.0, 20, 5e9, 30.0)}
    total = aggregate(derive_readback(samples_of(nodes), arrays("a", "b"), ReadbackPlan(2, 10)),
                      "rx_bandwidth")
    assert "invalid" not in total.labels and total.labels["window_s"] == "20.000"
    assert "b +30.000 s (±0.010)" in total.labels["clock_skew"]
    assert total.value == pytest.approx(10e9, rel=1e-6)


@pytest.mark.parametrize(("late", "counts"), [(9.0, True), (10.0, True), (10.5, False)])
def test_the_shortest_overlap_below_on_and_above_the_bound(late, counts):
    # 20 s windows, node b starting `late` s after a: the overlap is 20 − late; 10 s needed.
    nodes = {"a": (1000.0, 20, 5e9, 0.0), "b": (1000.0 + late, 20, 5e9, 0.0)}
    total = aggregate(derive_readback(samples_of(nodes), arrays("a", "b"), ReadbackPlan(2, 10)),
                      "rx_bandwidth")
    assert float(total.labels["window_s"]) == pytest.approx(20 - late)
    if counts:
        assert "invalid" not in total.labels
    else:
        assert total.labels["invalid"] == (
            "the overlap window is 9.5 s, shorter than the 10 s required")


def test_windows_that_never_overlap_do_not_count_however_fast_each_node_was():
    nodes = {"a": (1000.0, 10, 6e9, 0.0), "b": (1015.0, 10, 6e9, 0.0)}
    derived = derive_readback(samples_of(nodes), arrays("a", "b"), ReadbackPlan(2, 1))
    eff = aggregate(derived, "line_efficiency")
    assert eff.labels["invalid"] == ("the nodes' read-back windows do not overlap (the last "
                                     "start is 5.0 s after the first end)")
    verdict = evaluate_criterion(criterion(), [Sample(1, eff.metric, eff.value, eff.unit,
                                                      eff.labels, "")])
    assert verdict.verdict == "insufficient" and "do not overlap" in verdict.explanation


@pytest.mark.parametrize(("nodes", "planned", "counts"), [(2, 3, False), (3, 3, True),
                                                          (3, 8, False)])
def test_fewer_nodes_than_planned_never_pass(nodes, planned, counts):
    names = [f"n{i}" for i in range(1, nodes + 1)]
    data = {n: (1000.0, 20, 4e9, 0.0) for n in names}
    total = aggregate(derive_readback(samples_of(data), arrays(*names),
                                      ReadbackPlan(planned, 10)), "line_efficiency")
    if counts:
        assert "invalid" not in total.labels
    else:
        assert total.labels["invalid"] == (f"{nodes} of the {planned} planned nodes read back "
                                           f"from FX-1 ({', '.join(names)})")


def test_a_node_without_its_clock_reading_cannot_be_aligned():
    data = samples_of({"a": (1000.0, 20, 4e9, 0.0), "b": (1000.0, 20, 4e9, 0.0)})
    data = [s for s in data if not (s.node == "b" and s.metric == "node_clock")]
    total = aggregate(derive_readback(data, arrays("a", "b"), ReadbackPlan(2, 10)),
                      "rx_bandwidth")
    assert total.labels["invalid"].startswith(
        "b: no clock reading at the sampler's start, so its samples cannot be put on the "
        "service's clock; 1 of the 2 planned nodes read back from FX-1 (a)")


@pytest.mark.parametrize(("raw", "message"), [
    (b"time=2.0 device=d port=1 counter=port_rcv_data value=5\n"
     b"time=1.0 device=d port=1 counter=port_rcv_data value=6\n", "a later time"),
    (b"time=1.0 device=d port=1 counter=port_rcv_data value=9\n"
     b"time=2.0 device=d port=1 counter=port_rcv_data value=6\n", "reset or wrapped"),
    (b"time=1.0 device=d port=1 counter=port_rcv_data value=9\n", "at least two samples"),
    (b"clock time=abc\n", "the node's time in seconds"),
    (b"", "an empty capture"),
    (b"# nothing\n", "a sample"),
])
def test_the_series_parser_refuses_what_is_not_a_series(raw, message):
    with pytest.raises(ParseError) as error:
        rdma_series.parse(raw)
    assert message in str(error.value)


def test_a_clock_reading_without_the_service_clock_around_it_cannot_be_aligned():
    # evidence imported from a bundle: the node printed its clock, no service stamped it
    data = [s if s.metric != "node_clock" or s.node != "a" else Sample(
        s.id, s.metric, s.value, s.unit, {"phase": "readback"}, s.node)
        for s in samples_of({"a": (1000.0, 20, 4e9, 0.0), "b": (1000.0, 20, 4e9, 0.0)})]
    total = aggregate(derive_readback(data, arrays("a", "b"), ReadbackPlan(2, 10)),
                      "rx_bandwidth")
    assert total.labels["invalid"] == (
        "no service clock around the clock reading of a (evidence not collected over the "
        "service's SSH): the nodes' windows cannot be aligned")
    assert total.labels["clock_skew"].startswith("a unknown, b +0.000 s")
    # one node alone needs no alignment: its window is on its own clock
    alone = [s for s in data if s.node == "a"]
    total = aggregate(derive_readback(alone, arrays("a"), ReadbackPlan(1, 10)), "rx_bandwidth")
    assert "invalid" not in total.labels and total.value == pytest.approx(4e9, rel=1e-6)


@pytest.mark.parametrize(("change", "message"), [
    ({"planned_nodes": 0}, "planned_nodes must be a whole number 1 … 4096, not 0"),
    ({"planned_nodes": "8"}, "planned_nodes must be a whole number 1 … 4096, not '8'"),
    ({"planned_nodes": True}, "planned_nodes must be a whole number 1 … 4096, not True"),
    ({"min_overlap_s": 0}, "min_overlap_s must be seconds above 0 (at most 86400), not 0"),
    ({"min_overlap_s": "1m"}, "min_overlap_s must be seconds above 0 (at most 86400), not '1m'"),
])
def test_a_plan_with_a_bad_planned_count_or_overlap_is_refused_by_name(db, change, message):
    from gates.services import readback_plan
    from runners.plans import PlanError, node_steps
    from tests.runners.test_barrier import g3_site

    engagement = g3_site(1)
    gate, node = engagement.gates.get(code="G3"), engagement.nodes.get()
    assert readback_plan(gate=gate) == ReadbackPlan(8, 60.0)  # the defaults
    step = next(s for s in gate.probe_plan if s.get("expand") == "shared_readback")
    step.update(change)
    gate.save()
    with pytest.raises(PlanError) as error:
        node_steps(gate, node)
    assert str(error.value) == f"shared_readback: {message}"
