"""The stored window aggregates (``SoakWindow``, folded once per window as it is collected)
give the same steady-state figures as re-grouping every sample from scratch — windows collected
over several ticks, a client-failed window, a fault window with its before / during / after
spans, and correctness answers."""

import json
import shlex
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from runners.models import Measurement
from runners.soak.collection import agent_collect
from runners.soak.digest import digest_rebuild
from runners.soak.evaluation import (
    soak_checks_refresh,
    soak_checks_update,
    soak_figures,
    soak_inputs,
    soak_windows_scratch,
    soak_windows_stored,
)
from runners.soak.models import FaultWindow, Soak, SoakAgent, SoakChartBucket, SoakWindow
from runners.transport import CommandResult

from .pages_fixtures import soak_engagement

T0 = 1764590400.0


def window_line(index: int, *, failed: int = 0, ttft_ms: float = 310.0,
                error: str | None = None) -> bytes:
    start = T0 + index - 1
    record = {"completed": 16 - failed, "failed": failed, "max_concurrency": 4,
              "p99_ttft_ms": ttft_ms, "output_throughput": 52.0 - index % 2,
              "soak_window": index, "soak_started": start, "soak_ended": start + 1.0,
              "soak_first_completion": start + 0.1, "soak_last_completion": start + 0.95,
              "soak_completion_gap_max_s": 0.2 + 0.01 * index, "soak_exit": 0,
              "soak_error": error}
    if error:
        record = {k: record[k] for k in ("soak_window", "soak_started", "soak_ended",
                                         "soak_completion_gap_max_s", "soak_exit",
                                         "soak_error")} | {
            "soak_first_completion": None, "soak_last_completion": None, "soak_exit": 1}
    return json.dumps(record).encode() + b"\n"


def round_line(number: int, at: float, text: str) -> bytes:
    return json.dumps({"soak_round": number, "t": at, "answers": [
        {"id": "p1", "text": text, "error": None}]}).encode() + b"\n"


class Node:
    """A node whose agent files grow between ticks; reads honour the requested offset."""

    def __init__(self):
        self.files = {"windows.jsonl": b"", "probes.jsonl": b""}

    def run(self, node, command, timeout=60):
        now = datetime.now(tz=UTC)
        words = shlex.split(command)
        name = next((n for n in self.files if any(w.endswith(n) for w in words)), None)
        if name is None:
            return CommandResult(0, b"running\n1764590500.0\n", b"", now, now)
        offset = int(words[-2])
        return CommandResult(0, self.files[name][offset:], b"", now, now)


