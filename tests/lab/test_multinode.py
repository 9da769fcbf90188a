"""``lab up --nodes N``: one real sshd per node (own port, own host key, own directory), started
in parallel and pinned; per-node scenario overrides; ``lab down`` stops them all, and the
engines a run left behind."""

import io
import json
import time

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from acceptance.models import AuditEntry, Engagement
from runners.lab import server
from runners.lab.services import lab_down, lab_up
from runners.probes import probe
from runners.transport import SSHConnection, host_key_presented

pytestmark = pytest.mark.slow


def test_lab_up_with_eight_nodes_gives_eight_servers_with_distinct_ports_and_host_keys(
        transactional_db):
    out = io.StringIO()
    call_command("lab", "up", "--scenario", "kv-gain", "--nodes", "8", stdout=out)
    engagement = Engagement.objects.get(name=out.getvalue().splitlines()[-1])
    inference = list(engagement.nodes.filter(role="inference").order_by("name"))
    assert [n.name for n in inference] == sorted(f"lab-inference-{i}" for i in range(1, 9))
    nodes = list(engagement.nodes.all())
    assert len(nodes) == 9  # and the array controller, a server of its own
    assert len({n.port for n in nodes}) == 9
    assert len({n.host_key for n in nodes}) == 9
    assert len({n.host_key_fingerprint for n in nodes}) == 9
    for node in nodes:
        # Each port presents exactly the key pinned for its node, and a command runs there.
        assert host_key_presented(node.address, node.port).split()[:2] == \
            node.host_key.split()[:2]
        with SSHConnection(node.ssh_target()) as connection:
            result = connection.run("echo $ACCEPTANCE_LAB_SCENARIO", timeout=30)
        assert result.stdout.decode().strip() == str(
            settings.LAB_DIR / engagement.name / node.name / "scenario.json")
    assert f"-p {inference[0].port}" in out.getvalue()

    entry = AuditEntry.objects.get(engagement=engagement, action="lab engagement created")
    ports = entry.details["plans_adapted"]["engine_ports"]
    assert sorted(ports) == [n.name for n in inference]
    assert len(set(ports.values()) | {n.port for n in nodes}) == 17  # no port twice
    g3 = engagement.gates.get(code="G3")
    assert g3.probe_plan[0]["node_params"]["lab-inference-3"] == {
        "port": ports["lab-inference-3"]}
    config = g3.probe_plan[0]["arm_params"]["array"]["lmcache_config"]
    assert "max_local_cpu_size: 8" in open(config).read()  # per TP rank

    status = io.StringIO()
    call_command("lab", "status", stdout=status)
    assert status.getvalue().count("running") == 9
    stopped = lab_down()
    assert len(stopped) == 9 and "lab-kv-gain/lab-inference-8" in stopped
    assert lab_down() == []


def test_a_per_node_override_changes_that_node_only(transactional_db):
    engagement, _ = lab_up(scenario_name="kv-gain", nodes=4, overrides={
        "per_node": {"3": {"rdma": {"rx_bandwidth": 0.25e9}}}})
    root = settings.LAB_DIR / engagement.name

    def figures(name):
        return json.loads((root / name / "scenario.json").read_text())

    # The array port's 11.0e9 B/s shared by 4 nodes, except node 3 (slow).
    assert [figures(f"lab-inference-{i}")["rdma"]["rx_bandwidth"] for i in range(1, 5)] == [
        2.75e9, 2.75e9, 0.25e9, 2.75e9]
    assert figures("lab-inference-3")["per_node"] == {}

    def rate(name):
        node = engagement.nodes.get(name=name)
        sample = probe("rdma_counter_sample")
        values = {"result_dir": str(root / "scratch" / name), "tag": "t", "rdma_device": "mlx5_0",
                  "rdma_port": 1, "counter": "port_rcv_data"}
        with SSHConnection(node.ssh_target()) as connection:
            connection.run(sample.command({**values, "sample": "t0"}), timeout=30)
            time.sleep(0.3)
            result = connection.run(sample.command({**values, "sample": "t1"}), timeout=30)
        from runners.parsers import parse_output

        [m] = parse_output("nic_counters", result.stdout)
        return m.value

    assert rate("lab-inference-3") == pytest.approx(0.25e9, rel=0.05)
    assert rate("lab-inference-1") == pytest.approx(2.75e9, rel=0.05)


def test_lab_up_refuses_a_node_count_or_override_it_cannot_honour(transactional_db):
    with pytest.raises(server.LabError, match="1 … 128"):
        lab_up(scenario_name="kv-gain", nodes=0)
    with pytest.raises(server.LabError, match=r"per_node names node\(s\) \['9'\]"):
        lab_up(scenario_name="kv-gain", nodes=8, overrides={"per_node": {"9": {}}})
    with pytest.raises(CommandError, match="1 … 128"):
        call_command("lab", "up", "--scenario", "kv-gain", "--nodes", "500",
                     stdout=io.StringIO())


def test_sixty_four_nodes_start_in_parallel(transactional_db):
    started = time.monotonic()
    engagement, _ = lab_up(scenario_name="kv-gain", nodes=64)
    elapsed = time.monotonic() - started
    nodes = engagement.nodes.all()
    assert nodes.count() == 65 and len({n.port for n in nodes}) == 65
    assert elapsed < 60, f"64 nodes took {elapsed:.1f} s"
    assert len(lab_down()) == 65


def test_lab_down_stops_an_engine_a_run_left_running(transactional_db):
    engagement, _ = lab_up(scenario_name="kv-gain", nodes=1)
    node = engagement.nodes.get(name="lab-inference-1")
    g3 = engagement.gates.get(code="G3")
    port = g3.probe_plan[0]["node_params"]["lab-inference-1"]["port"]
    start = probe("kv_engine_start")
    values = {"result_dir": str(settings.LAB_DIR / "runs"), "arm": "recompute", "port": port,
              "tag": "left-behind", "model_path": "/models/m", "served_model_name": "m",
              "poll_interval": "0.05"}
    with SSHConnection(node.ssh_target()) as connection:
        result = connection.run(start.command(values), timeout=60)
    assert result.exit_code == 0, result.stderr.decode()
    pid_file = settings.LAB_DIR / engagement.name / node.name / "engines" / f"{port}.pid"
    pid = int(pid_file.read_text())
    assert (settings.LAB_DIR / "runs" / f"engine-{port}.pid").read_text().strip() == str(pid)
    lab_down()
    for _ in range(100):
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the engine {pid} still runs after lab down")
    assert not pid_file.exists()
