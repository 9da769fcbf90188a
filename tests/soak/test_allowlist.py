"""Issue 13 item 4: the soak runs only commands operations allowed in the settings. Free argv
in a drive fault, an unknown or badly listed vendor command, an out-of-range argument and a
vLLM executable not listed are refused on save (the editing service: page, API, manage.py)
naming the field, and at run time (soak start, before an injection) with nothing run."""

import copy

import pytest

from gates.models import Gate
from runners.models import GateRun
from runners.soak import faults
from runners.soak.driver import soak_start
from runners.soak.editing import PlanEditRefused, soak_plan_edit
from runners.soak.models import FaultWindow
from runners.soak.plan import SoakPlanError, SoakRefused, plan_validate, vendor_argv

from .pages_fixtures import recorded_soak, soak_engagement

FX100 = {"fx100-drive-pull": {"inject": ["/opt/fx/bin/fxcli", "drive", "{drive}", "offline"],
                              "heal": ["/opt/fx/bin/fxcli", "drive", "{drive}", "online"],
                              "status": ["/opt/fx/bin/fxcli", "drives", "--json"],
                              "params": {"drive": "int 0..23"}}}


def drive_fault(plan):
    return next(f for f in plan["faults"] if f["kind"] == "drive_out")


@pytest.fixture
def gate(db, settings):
    settings.SOAK_VENDOR_COMMANDS = FX100
    _engagement, gate, _array, _inference = soak_engagement("acme-soak", lab=False)
    plan = copy.deepcopy(gate.probe_plan[0]["soak"])
    plan["load"]["vllm"] = "vllm"
    drive_fault(plan)["command"] = "fx100-drive-pull"
    Gate.objects.filter(id=gate.id).update(probe_plan=[dict(gate.probe_plan[0], soak=plan)])
    gate.refresh_from_db()
    return gate


def edited(gate, change):
    plan = copy.deepcopy(gate.probe_plan[0]["soak"])
    change(plan)
    return plan


@pytest.mark.parametrize(("change", "field"), [
    (lambda p: drive_fault(p).update(inject=["touch", "/tmp/x"]), "faults[0].inject"),
    (lambda p: drive_fault(p).update(inject=["rm", "-rf", "--no-preserve-root", "/"]),
     "faults[0].inject"),
    (lambda p: drive_fault(p).update(heal=["dd", "of=/dev/nvme0n1"]), "faults[0].heal"),
    (lambda p: drive_fault(p).update(status=["sh", "-c", "reboot"]), "faults[0].status"),
    (lambda p: drive_fault(p).update(command="rm-everything"), "faults[0].command"),
    (lambda p: drive_fault(p)["target"].update(drive=24), "faults[0].target.drive"),
    (lambda p: drive_fault(p).update(args={"force": "yes"}), "faults[0].args.force"),
    (lambda p: p["load"].update(vllm="/tmp/evil-binary"), "load.vllm"),
    (lambda p: p["load"].update(vllm="soak-vllm"), "load.vllm"),  # the lab's, not here
    (lambda p: drive_fault(p).update(command="lab-array-drive"), "faults[0].command"),
])
def test_it_refuses_on_save_a_command_operations_did_not_allow_naming_the_field(
        gate, change, field):
    before = copy.deepcopy(gate.probe_plan)
    with pytest.raises(PlanEditRefused) as refused:
        soak_plan_edit(gate=gate, actor="pm-paula", reason="try", plan=edited(gate, change))
    assert refused.value.field == field, str(refused.value)
    gate.refresh_from_db()
    assert gate.probe_plan == before


def test_it_accepts_an_allowed_command_and_substitutes_whole_argv_elements(gate):
    plan = edited(gate, lambda p: drive_fault(p)["target"].update(drive=3))
    stored = soak_plan_edit(gate=gate, actor="pm-paula", reason="drive 3", plan=plan)
    argv = vendor_argv(drive_fault(stored), lab=False)
    assert argv["inject"] == ["/opt/fx/bin/fxcli", "drive", "3", "offline"]
    assert argv["heal"] == ["/opt/fx/bin/fxcli", "drive", "3", "online"]


@pytest.mark.parametrize("argv0", ["sh", "/bin/bash", "/usr/bin/python3.11", "env", "sudo",
                                   "busybox", "perl", "./fxcli", "bin/fxcli"])
def test_shells_interpreters_and_relative_paths_are_refused_even_when_allowed(gate, settings,
                                                                               argv0):
    entry = copy.deepcopy(FX100["fx100-drive-pull"])
    entry["heal"] = [argv0, "-c", "reboot"]
    settings.SOAK_VENDOR_COMMANDS = {"fx100-drive-pull": entry}
    with pytest.raises(SoakPlanError, match=r"faults\[0\]\.command='fx100-drive-pull'"):
        plan_validate(gate.probe_plan[0]["soak"])
    settings.SOAK_VLLM_EXECUTABLES = [argv0]
    plan = copy.deepcopy(gate.probe_plan[0]["soak"])
    plan["load"]["vllm"] = argv0
    drive_fault(plan)["command"] = None
    with pytest.raises(SoakPlanError, match="load.vllm"):
        plan_validate(plan)


class NoNode:
    """A node pool that fails the test when anything would run on a node."""

    def run_checked(self, node, command):
        raise AssertionError(f"ran on {node.name}: {command}")

    run = run_checked


