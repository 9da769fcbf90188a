"""Node scratch on a real lab node (sshd on loopback): the base directory of pid files, heal
records and result directories is the running user's own 0700 directory, checked before use; a
planted base, link or pid is refused and never followed.

Each test points the service's node paths at a private base under ``tmp_path`` (the real one,
/var/tmp/acctest, is shared by every lab run on this machine).
"""

import io
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from runners import execution
from runners.evidence import collection_script
from runners.models import GateRun, NodeJob
from runners.probes import base
from runners.probes.base import Probe, kill_command, scratch_command
from runners.soak import commands
from runners.transport import SSHConnection

pytestmark = pytest.mark.slow
NOBODY = 65534
SLEEPER = Probe(name="sleeper", role="inference", parser="fio", version_argv=("true",),
                timeout_s=60, params={}, argv=lambda p: ["sleep", "30"])


@pytest.fixture
def node_root(tmp_path, monkeypatch):
    """A private scratch base for this test (not created: the scripts make it)."""
    root = tmp_path / "acctest"
    monkeypatch.setattr(base, "RUNS_DIR", f"{root}/runs")
    monkeypatch.setattr(execution, "RESULT_ROOT", str(root))
    monkeypatch.setattr(commands, "HEAL_DIR", f"{root}/heal")
    return root


@pytest.fixture
def node(lab):
    engagement, _ = lab("healthy")
    return engagement.nodes.get(role="inference")


def run(node, command, timeout=30):
    with SSHConnection(node.ssh_target()) as connection:
        result = connection.run(command, timeout=timeout)
    return result.exit_code, result.stdout.decode(), result.stderr.decode()


def planted_by_nobody(path: Path) -> Path:
    path.mkdir(mode=0o777)
    os.chown(path, NOBODY, NOBODY)
    return path


def sleeping() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def test_it_makes_a_private_base_and_one_mktemp_directory_per_run(node, node_root):
    code, out, err = run(node, scratch_command(prefix="gate-run-7-n1", root=str(node_root)))
    again = run(node, scratch_command(prefix="gate-run-7-n1", root=str(node_root)))[1]
    assert code == 0, err
    made = Path(out.strip())
    assert made.parent == node_root and made.name.startswith("gate-run-7-n1.")
    assert again.strip() != out.strip()                    # a fresh name each run
    for path in (node_root, made):
        info = path.lstat()
        assert (info.st_uid, info.st_mode & 0o777) == (os.getuid(), 0o700)


def test_it_refuses_a_base_owned_by_another_uid(node, node_root):
    planted_by_nobody(node_root)
    code, out, err = run(node, scratch_command(prefix="gate-run-7-n1", root=str(node_root)))
    assert code == 125 and out == ""
    assert f"refusing {node_root}: owned by uid {NOBODY}, not by uid {os.getuid()}" in err
    assert list(node_root.iterdir()) == []

    code, out, err = run(node, SLEEPER.command({}, token="pr-1-aa"))    # a tracked probe
    assert code == 125 and "owned by uid 65534" in err
    assert list(node_root.iterdir()) == []

    code, out, err = run(node, commands.arm_command(token="h1-aa", delay_s=0.1,
                                                    heal_argv=["true"], sudo=False))
    assert code == 3 and "owned by uid 65534" in err
    assert list(node_root.iterdir()) == []


