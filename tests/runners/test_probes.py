"""Probe commands come only from definitions and validated parameters, quoted, under timeout."""

import os
import shlex
import shutil
import subprocess

import pytest

from runners.parsers import parse_output
from runners.probes import PROBES, ProbeParameterError, probe

SBIN = "/usr/local/sbin:/usr/sbin:/usr/bin:/bin"


def test_it_wraps_every_command_in_a_node_side_timeout():
    command = probe("nvme_smart_log").command({"device": "/dev/nvme7"})
    assert shlex.split(command) == ["timeout", "--kill-after=10", "60", "env", "LC_ALL=C",
                                    "nvme", "smart-log", "/dev/nvme7", "-o", "json"]


def test_it_builds_the_runbook_fio_job_read_only():
    argv = shlex.split(probe("fio_seqread").command({"filename": "/dev/nvme1n1"}))
    assert argv[:4] == ["timeout", "--kill-after=10", "600", "env"]
    assert "--readonly" in argv and "--rw=read" in argv and "--direct=1" in argv
    assert "--output-format=json" in argv and "--filename=/dev/nvme1n1" in argv


def test_it_prefixes_sudo_non_interactively_when_the_node_says_so():
    command = probe("nvme_smart_log").command({"device": "/dev/nvme0"}, sudo=True)
    assert command.startswith("sudo -n timeout --kill-after=10 60 env LC_ALL=C nvme smart-log")


@pytest.mark.parametrize("device", ["/dev/nvme0; rm -rf /", "/dev/sda", "nvme0", "/dev/nvme0 x",
                                    "$(reboot)", ""])
def test_it_refuses_a_device_that_is_not_an_nvme_controller(device):
    with pytest.raises(ProbeParameterError, match="device="):
        probe("nvme_self_test").command({"device": device})


def test_it_names_the_parameter_and_the_rule_in_its_errors():
    spec = probe("fio_seqread")
    with pytest.raises(ProbeParameterError, match=r"fio_seqread: runtime=0 is outside 1…3600"):
        spec.command({"filename": "/dev/nvme1n1", "runtime": 0})
    with pytest.raises(ProbeParameterError, match="must be an integer"):
        spec.command({"filename": "/dev/nvme1n1", "numjobs": "8"})
    with pytest.raises(ProbeParameterError, match="unknown parameters"):
        spec.command({"filename": "/dev/nvme1n1", "extra": "--write_iolog=/etc/passwd"})
    with pytest.raises(ProbeParameterError, match="parameter filename is required"):
        spec.command({})


def test_it_keeps_a_hostile_model_name_out_of_the_shell():
    spec = probe("vllm_bench_serve")
    base = {"base_url": "http://127.0.0.1:8000", "tokenizer": "/models/q",
            "result_dir": "/var/tmp/acctest/gate-run-1"}
    with pytest.raises(ProbeParameterError, match="model="):
        spec.command({**base, "model": "m'; touch /tmp/pwned; '"})
    argv = shlex.split(spec.command({**base, "model": "Qwen/Qwen3-Coder-480B"}))
    # The script is a fixed definition; the parameters arrive as positional arguments.
    script = PROBES["vllm_bench_serve"].argv(spec.clean({**base, "model": "x"}))[2]
    assert argv[5:9] == ["sh", "-c", script, "vllm-bench"]
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen3-Coder-480B"


def test_it_summarises_scripted_probes_for_people():
    spec = probe("nvme_self_test")
    text = spec.display({"device": "/dev/nvme3"}, "full command")
    assert text.startswith("nvme device-self-test /dev/nvme3 -n 0xffffffff -s 1; then nvme "
                           "self-test-log /dev/nvme3 -o json")
    assert probe("nvme_smart_log").display({"device": "/dev/nvme0"}, "the command") == \
        "the command"
    assert probe("nvme_inventory").display({}, "x").startswith("nvme list -o json")


def test_it_names_the_known_probes_for_an_unknown_one():
    with pytest.raises(KeyError, match="nvme_inventory"):
        probe("rm_rf")


def test_it_parses_smartctl_output_whatever_findings_its_exit_bits_report():
    spec = probe("smartctl_health")
    # bit 2 (a SMART command failed), bits 3-7 (disk failing, prefail, log errors): still data.
    assert spec.parse_exit(0) and spec.parse_exit(4) and spec.parse_exit(216)
    # bit 0 (command line error) and bit 1 (device open failed): no health data at all.
    assert not spec.parse_exit(1) and not spec.parse_exit(2) and not spec.parse_exit(6)
    assert not probe("nvme_smart_log").parse_exit(4)
    assert shlex.split(spec.command({"device": "/dev/nvme0"}))[-4:] == [
        "smartctl", "-j", "-a", "/dev/nvme0"]


@pytest.mark.skipif(os.path.exists("/sys/class/nvme") or not shutil.which("nvme", path=SBIN),
                    reason="needs nvme-cli on a machine whose kernel has no NVMe controller")
def test_the_inventory_of_a_machine_without_nvme_is_0_drives_not_an_error():
    """nvme-cli 2.x exits 1 ("Failed to scan topology") without /sys/class/nvme: the probe
    reports the empty inventory, with nvme's error and a note on stderr."""
    argv = PROBES["nvme_inventory"].argv({})
    done = subprocess.run(argv, capture_output=True, env={"PATH": SBIN}, timeout=30)
    assert done.returncode == 0
    assert [(m.metric, m.value) for m in parse_output("nvme_list", done.stdout)] == [
        ("drive_count", 0.0), ("namespace_count", 0.0)]
    assert b"the kernel sees no NVMe controller (nvme list exited 1)" in done.stderr


def test_the_inventory_without_nvme_cli_fails_the_run(tmp_path):
    done = subprocess.run(PROBES["nvme_inventory"].argv({}), capture_output=True,
                          env={"PATH": str(tmp_path)}, timeout=30, executable="/bin/sh")
    assert done.returncode == 127 and done.stdout == b""
