"""Issue 16, G1: per array, the drives of its drive model equal its expected count, and every
such drive has one completed, passed self-test started by this run. Whole path: the nvme
stand-in (``nvme list``) and the self-test probe's own script on it, the parsers, the G1
derivation and the default criteria."""

from __future__ import annotations

import dataclasses
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from gates.derivations import ArrayDrives, derive_array_drives
from gates.evaluation import Sample, evaluate_criterion, gate_outcome, no_decision_reason
from runners.lab.scenarios import SCENARIOS
from runners.probes import probe
from tests.decide.standins import StandinNode, default_spec

MODEL = SCENARIOS["healthy"]["drives"]["model"]
NODE = "array-ctl"


class Controller(StandinNode):
    """The array's controller in the lab: the nvme stand-in first on PATH."""

    def __init__(self, tmp_path, name, overrides=None):
        super().__init__(tmp_path, name, overrides, node=NODE)
        self.next_id = 1

    def take(self, parser: str, raw: bytes, **labels: str) -> list[Sample]:
        samples = self.samples(parser, raw, self.next_id, **labels)
        self.next_id += len(samples)
        return samples

    def self_test(self, device: str, polls: int = 3) -> subprocess.CompletedProcess:
        command = probe("nvme_self_test").command(
            {"device": device, "poll_interval": 1, "max_polls": polls}, sudo=False)
        # The command line the runner sends over SSH, run by a shell as sshd would.
        return subprocess.run(["sh", "-c", command], capture_output=True, timeout=60, env=self.env,
                              cwd=self.tmp_path, check=False)

    def g1(self, drive_model=MODEL, expected=24, polls=3):
        """What the G1 plan does on this node: inventory, then one self-test per drive of the
        array's model (runners.execution._for_each_values); the samples and failed probes."""
        done = self.run("nvme", "list", "-o", "json")
        assert done.returncode == 0, done.stderr
        samples = self.take("nvme_list", done.stdout)
        failed = {}
        devices = [s.labels["controller"] for s in samples if s.metric == "drive_present"
                   and (not drive_model or s.labels["model"] == drive_model)]
        with ThreadPoolExecutor(max_workers=4) as pool:   # one controller each, as G1 does
            runs = list(pool.map(lambda device: self.self_test(device, polls), devices))
        for device, run in zip(devices, runs, strict=True):
            if run.returncode != 0:
                failed[device] = (run.returncode, run.stderr.decode())
                continue
            samples += self.take("nvme_self_test_log", run.stdout, controller=device)
        return samples, failed


def decide(samples, drive_model=MODEL, expected=24, array="FX100-LAB"):
    plan = {NODE: ArrayDrives(array, drive_model, expected)}
    derived = [Sample(1000 + i, d.metric, d.value, d.unit, d.labels, d.node)
               for i, d in enumerate(derive_array_drives(samples, plan))]
    # The default criteria; the drive count's threshold is the engagement's (24 by default):
    # for the small arrays that keep these tests short, the array's own count.
    specs = [dataclasses.replace(default_spec("G1", "drive-count"), threshold=expected),
             default_spec("G1", "self-test")]
    verdicts = [evaluate_criterion(spec, [*samples, *derived]) for spec in specs]
    return {v.key: v for v in verdicts}, gate_outcome(verdicts)


def test_healthy_24_drives_all_self_tested_by_this_run_pass(tmp_path):
    samples, failed = Controller(tmp_path, "healthy").g1()
    assert failed == {}
    verdicts, outcome = decide(samples)
    assert outcome == "passed"
    count = verdicts["drive-count"]
    assert (count.verdict, count.measured) == ("pass", 24)
    assert f"24 drive(s) of model {MODEL!r} counted, 24 expected" in count.explanation
    assert verdicts["self-test"].measured == 0


@pytest.mark.parametrize(("count", "verdict", "outcome"), [
    (3, "fail", "stopped"), (4, "pass", "passed"), (5, "insufficient", "error")])
def test_the_drive_count_must_equal_the_expected_count_on_both_sides(tmp_path, count,
                                                                     verdict, outcome):
    # An array of 4 drives (expected_drive_count 4) keeps the self-tests short; 23 / 24 / 25
    # of 24 alike.
    samples, _ = Controller(tmp_path, "healthy", {"drives": {"count": count}}).g1()
    verdicts, decided = decide(samples, expected=4)
    assert (verdicts["drive-count"].verdict, decided) == (verdict, outcome)
    assert verdicts["self-test"].verdict == "pass"   # every present drive was tested
    if count > 4:
        assert ("array FX100-LAB: its controller array-ctl shows 5 drives of model "
                f"{MODEL!r}, more than the 4 the array has" in verdicts["drive-count"].explanation)
    else:
        assert verdicts["drive-count"].measured == count


def test_a_boot_ssd_beside_the_drives_is_not_an_array_drive(tmp_path):
    # The boot-drive scenario (23 + boot SSD = 24 PCIe drives) on an array of 4: 3 + boot.
    samples, failed = Controller(tmp_path, "boot-drive", {"drives": {"count": 3}}).g1()
    assert failed == {}
    # nvme list itself counts 4 PCIe drives: the old criterion (>= expected) would pass.
    assert next(s.value for s in samples if s.metric == "drive_count") == 4
    verdicts, outcome = decide(samples, expected=4)
    assert outcome == "stopped"
    count = verdicts["drive-count"]
    assert (count.verdict, count.measured) == ("fail", 3)
    assert "not counted: 'SAMSUNG MZ1L2960HCJR-00A07' S665NE0R100123 /dev/nvme3" in \
        count.explanation
    assert SCENARIOS["boot-drive"]["drives"]["count"] == 23


