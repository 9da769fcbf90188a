"""Fault injection guard rails and heals, against real lab nodes (sshd), a real network
namespace and the stand-in array."""

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from acceptance.models import Array, AuditEntry
from gates.models import Gate
from runners.lab import netns, server
from runners.models import GateRun
from runners.soak import commands, driver, faults
from runners.soak.driver import soak_start
from runners.soak.faults import fault_target_mark
from runners.soak.models import FaultTarget, FaultWindow
from runners.soak.nodes import NodePool
from runners.soak.plan import SoakRefused
from runners.transport import SSHConnection, Unreachable

pytestmark = pytest.mark.slow


def g4(engagement):
    return Gate.objects.get(engagement=engagement, code="G4")


def link_fault(engagement):
    plan = g4(engagement).probe_plan[0]["soak"]
    return next(f for f in plan["faults"] if f["kind"] == "link_down")


def context(node):
    return commands.FaultContext(node.interface, node.use_sudo, "", 0)


def engine_answers(engagement) -> int:
    url = g4(engagement).probe_plan[0]["soak"]["load"]["base_url"] + "/v1/completions"
    body = json.dumps({"prompt": "are you there?", "max_tokens": 4}).encode()
    request = urllib.request.Request(  # noqa: S310 (the lab engine on loopback)
        url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_heal_armed_on_the_node_restores_the_link_while_the_service_cannot_reach_it(
        soak_lab, settings):
    settings.SSH_CONNECT_RETRIES = 0
    engagement = soak_lab("soak-link-impact")  # one path: the fault is visible
    node = engagement.nodes.get(role="inference")
    fault = link_fault(engagement)
    ns, interface = fault["target"]["netns"], fault["target"]["interface"]
    token = "t-unreachable-1"
    nodes = NodePool()
    try:
        armed = nodes.run(node, commands.arm_command(
            token=token, delay_s=3.0, heal_argv=commands.LinkDown.heal_argv(fault, context(node)),
            sudo=False))
        assert armed.exit_code == 0 and armed.stdout.strip() == b"setsid"
        said = nodes.run(node, commands.armed_command(token)).stdout
        assert commands.armed_read(said)[0] == "armed"
        injected = nodes.run(node, commands.timed_command(
            commands.LinkDown.inject_argv(fault, context(node)), sudo=False))
        assert injected.exit_code == 0
    finally:
        nodes.close()
    assert netns.link_state(ns, interface) == "DOWN"
    assert engine_answers(engagement) == 503  # the KV tier is cut off: a real fault
    # The service loses the node: its sshd is gone.
    assert server.server_stop(settings.LAB_DIR / engagement.name / node.name)
    with pytest.raises(Unreachable), SSHConnection(node.ssh_target()):
        pass
    deadline = time.monotonic() + 8
    while netns.link_state(ns, interface) == "DOWN" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert netns.link_state(ns, interface) == "UP"
    healed_at, rc = Path(f"{commands.HEAL_DIR}/{token}.healed").read_text().split()
    assert rc == "0" and float(healed_at) <= time.time()
    assert not Path(f"{commands.HEAL_DIR}/{token}.pid").exists()
    time.sleep(0.3)  # the engine's path check notices the link is back
    assert engine_answers(engagement) == 200


def test_it_refuses_to_take_down_the_interface_carrying_the_ssh_path(soak_lab):
    engagement = soak_lab("soak-clean")
    node = engagement.nodes.get(role="inference")
    nodes = NodePool()
    try:
        def judged(fault):
            return {c.name: c.judge(*(lambda r: (r.exit_code, r.stdout.decode()))(
                nodes.run(node, c.command))) for c in commands.LinkDown.safety(fault,
                                                                              context(node))}

        # The lab's SSH session comes over loopback: lo carries it.
        ssh_path = judged({"name": "x", "target": {"interface": "lo"}})
        assert ssh_path["interface-exists"][0]
        ok, said = ssh_path["not-the-ssh-path"]
        assert not ok and "lo carries the service's SSH session" in said
        data_path = judged(link_fault(engagement))
        assert all(ok for ok, _ in data_path.values())
        assert "dev lo" in data_path["not-the-ssh-path"][1]
        missing = judged({"name": "x", "target": {"interface": "nosuch0"}})
        assert not missing["interface-exists"][0]
    finally:
        nodes.close()


def test_it_refuses_a_soak_whose_fault_targets_are_not_confirmed(soak_lab):
    engagement = soak_lab("soak-clean")
    FaultTarget.objects.filter(engagement=engagement, kind="link_down").delete()
    with pytest.raises(SoakRefused, match="not marked for fault injection"):
        soak_start(gate=g4(engagement), started_by="eng-bob")
    assert not GateRun.objects.filter(gate__engagement=engagement).exists()


def test_it_refuses_a_drive_fault_on_raid0_or_without_the_vendor_command(soak_lab):
    engagement = soak_lab("soak-clean")
    Array.objects.filter(engagement=engagement).update(layout=Array.Layout.RAID0)
    with pytest.raises(SoakRefused, match="RAID0"):
        soak_start(gate=g4(engagement), started_by="eng-bob")
    Array.objects.filter(engagement=engagement).update(layout=Array.Layout.RAID6)
    gate = g4(engagement)
    gate.probe_plan[0]["soak"]["faults"][0]["command"] = None
    gate.save()
    with pytest.raises(SoakRefused, match="command is not set"):
        soak_start(gate=gate, started_by="eng-bob")
    assert not GateRun.objects.filter(gate__engagement=engagement).exists()


def test_marking_a_fault_target_needs_a_confirmation_naming_node_and_target(soak_lab):
    engagement = soak_lab("soak-clean")
    node = engagement.nodes.get(role="inference")
    with pytest.raises(ValueError, match="must name the node"):
        fault_target_mark(node=node, kind="link_down", target="ens1f1", actor="eng-bob",
                          confirmation="yes")
    with pytest.raises(ValueError, match="role array"):
        fault_target_mark(node=node, kind="drive_out", target="3", actor="eng-bob",
                          confirmation=f"allow drive 3 on {node.name}")
    call_command("soak", "mark-target", engagement.name, node.name, "link_down", "ens1f1",
                 "--confirm", f"allow link_down of ens1f1 on {node.name}", "--by", "eng-bob")
    row = FaultTarget.objects.get(node=node, target="ens1f1")
    assert row.confirmed_by == "eng-bob" and row.confirmed_at is not None
    assert AuditEntry.objects.filter(engagement=engagement, action="fault target confirmed",
                                     actor="eng-bob").count() == 1


def test_lab_down_removes_the_namespace_links_and_blackhole_route(soak_lab):
    engagement = soak_lab("soak-clean")
    state = json.loads((settings.LAB_DIR / engagement.name / "netns.json").read_text())
    subnet = state["subnet"]
    import subprocess

    routes = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True,
                            text=True).stdout
    assert subnet.split("/")[0] in routes and "metric 4000" in routes
    # With a host end down its /30 vanishes; the blackhole catches the address (gotcha 1).
    paths = netns.paths_of(settings.LAB_DIR / engagement.name)
    p = paths.paths[1]
    subprocess.run(["ip", "link", "set", "dev", p.host_if, "down"], check=True)
    said = subprocess.run(["ip", "route", "get", p.ns_address], capture_output=True, text=True)
    assert "eth0" not in said.stdout and "via" not in said.stdout
    from runners.lab.services import lab_down

    removed = lab_down()
    assert any("netns acs-" in r for r in removed)
    assert state["netns"] not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                text=True).stdout
    assert subnet.split("/")[0] not in subprocess.run(
        ["ip", "route", "show", "table", "all"], capture_output=True, text=True).stdout


