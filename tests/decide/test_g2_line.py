"""Issue 16, G2: line efficiency is against the array's port, a ratio above 1 (or a read faster
than the node's own NIC) is an error naming the fio figure and the link, and one node per array
reads it. Whole path: the ethtool and fio stand-ins, their parsers, the derivation and the
default criterion."""

from __future__ import annotations

import pytest

from acceptance.models import Array, Credential, Node
from gates.derivations import derive_line_efficiency
from gates.evaluation import Sample, evaluate_criterion, gate_outcome
from gates.models import Gate
from gates.services import engagement_create, node_array_line_rates
from runners.plans import node_steps
from tests.decide.standins import FIO_READ, StandinNode, default_spec

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEJ0cSOe3UtwS2CYSXHdALRJvzAEgCtYGsJxgddM7b+R"
PORT = {"gpu-1": ("FX100-0001", 12.5e9)}   # the array's 100 GbE port, B/s


def judged(tmp_path, overrides, arrays=PORT):
    node = StandinNode(tmp_path, "healthy", overrides)
    samples = [*node.parsed("ethtool", "ethtool", "ens1f0"),
               *node.parsed("fio", "fio", *FIO_READ, first_id=10)]
    derived = [Sample(100 + i, d.metric, d.value, d.unit, d.labels, d.node)
               for i, d in enumerate(derive_line_efficiency(samples, arrays))]
    verdict = evaluate_criterion(default_spec("G2", "line-efficiency"), [*samples, *derived])
    return verdict, derived


def test_the_ratio_is_against_the_array_port_and_says_so(tmp_path):
    verdict, derived = judged(tmp_path, {})
    assert (verdict.verdict, verdict.measured) == ("pass", pytest.approx(0.88))
    assert derived[0].labels["link"] == "array FX100-0001 port"
    assert ("fio read 11.00 GB/s on gpu-1 ÷ array FX100-0001's port at 100000 Mb/s "
            "(12.50 GB/s); the node's NIC ens1f0 at 100000 Mb/s (12.50 GB/s)"
            in verdict.explanation)


def test_without_an_array_the_node_nic_is_the_link_and_named(tmp_path):
    verdict, derived = judged(tmp_path, {}, arrays={})
    assert derived[0].labels["link"] == "node NIC"
    assert verdict.verdict == "pass"


@pytest.mark.parametrize(("read", "speed", "verdict"), [
    (12.5e9, 100000, "pass"),               # exactly 1: the whole port, possible
    (12.5e9 * (1 + 1e-6), 100000, "insufficient"),   # just above 1: impossible
    (13.0e9, 100000, "insufficient"),       # 104 %
    (11.0e9, 25000, "insufficient"),        # the case: 11 GB/s over a 25 Gb/s NIC
    (3.125e9, 25000, "fail"),               # what a 25 Gb/s NIC can carry: 25 % of the port
])
def test_a_ratio_above_one_is_an_error_naming_the_figure_and_the_link(tmp_path, read, speed,
                                                                      verdict):
    judgement, _ = judged(tmp_path, {"fio": {"read_bandwidth": read},
                                     "link": {"speed_mbps": speed}})
    assert judgement.verdict == verdict, judgement.explanation
    assert gate_outcome([judgement]) == {"pass": "passed", "fail": "stopped",
                                         "insufficient": "error"}[verdict]
    if verdict == "insufficient":
        assert f"fio read {read / 1e9:.2f} GB/s on gpu-1" in judgement.explanation
        assert f"the node's NIC ens1f0 at {speed} Mb/s" in judgement.explanation
        assert "a wrong link or a wrong figure" in judgement.explanation


@pytest.mark.django_db
def test_one_inference_node_per_array_runs_the_single_array_read():
    engagement = engagement_create(name="two-arrays", customer="C", start_date="2026-12-01")
    first = Array.objects.create(engagement=engagement, serial="A1")
    second = Array.objects.create(engagement=engagement, serial="A2")
    credential = Credential.from_secret("two-arrays-key", "-----BEGIN OPENSSH PRIVATE KEY-----")
    credential.save()
    nodes = [Node.objects.create(engagement=engagement, name=name, role=Node.Role.INFERENCE,
                                 address="127.0.0.1", ssh_user="u", host_key=HOST_KEY,
                                 credential=credential, array=array)
             for name, array in (("gpu-1", first), ("gpu-2", first), ("gpu-3", second))]
    g2 = Gate.objects.get(engagement=engagement, code="G2")
    probes = {n.name: [s["probe"] for s in node_steps(g2, n)] for n in nodes}
    assert probes == {"gpu-1": ["link_speed", "fio_seqread", "vllm_bench_serve"],
                      "gpu-2": ["vllm_bench_serve"],
                      "gpu-3": ["link_speed", "fio_seqread", "vllm_bench_serve"]}
    assert node_array_line_rates(engagement=engagement)["gpu-3"] == ("A2", 12.5e9)