def test_a_fabrics_controller_in_the_flat_nvme_cli_2_10_list_is_not_counted(tmp_path):
    node = Controller(tmp_path, "fabrics-controller", {"drives": {"count": 4}})
    assert node.run("nvme", "version").stdout.startswith(b"nvme version 2.10")
    samples, failed = node.g1()
    assert failed == {}
    assert next(s.value for s in samples if s.metric == "drive_count") == 5  # no transport
    verdicts, outcome = decide(samples, expected=4)
    assert outcome == "passed"
    assert "not counted: 'FX100' FX100-LAB-0001 /dev/nvme4" in \
        verdicts["drive-count"].explanation


def test_without_a_drive_model_the_model_of_most_drives_is_counted(tmp_path):
    samples, _ = Controller(tmp_path, "boot-drive", {"drives": {"count": 3}}).g1(drive_model="")
    verdicts, _ = decide(samples, drive_model="", expected=4)
    assert verdicts["drive-count"].measured == 3
    assert "(model taken from most drives)" in verdicts["drive-count"].explanation


def test_a_second_array_s_drives_seen_by_one_controller_cannot_count(tmp_path):
    # 4 + 3 drives of the same model on one controller: 7, not 4 (24 + 23 alike): never a
    # pass, an error naming the counts.
    samples, _ = Controller(tmp_path, "healthy", {"drives": {"count": 7}}).g1()
    verdicts, outcome = decide(samples, expected=4)
    assert (verdicts["drive-count"].verdict, outcome) == ("insufficient", "error")
    assert "shows 7 drives" in verdicts["drive-count"].explanation


def test_an_aborted_newest_self_test_is_an_error_naming_the_drive(tmp_path):
    samples, failed = Controller(tmp_path, "aborted-self-test", {"drives": {"count": 10}}).g1()
    assert failed == {}
    verdicts, outcome = decide(samples, expected=10)
    assert outcome == "error"
    assert verdicts["self-test"].verdict == "insufficient"
    assert ("drive FX1A0009 (/dev/nvme9): self-test aborted by a controller reset (result 2)"
            in verdicts["self-test"].explanation)
    assert "FX1A0009" in no_decision_reason(list(verdicts.values()))


@pytest.mark.parametrize("code", [1, 2, 3, 4, 8, 9])
def test_every_aborted_code_is_an_error_and_failed_codes_fail(tmp_path, code):
    samples, _ = Controller(tmp_path, "healthy",
                            {"drives": {"count": 4, "aborted_self_test": {"3": code}}}).g1()
    verdicts, outcome = decide(samples, expected=4)
    assert (verdicts["self-test"].verdict, outcome) == ("insufficient", "error")
    assert "FX1A0003" in verdicts["self-test"].explanation


def test_a_failed_self_test_stops_the_gate(tmp_path):
    samples, _ = Controller(tmp_path, "failed-self-test", {"drives": {"count": 6}}).g1()
    verdicts, outcome = decide(samples, expected=6)
    assert (verdicts["self-test"].verdict, verdicts["self-test"].measured) == ("fail", 1)
    assert outcome == "stopped"


def test_a_self_test_still_running_fails_its_probe_naming_the_drive(tmp_path):
    samples, failed = Controller(tmp_path, "self-test-in-progress",
                                 {"drives": {"count": 5}}).g1(polls=2)
    assert list(failed) == ["/dev/nvme4"]
    code, stderr = failed["/dev/nvme4"]
    assert code == 124
    assert "/dev/nvme4: self-test still running after 2 polls" in stderr
    # Even if the probe's output were kept, the drive has no result from this run: an error.
    verdicts, outcome = decide(samples, expected=5)
    assert outcome == "error"
    assert "drive FX1A0004 (/dev/nvme4): no self-test result from this run" in \
        verdicts["self-test"].explanation


def test_a_test_that_never_reaches_the_log_is_not_taken_for_the_older_one(tmp_path):
    # The drive shows no test running and its log still ends with the delivery test: the
    # script must not read that older entry as this run's result.
    node = Controller(tmp_path, "healthy", {"drives": {"stale_self_test": [6]}})
    run = node.self_test("/dev/nvme6", polls=2)
    assert run.returncode == 125
    assert (b"/dev/nvme6: the newest self-test-log entry is not the test this run started"
            in run.stderr)
    assert node.self_test("/dev/nvme7", polls=2).returncode == 0


def test_a_bundle_that_omits_some_drives_self_tests_is_an_error_naming_them(tmp_path):
    samples, _ = Controller(tmp_path, "healthy", {"drives": {"count": 5}}).g1()
    kept = [s for s in samples if s.labels.get("controller") not in ("/dev/nvme1", "/dev/nvme4")
            or s.metric == "drive_present"]
    verdicts, outcome = decide(kept, expected=5)
    assert outcome == "error"
    text = verdicts["self-test"].explanation
    assert "drive FX1A0001 (/dev/nvme1): no self-test result" in text
    assert "drive FX1A0004 (/dev/nvme4): no self-test result" in text


def test_repeated_runs_always_log_a_newer_test(tmp_path):
    node = Controller(tmp_path, "healthy")
    for _ in range(20):          # the log's 20 slots full of this drive's tests
        assert node.run("nvme", "device-self-test", "/dev/nvme0", "-n", "0xffffffff",
                        "-s", "1").returncode == 0
    assert node.self_test("/dev/nvme0", polls=1).returncode == 0