def test_it_never_follows_a_symlink_planted_at_the_base(node, node_root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node_root.symlink_to(elsewhere)
    for command in (scratch_command(prefix="gate-run-7-n1", root=str(node_root)),
                    SLEEPER.command({}, token="pr-1-aa"),
                    commands.arm_command(token="h1-aa", delay_s=0.1, heal_argv=["true"],
                                         sudo=False)):
        code, out, err = run(node, command)
        assert code != 0 and f"refusing {node_root}: it is a symlink" in err
    assert list(elsewhere.iterdir()) == []


def test_it_never_follows_a_symlink_planted_at_the_runs_or_heal_directory(
        node, node_root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node_root.mkdir(mode=0o700)
    (node_root / "runs").symlink_to(elsewhere)
    (node_root / "heal").symlink_to(elsewhere)
    code, _, err = run(node, SLEEPER.command({}, token="pr-1-aa"))
    assert code == 125 and "runs: it is a symlink" in err
    code, _, err = run(node, commands.arm_command(token="h1-aa", delay_s=0.1,
                                                  heal_argv=["true"], sudo=False))
    assert code == 3 and "heal: it is a symlink" in err
    assert list(elsewhere.iterdir()) == []


def test_the_heal_record_is_never_written_through_a_planted_symlink(node, node_root, tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    token = "h1-link"
    code, out, err = run(node, commands.arm_command(token=token, delay_s=1.5,
                                                    heal_argv=["true"], sudo=False))
    assert code == 0 and out.strip() == "setsid", err
    healed = node_root / "heal" / f"{token}.healed"
    healed.symlink_to(target)                 # planted after arming, before the timer fires
    pid_file = node_root / "heal" / f"{token}.pid"
    deadline = time.monotonic() + 10
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_file.exists()              # the timer fired and ended
    assert target.read_text() == "keep me\n"
    said = run(node, commands.armed_command(token))[1]
    assert commands.armed_read(said.encode())[0] == "not armed"   # nor read through the link


def test_an_ordinary_heal_still_fires_and_records(node, node_root):
    token = "h1-plain"
    code, out, err = run(node, commands.arm_command(token=token, delay_s=30,
                                                    heal_argv=["true"], sudo=False))
    assert code == 0, err
    assert commands.armed_read(run(node, commands.armed_command(token))[1].encode())[0] == "armed"
    assert run(node, commands.disarm_command(token, sudo=False))[1].strip() == "disarmed"

    code, out, err = run(node, commands.arm_command(token="h2-plain", delay_s=0.2,
                                                    heal_argv=["true"], sudo=False))
    assert code == 0, err
    deadline = time.monotonic() + 10
    state = ""
    while state != "fired" and time.monotonic() < deadline:
        state, _, rc = commands.armed_read(run(node, commands.armed_command("h2-plain"))[1]
                                           .encode())
        time.sleep(0.2)
    assert (state, rc) == ("fired", 0)


@pytest.mark.parametrize("planted", ["1", "-1", "0", "1 2", "x"])
def test_the_kill_script_refuses_a_pid_file_that_is_not_a_process_above_1(
        node, node_root, planted):
    (node_root / "runs").mkdir(parents=True, mode=0o700)
    node_root.chmod(0o700)
    (node_root / "runs" / "pr-9-aa.pid").write_text(planted + "\n")
    code, out, _ = run(node, kill_command("pr-9-aa"))
    assert code == 2 and out.startswith("refusing:"), out
    assert (node_root / "runs" / "pr-9-aa.pid").exists()


def test_the_kill_script_refuses_the_pid_of_an_unrelated_process_and_leaves_it_alive(
        node, node_root):
    (node_root / "runs").mkdir(parents=True, mode=0o700)
    node_root.chmod(0o700)
    bystander = sleeping()
    try:
        (node_root / "runs" / "pr-9-aa.pid").write_text(f"{bystander.pid}\n")
        code, out, _ = run(node, kill_command("pr-9-aa"))
        assert code == 2
        assert out.strip() == (f"refusing: process {bystander.pid} is not this run (its "
                               f"command line lacks {base.RUN_MARK}=pr-9-aa)")
        time.sleep(0.3)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_disarm_refuses_the_pid_of_an_unrelated_process_and_leaves_it_alive(node, node_root):
    (node_root / "heal").mkdir(parents=True, mode=0o700)
    node_root.chmod(0o700)
    bystander = sleeping()
    try:
        (node_root / "heal" / "h9-aa.pid").write_text(f"{bystander.pid}\n")
        code, out, err = run(node, commands.disarm_command("h9-aa", sudo=False))
        assert code == 0 and out.strip() == "absent"
        assert f"refusing: process {bystander.pid} is not the heal timer of h9-aa" in err
        time.sleep(0.3)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_tracked_run_is_still_killed_and_confirmed_gone(node, node_root):
    with SSHConnection(node.ssh_target()) as connection:
        channel_done = []

        def start():
            channel_done.append(connection.run(SLEEPER.command({}, token="pr-5-aa"),
                                               timeout=60))

        thread = threading.Thread(target=start)
        thread.start()
        pid_file = node_root / "runs" / "pr-5-aa.pid"
        deadline = time.monotonic() + 10
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        code, out, _ = run(node, kill_command("pr-5-aa"))
        thread.join(20)
    assert (code, out.strip()) == (0, "gone")
    assert not Path(f"/proc/{pid}").exists()
    assert channel_done and channel_done[0].exit_code != 0


def test_the_service_records_a_refused_scratch_on_the_job_and_the_probe_run(
        node, node_root, monkeypatch):
    planted_by_nobody(node_root)
    engagement = node.engagement
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit):
        call_command("run_gate", engagement.name, "G1", stdout=out, stderr=err)
    run_ = GateRun.objects.get(gate__engagement=engagement, gate__code="G1")
    inventory = run_.probe_runs.get(probe="nvme_inventory")
    assert inventory.exit_code == 125
    assert b"owned by uid 65534" in inventory.raw("stderr")

    with SSHConnection(node.ssh_target()) as connection:
        ctx = execution._JobContext(NodeJob(gate_run=run_, node=node), connection, {})
        with pytest.raises(execution.ScratchRefused, match="owned by uid 65534"):
            execution._scratch_make(ctx)


def test_the_collection_script_refuses_a_planted_base_before_running_anything(
        node, node_root, tmp_path):
    gate = node.engagement.gates.get(code="G2")
    script = tmp_path / "collect.py"
    script.write_text(collection_script(gate=gate, node=node))
    planted_by_nobody(node_root)
    done = subprocess.run(["python3", str(script), "--output", str(tmp_path / "b.tar.gz")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"refusing {node_root}: owned by uid {NOBODY}" in done.stderr
    assert not (tmp_path / "b.tar.gz").exists() and list(node_root.iterdir()) == []