@pytest.fixture
def collected(db):
    """18 windows collected in three ticks; windows 8–10 under a fault (failed requests, slow
    first token), window 5 failed by the client, one wrong answer during the fault."""
    _engagement, gate, _array, inference = soak_engagement()
    plan = gate.probe_plan[0]["soak"]
    soak = Soak.objects.create(gate_run=gate.runs.create(attempt=1, started_by="eng-erin"),
                               plan=plan, plan_sha256="x", state=Soak.State.RUNNING,
                               time_compression=float(plan["time_compression"]))
    agent = SoakAgent.objects.create(soak=soak, node=inference, remote_dir="/tmp/soak-x/n1",
                                     token="t", state="running", simulated=True,
                                     golden={"p1": " Paris."})
    FaultWindow.objects.create(
        soak=soak, position=1, name="link-down", kind="link_down", node=inference,
        target={"interface": "acs-v1"}, start_s=0, duration_s=1, state="healed",
        injected_at=datetime.fromtimestamp(T0 + 7.0, tz=UTC),
        healed_at=datetime.fromtimestamp(T0 + 10.0, tz=UTC))
    node = Node()
    for ticks in ((1, 6), (7, 12), (13, 18)):
        for index in range(ticks[0], ticks[1] + 1):
            faulty = 8 <= index <= 10
            node.files["windows.jsonl"] += window_line(
                index, failed=4 if faulty else 0, ttft_ms=450.0 if faulty else 300 + index,
                error="connection refused" if index == 5 else None)
            if index % 3 == 0:
                node.files["probes.jsonl"] += round_line(
                    index // 3, T0 + index - 0.5, " Lyon." if index == 9 else " Paris.")
        agent_collect(soak=soak, agent=agent, nodes=node)
        agent.refresh_from_db()
    return soak


def test_each_window_is_folded_once_and_equals_the_from_scratch_grouping(collected):
    stored = soak_windows_stored(collected)
    assert SoakWindow.objects.filter(soak=collected).count() == 18
    assert [w.index for w in stored] == list(range(1, 19))
    assert stored == soak_windows_scratch(collected)
    failed = next(w for w in stored if w.index == 5)
    assert (failed.completed, failed.first_completion, failed.ttft_p99) == (0.0, None, None)
    assert failed.failed >= 1
    faulty = next(w for w in stored if w.index == 9)
    assert (faulty.failed, faulty.ttft_p99) == (4.0, pytest.approx(0.45))
    # every window links the measurement rows it was folded from
    ids = {i for w in stored for i in w.ids}
    assert ids == set(Measurement.objects.filter(
        gate_run=collected.gate_run, derived=False).exclude(
        metric="probe_mismatches").values_list("id", flat=True))


def test_the_span_figures_from_the_aggregates_equal_those_from_every_sample(collected):
    windows, answers, faults = soak_inputs(collected)
    incremental = soak_figures(collected, (windows, answers, faults))
    scratch = soak_figures(collected, (soak_windows_scratch(collected), answers, faults))
    assert incremental == scratch
    spans = {(f.labels.get("fault", ""), f.labels["phase"], f.metric,
              f.labels.get("figure", "")): f for f in incremental}
    assert set(p for _f, p, _m, _g in spans) == {"steady", "before", "during", "after"}
    during_errors = spans[("link-down", "during", "request_error_rate", "")]
    assert during_errors.value == pytest.approx(12 / 48)  # windows 8–10: 4 of 16 each failed
    assert spans[("link-down", "during", "probe_mismatches", "")].value == 1.0
    assert spans[("link-down", "after", "request_error_rate", "")].value == 0.0
    assert spans[("", "steady", "probe_mismatches", "")].value == 0.0


def judged(soak):
    """What the tick stores for the page: the checks (without their time), the fault table,
    the span figures."""
    soak.refresh_from_db()
    return ({k: {**v, "at": ""} for k, v in soak.checks.items()}, soak.fault_checks,
            soak.figures)


def test_the_checks_are_judged_again_only_when_a_window_answer_or_fault_arrived(
        collected, django_assert_num_queries):
    stamp = soak_checks_refresh(soak=collected, stamp=None)
    assert (stamp.spans.windows, stamp.spans.answers) == (18, 6)
    collected.refresh_from_db()
    judged_at = collected.checks["error-rate"]["at"]
    with django_assert_num_queries(3):  # the faults, the windows and answers newer than seen
        assert soak_checks_refresh(soak=collected, stamp=stamp) is stamp
    collected.refresh_from_db()
    assert collected.checks["error-rate"]["at"] == judged_at  # nothing new: not judged again
    agent = collected.agents.get()
    node = Node()
    node.files["windows.jsonl"] = window_line(19, failed=8)
    agent.offsets = {}
    agent.save(update_fields=["offsets"])
    agent_collect(soak=collected, agent=agent, nodes=node)
    assert soak_checks_refresh(soak=collected, stamp=stamp) is stamp  # folded in, not rebuilt
    assert (stamp.spans.windows, stamp.spans.answers) == (19, 6)
    assert stamp.window_id == SoakWindow.objects.get(soak=collected, index=19).id
    collected.refresh_from_db()
    assert collected.checks["error-rate"]["at"] != judged_at
    assert collected.checks["error-rate"]["state"] == "fail"


def test_the_tick_stores_what_the_from_scratch_judgement_stores(collected):
    """Windows and answers folded tick by tick (an answer collected before its window's row)
    give the page the same checks, fault table and figures as judging every row again."""
    stamp = soak_checks_refresh(soak=collected, stamp=None)
    agent = collected.agents.get()
    node = Node()
    agent.offsets = {}
    agent.save(update_fields=["offsets"])
    # a wrong answer in window 19 arrives a tick before window 19's row
    node.files["probes.jsonl"] = round_line(7, T0 + 18.5, " Lyon.")
    agent_collect(soak=collected, agent=agent, nodes=node)
    agent.refresh_from_db()
    soak_checks_refresh(soak=collected, stamp=stamp)
    placed = stamp.spans.nodes[agent.node.name]
    assert placed.answer_window[-1] == 18  # tentative: the last window started before it
    node.files["windows.jsonl"] = window_line(19, ttft_ms=900.0)
    agent_collect(soak=collected, agent=agent, nodes=node)
    assert soak_checks_refresh(soak=collected, stamp=stamp) is stamp
    assert placed.answer_window[-1] == 19
    live = judged(collected)
    mismatches = {f["labels"]["phase"]: f["value"] for f in live[2]
                  if f["metric"] == "probe_mismatches"}
    assert (mismatches["steady"], mismatches["during"]) == (1.0, 1.0)
    soak_checks_update(soak=collected)
    assert judged(collected) == live


def test_a_fault_healed_since_the_last_tick_builds_the_state_again(collected):
    fault = collected.faults.get()
    healed_at = fault.healed_at
    FaultWindow.objects.filter(id=fault.id).update(healed_at=None, state="injected")
    stamp = soak_checks_refresh(soak=collected, stamp=None)
    still_on = judged(collected)
    assert not any(f["labels"]["phase"] == "after" for f in still_on[2])
    FaultWindow.objects.filter(id=fault.id).update(healed_at=healed_at, state="healed")
    again = soak_checks_refresh(soak=collected, stamp=stamp)
    assert again is not stamp and again.spans.windows == 18
    healed = judged(collected)
    assert any(f["labels"]["phase"] == "after" for f in healed[2])
    soak_checks_update(soak=collected)
    assert judged(collected) == healed


def test_the_page_digest_folded_tick_by_tick_equals_the_one_rebuilt_from_the_ledger(
        collected):
    buckets = list(SoakChartBucket.objects.filter(soak=collected).order_by(
        "node", "bucket").values_list("node", "bucket", "worst"))
    answers = collected.agents.get().answers_latest
    assert len(buckets) == 18 and answers["p1"]["last_mismatch"] == "diverges at token 0"
    assert answers["p1"]["result"] == "exact"
    digest_rebuild(collected)
    assert list(SoakChartBucket.objects.filter(soak=collected).order_by(
        "node", "bucket").values_list("node", "bucket", "worst")) == buckets
    assert collected.agents.get().answers_latest == answers


def test_the_live_figures_read_without_input_ids_equal_the_linked_ones(collected):
    def bare(figures):
        return [replace(f, input_ids=()) for f in figures]

    linked = soak_figures(collected, soak_inputs(collected))
    assert any(f.input_ids for f in linked)
    assert bare(soak_figures(collected, soak_inputs(collected, ids=False))) == bare(linked)


def test_a_soak_collected_before_the_window_aggregates_gets_them_at_the_first_tick(collected):
    SoakWindow.objects.filter(soak=collected).delete()
    stamp = soak_checks_refresh(soak=collected, stamp=None)
    assert SoakWindow.objects.filter(soak=collected).count() == 18
    assert (stamp.spans.windows, stamp.spans.answers) == (18, 6)
    live = judged(collected)
    soak_checks_update(soak=collected)
    assert judged(collected) == live