def test_a_fault_left_armed_is_settled_by_the_state_of_its_target(soak_lab, monkeypatch):
    """The node went away (or the worker died) between arming the heal and injecting: the
    target's state says whether the fault is on."""
    monkeypatch.setattr(driver, "_dispatch", lambda soak_id, token: None)  # no driver
    engagement = soak_lab("soak-clean")
    soak = soak_start(gate=g4(engagement), started_by="eng-bob").soak
    fault = soak.faults.get(kind="link_down")
    plan_fault = link_fault(engagement)
    node = fault.node
    nodes = NodePool()
    try:
        for injected in (False, True):
            fault.heal_token = f"t-settle-{int(injected)}"
            nodes.run(node, commands.arm_command(
                token=fault.heal_token, delay_s=30.0,
                heal_argv=commands.LinkDown.heal_argv(plan_fault, context(node)), sudo=False))
            if injected:
                nodes.run(node, commands.timed_command(
                    commands.LinkDown.inject_argv(plan_fault, context(node)), sudo=False))
            fault.state, fault.heal_verified_at = FaultWindow.State.ARMED, None
            fault.save()
            faults.soak_faults_tick(soak=soak, nodes=nodes)
            fault.refresh_from_db()
            if injected:
                assert fault.state == FaultWindow.State.INJECTED and fault.injected_at
            else:
                assert fault.state == FaultWindow.State.FAILED
                assert "armed but not injected" in fault.error
                said = nodes.run(node, commands.armed_command(fault.heal_token)).stdout
                assert commands.armed_read(said)[0] == "not armed"  # disarmed
    finally:
        nodes.run(node, commands.timed_command(
            commands.LinkDown.heal_argv(plan_fault, context(node)), sudo=False))
        nodes.run(node, commands.disarm_command("t-settle-1", sudo=False))
        nodes.close()
