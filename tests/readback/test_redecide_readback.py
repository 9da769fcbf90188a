"""The G3 report's redecide basis carries the read-back's plan (planned nodes, shortest
overlap) and the raw outputs it rests on (each node's clock reading with the service's clock
around it, its per-second counter series): ``acceptance_core redecide`` derives the same
overlap window and aggregate again, and a basis that says otherwise is caught."""

import pytest

from gates.models import Gate
from runners.lab.services import lab_up
from tests.readback.test_lab_readback import run_g3
from tests.reports.test_redecide import forged, offline, report_of, table_row

pytestmark = pytest.mark.slow


def test_the_overlap_figure_is_derived_again_and_the_plan_it_used_is_the_one_recorded(
        transactional_db, tmp_path):
    engagement, _ = lab_up(scenario_name="kv-gain", nodes=1)
    engagement.gates.filter(code__in=["G1", "G2"]).update(state=Gate.State.PASSED)
    assert run_g3(engagement)[0] == 0
    data = report_of(engagement, "G3").read_bytes()
    status, out = offline(report_of(engagement, "G3"))
    assert status == 0, out
    assert table_row(out, "G3", "readback-efficiency")[-2:] == ["pass", "yes"]

    def basis(summary):
        return next(g for g in summary["gates"] if g["gate"] == "G3")["redecide"]

    def two_planned_nodes(summary, files):
        assert basis(summary)["readback"] == {"planned_nodes": 1, "min_overlap_s": 2.0}
        basis(summary)["readback"]["planned_nodes"] = 2

    path = tmp_path / "two-planned.pdf"
    path.write_bytes(forged(data, two_planned_nodes))
    status, out = offline(path)
    assert status == 1, out
    line = next(x for x in out.splitlines()
                if x.startswith("DIFFERS: G3 readback-efficiency (line_efficiency): recorded "))
    assert float(line.split()[5]) == pytest.approx(0.88, rel=0.02)
    assert line.endswith(" pass, the evidence gives — insufficient")

    def no_clock_round_trip(summary, files):
        run = next(r for r in basis(summary)["runs"] if r["probe"] == "rdma_counter_series"
                   and "service_sent" in r["labels"])
        run["labels"]["service_sent"] = str(float(run["labels"]["service_sent"]) - 3600)

    path = tmp_path / "skewed.pdf"
    path.write_bytes(forged(data, no_clock_round_trip))
    status, out = offline(path)
    # the recorded clock labels of the run changed: the re-parsed figures no longer match
    # what the report recorded from that run, and the skew moves the window
    assert status == 1, out
    assert "node_clock on lab-inference-1" in out
