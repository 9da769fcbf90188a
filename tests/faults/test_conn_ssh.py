"""A node's SSH session killed, or hung, mid-probe: the probe run is ``unreachable`` (never
"exited with status None"), the job stops (no next probe on the dead connection), and the
remote command is killed over a fresh connection. A hung session is noticed by the keepalive
within its bound (here 1 s × (1 + 2)), not at the probe's timeout (300 s of fio + 15 s)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.harness import processes_matching, wait_for

pytestmark = pytest.mark.slow

from tests.runners.test_live_and_cancel import (  # noqa: E402  (the same real-fio lab)
    env_for,
    manage,
    prepare_long_fio,
    query,
)

ROOT = Path(__file__).resolve().parents[2]


def session_processes(tmp_path) -> list[int]:
    """The per-connection sshd processes of the lab's servers (children of each master, and
    theirs): the node's side of the open SSH sessions."""
    found = []
    for pid_file in (tmp_path / "var" / "lab").rglob("sshd.pid"):
        master = pid_file.read_text().split()[0]
        children = subprocess.run(["pgrep", "-P", master], capture_output=True, text=True)
        for child in children.stdout.split():
            found.append(int(child))
            grand = subprocess.run(["pgrep", "-P", child], capture_output=True, text=True)
            found += [int(g) for g in grand.stdout.split()
                      if "sshd" in Path(f"/proc/{g}/comm").read_text()]
    return found


def start_g2(env):
    return subprocess.Popen([sys.executable, "manage.py", "run_gate",
                             "lab-healthy", "G2", "--timeout", "200"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def fio_run(tmp_path):
    return query(tmp_path, "select state, error_kind, error, exit_code from runners_proberun "
                           "where probe = 'fio_seqread'")


def test_a_killed_ssh_session_is_unreachable_and_the_fio_it_left_is_killed(tmp_path):
    env = env_for(tmp_path)
    scratch = prepare_long_fio(env, tmp_path)
    runner = start_g2(env)
    try:
        wait_for(lambda: processes_matching(str(scratch)), timeout=90, what="fio on the node")
        sessions = session_processes(tmp_path)
        assert sessions
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)  # the node's end of the session dies
        out, err = runner.communicate(timeout=90)
    finally:
        if runner.poll() is None:
            runner.kill()
        manage(env, "lab", "down")
    assert runner.returncode == 2, out + err
    assert "Traceback" not in err
    [(state, kind, error, exit_code)] = fio_run(tmp_path)
    assert (state, kind, exit_code) == ("failed", "unreachable", None)
    assert "the SSH session was lost during the command" in error and "None" not in error
    assert "remote process group: gone" in error  # killed over a fresh connection
    assert processes_matching(str(scratch)) == []
    # The job stopped there: no next probe on the dead connection.
    assert query(tmp_path, "select probe from runners_proberun where node_id is not null "
                           "order by id") == [("link_speed",), ("fio_seqread",)]
    assert query(tmp_path, "select state, error_kind from runners_nodejob") == [
        ("failed", "unreachable")]


def test_a_hung_ssh_session_is_noticed_by_the_keepalive_within_its_bound(tmp_path):
    env = env_for(tmp_path, ACCEPTANCE_SSH_KEEPALIVE_SECONDS="1",
                  ACCEPTANCE_SSH_KEEPALIVE_COUNT="2")
    scratch = prepare_long_fio(env, tmp_path)
    runner = start_g2(env)
    stopped: list[int] = []
    try:
        wait_for(lambda: processes_matching(str(scratch)), timeout=90, what="fio on the node")
        time.sleep(1)
        stopped = session_processes(tmp_path)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)  # the session hangs: no answer, no close
        hung_at = time.monotonic()
        wait_for(lambda: fio_run(tmp_path)[0][0] != "running", timeout=60,
                 what="the hung session noticed")
        noticed_s = time.monotonic() - hung_at
        out, err = runner.communicate(timeout=90)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if runner.poll() is None:
            runner.kill()
        manage(env, "lab", "down")
    # fio printed nothing for the first second: 1 s of silence, then 2 unanswered asks of 1 s,
    # plus the worker's own steps (generous slack on a loaded machine).
    assert noticed_s < 15, noticed_s
    assert runner.returncode == 2, out + err
    [(state, kind, error, _exit)] = fio_run(tmp_path)
    assert (state, kind) == ("failed", "unreachable")
    assert "the SSH session stopped answering (2 keepalive checks of 1 s unanswered)" in error
    assert "remote process group: gone" in error
    assert processes_matching(str(scratch)) == []
    assert query(tmp_path, "select count(*) from runners_proberun where probe = "
                           "'vllm_bench_serve'") == [(0,)]