@pytest.mark.parametrize("legacy", [["touch", "/tmp/x"], ["sh", "-c", "reboot"]])
def test_a_plan_stored_before_the_allow_list_is_refused_at_soak_start(gate, legacy):
    plan = copy.deepcopy(gate.probe_plan[0]["soak"])
    fault = drive_fault(plan)
    fault.pop("command")
    fault.update(inject=legacy, heal=legacy, status=legacy)
    Gate.objects.filter(id=gate.id).update(probe_plan=[dict(gate.probe_plan[0], soak=plan)])
    gate.refresh_from_db()
    with pytest.raises(SoakPlanError, match=r"faults\[0\]\.inject is refused"):
        soak_start(gate=gate, started_by="eng-erin")
    assert not GateRun.objects.filter(gate=gate).exists()


def test_a_soak_stored_before_the_allow_list_refuses_the_fault_running_nothing(db):
    soak = recorded_soak(windows=1)
    fault = soak.faults.get(kind="drive_out")
    plan = copy.deepcopy(soak.plan)
    drive = drive_fault(plan)
    drive.pop("command")
    drive.update(inject=["touch", "/tmp/x"], heal=["touch", "/tmp/y"], status=None)
    type(soak).objects.filter(id=soak.id).update(plan=plan)
    soak.refresh_from_db()
    FaultWindow.objects.filter(id=fault.id).update(state=FaultWindow.State.PLANNED,
                                                   heal_command="", inject_command="")
    fault.refresh_from_db()
    faults.fault_inject(soak, fault, NoNode(), 3.0)
    fault.refresh_from_db()
    assert fault.state == FaultWindow.State.REFUSED
    assert "command is not set" in fault.error


def test_a_vllm_not_allowed_is_refused_at_agent_start_running_nothing(db):
    from runners.soak.agent import AgentStartFailed, soak_agents_start

    soak = recorded_soak(windows=1)
    plan = copy.deepcopy(soak.plan)
    plan["load"]["vllm"] = "/tmp/evil-binary"
    type(soak).objects.filter(id=soak.id).update(plan=plan)
    soak.refresh_from_db()
    with pytest.raises(AgentStartFailed, match="load.vllm='/tmp/evil-binary'"):
        soak_agents_start(soak=soak, nodes=NoNode())


def test_the_lab_stand_in_is_allowed_for_lab_engagements_only(db):
    _engagement, gate, _array, _inference = soak_engagement("lab-x", lab=True)
    plan = gate.probe_plan[0]["soak"]
    assert drive_fault(plan)["command"] == "lab-array-drive"
    assert plan_validate(plan, lab=True)
    with pytest.raises(SoakPlanError):
        plan_validate(plan, lab=False)
    with pytest.raises(SoakRefused):
        faults.fault_resolved(drive_fault(plan), lab=False)


def test_the_confirmation_stores_argv_and_sha256_and_a_plan_edit_voids_it(gate):
    from acceptance.models import AuditEntry
    from runners.soak.plan import argv_sha256, plan_sha256

    array = gate.engagement.nodes.get(role="array")
    bound = faults.fault_confirmation_of(array, "drive_out", "7")
    assert bound["argv"]["inject"] == ["/opt/fx/bin/fxcli", "drive", "7", "offline"]
    with pytest.raises(ValueError, match="/opt/fx/bin/fxcli drive 7 offline"):
        faults.fault_target_mark(node=array, kind="drive_out", target="7", actor="eng-erin",
                                 confirmation="allow drive_out of 7 on lab-array")
    marked = faults.fault_target_mark(node=array, kind="drive_out", target="7",
                                      actor="eng-erin", confirmation=bound["words"])
    assert marked.argv == bound["argv"] and marked.argv_sha256 == argv_sha256(bound["argv"])
    assert marked.plan_sha256 == plan_sha256(gate.probe_plan[0]["soak"])
    audit = AuditEntry.objects.get(action="fault target confirmed", details__target="7")
    assert audit.details["argv_sha256"] == marked.argv_sha256
    plan = copy.deepcopy(gate.probe_plan[0]["soak"])
    drive_fault(plan)["target"]["drive"] = 7
    drive_fault(plan)["duration_s"] = drive_fault(plan)["duration_s"] + 1
    soak_plan_edit(gate=gate, actor="pm-paula", reason="longer", plan=plan)
    gate.refresh_from_db()
    fault = drive_fault(gate.probe_plan[0]["soak"])
    with pytest.raises(SoakRefused, match="void: the plan changed"):
        faults.fault_target_of(gate, fault, array)
    faults.fault_target_mark(node=array, kind="drive_out", target="7", actor="eng-erin",
                             confirmation=faults.fault_confirmation_of(array, "drive_out",
                                                                       "7")["words"])
    assert faults.fault_target_of(gate, fault, array).argv_sha256 == marked.argv_sha256


def test_a_fault_whose_confirmation_is_void_is_refused_before_injection_running_nothing(db):
    soak = recorded_soak(windows=1)  # its targets predate argv confirmations
    fault = soak.faults.get(kind="drive_out")
    FaultWindow.objects.filter(id=fault.id).update(state=FaultWindow.State.PLANNED)
    fault.refresh_from_db()
    faults.fault_inject(soak, fault, NoNode(), 3.0)
    fault.refresh_from_db()
    assert fault.state == FaultWindow.State.REFUSED and "void" in fault.error
