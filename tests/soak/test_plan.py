"""The soak plan as data: the default validates, bad plans are refused naming the field."""

import copy

import pytest

from gates.defaults import DEFAULT_GATES, G4_SOAK_PLAN
from runners.soak.plan import SoakPlanError, plan_sha256, plan_validate, real_s, windows_planned


def test_it_accepts_the_default_72_hour_plan():
    plan = plan_validate(G4_SOAK_PLAN)
    assert plan["duration_s"] == 72 * 3600
    assert windows_planned(plan) == 288  # 72 h of 15-min windows (RUNBOOK §5.1)
    assert [f["kind"] for f in plan["faults"]] == ["drive_out", "link_down"]
    g4 = next(g for g in DEFAULT_GATES if g["code"] == "G4")
    assert g4["probe_plan"][0]["soak"] is G4_SOAK_PLAN


def test_it_hashes_the_plan_canonically():
    shuffled = dict(reversed(list(G4_SOAK_PLAN.items())))
    assert plan_sha256(shuffled) == plan_sha256(G4_SOAK_PLAN)
    changed = copy.deepcopy(G4_SOAK_PLAN)
    changed["load"]["request_rate"] = 2.0
    assert plan_sha256(changed) != plan_sha256(G4_SOAK_PLAN)


def test_it_compresses_time_for_the_lab():
    plan = copy.deepcopy(G4_SOAK_PLAN)
    plan["time_compression"] = 1440
    plan["load"]["window_s"] = 1800
    plan["sampling_s"] = 600
    for fault in plan["faults"]:
        fault["duration_s"] = 3600
    assert real_s(plan_validate(plan), plan["duration_s"]) == 180.0


@pytest.mark.parametrize(("change", "named"), [
    (lambda p: p.pop("duration_s"), "duration_s is missing"),
    (lambda p: p.update(duration_s="72h"), "duration_s must be a number"),
    (lambda p: p["load"].update(concurrency=2.5), "load.concurrency must be a whole number"),
    (lambda p: p["load"].update(vllm="vllm; rm -rf /"), "load.vllm"),
    (lambda p: p.update(time_compression=100000), "load.window_s compressed"),
    (lambda p: p["faults"][1].update(start_s=24 * 3600 + 60), "overlap"),
    (lambda p: p["faults"][0].update(kind="power_off"), "faults[0].kind"),
    (lambda p: p["faults"][0]["target"].update(drive="7"), "faults[0].target.drive"),
    (lambda p: p["faults"][0].update(inject=["fxcli", "drive;reboot", "{drive}"]),
     "faults[0].inject is refused"),
    (lambda p: p["faults"][1]["target"].update(interface="eth0 down"),
     "faults[1].target.interface"),
    (lambda p: p["faults"][1].update(start_s=72 * 3600 - 10), "ends after the soak"),
    (lambda p: p["correctness"].update(prompts=[]), "correctness.prompts"),
    (lambda p: p.update(duraton_s=60), "unknown key 'duraton_s'"),
])
def test_it_refuses_a_bad_plan_naming_the_field(change, named):
    plan = copy.deepcopy(G4_SOAK_PLAN)
    change(plan)
    with pytest.raises(SoakPlanError, match=None) as caught:
        plan_validate(plan)
    assert named in str(caught.value)
    assert plan_validate(G4_SOAK_PLAN)  # the default itself is untouched
