"""``manage.py parse_output`` on the seven BUGS.md cases issue 21 found mis-read: the exact
values, or exit status 2 with one line naming the tool, the place and the reason. The inputs are
those of test_bugs_* (real fio/iperf3/smartctl runs made here, or built from the tool's print
code), written to files under the test's tmp_path."""

import copy
import json
import shutil

import pytest
from django.conf import settings

from tests.parsers.test_bugs_fio import real_fio, td_verror_line
from tests.parsers.test_bugs_iperf3 import no_datagrams, real_udp_run
from tests.parsers.test_bugs_smartctl import NVME
from tests.parsers.test_bugs_vllm import DETAILED
from tests.parsers.test_parse_output import run

pytestmark = pytest.mark.skipif(not settings.configured, reason="needs Django (pytest-django)")


def command(tmp_path, tool, content, *options):
    path = tmp_path / f"{tool}.out"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return run("--tool", tool, str(path), *options)


def as_values(out):
    return {(m["metric"], json.dumps(m["labels"], sort_keys=True)): m["value"]
            for m in json.loads(out)}


def assert_one_line_refusal(status, out, err, start):
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(start), err


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_bugs_1_fio_err_line_before_the_json(tmp_path):
    raw = td_verror_line(4896, 5) + real_fio(tmp_path)
    status, out, err = command(tmp_path, "fio", raw)
    assert status == 0 and err == ""
    assert 'job_errors 1.0 1 {"job": "nullread"}' in out.splitlines()


@pytest.mark.parametrize("capture", [b"{\n\n}\n", b""])
def test_bugs_7_nvme_cli_1_3_empty_list(tmp_path, capture):
    status, out, err = command(tmp_path, "nvme_list", capture)
    assert status == 0 and err == ""
    assert out.splitlines() == ["drive_count 0.0 1 {}", "namespace_count 0.0 1 {}"]


def test_bugs_9_smartctl_bit_1_with_passed_true(tmp_path):
    doc = copy.deepcopy(NVME)
    doc["smartctl"]["exit_status"] = 2  # -T verypermissive: IDENTIFY failed, data printed anyway
    status, out, err = command(tmp_path, "smartctl", json.dumps(doc, indent=2))
    assert status == 0 and err == ""
    assert out.splitlines() == [
        'exit_status 2.0 1 {"device": "/dev/nvme0", "serial": "S5GXNX0R1"}']  # no smart_passed


@pytest.fixture(scope="module")
def udp_reverse():
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    return real_udp_run("-R")


def test_bugs_11_iperf3_reverse_udp_without_datagrams(tmp_path, udp_reverse):
    text = json.dumps(no_datagrams(json.loads(udp_reverse)), indent="\t")
    status, out, err = command(tmp_path, "iperf3", text)
    assert_one_line_refusal(status, out, err, "iperf3: line ")
    assert err.endswith("expected datagrams at the receiver (UDP 'packets' > 0), found "
                        "'no datagrams received (packets = 0)'\n")


def test_bugs_11_iperf3_loss_over_100_percent(tmp_path, udp_reverse):
    doc = json.loads(udp_reverse)
    doc["end"].pop("sum_sent"), doc["end"].pop("sum_received")
    doc["end"]["sum"].update(bits_per_second=299_000_000.0, lost_packets=1796, packets=1000,
                             lost_percent=179.6)
    text = json.dumps(doc, indent="\t")
    # the place: the line of "lost_percent" inside end.sum (intervals and end.streams hold
    # their own "lost_percent" earlier)
    lines = text.splitlines()
    end = lines.index('\t"end": {')
    total = next(i for i in range(end, len(lines)) if lines[i] == '\t\t"sum": {')
    line = next(i for i in range(total, len(lines)) if '"lost_percent"' in lines[i]) + 1
    status, out, err = command(tmp_path, "iperf3", text)
    assert_one_line_refusal(status, out, err, f"iperf3: line {line}: ")
    assert err == (f"iperf3: line {line}: expected a possible lost_percent (a loss between 0 "
                   "and 100 %), found 'lost_percent = 179.6'\n")


def test_bugs_12_iperf3_same_document_twice(tmp_path, udp_reverse):
    status, out, err = command(tmp_path, "iperf3", udp_reverse + udp_reverse, "--json")
    assert status == 0 and err == ""
    end = json.loads(udp_reverse)["end"]
    labels = json.dumps({"protocol": "udp", "streams": "1"}, sort_keys=True)
    assert as_values(out) == {
        ("sent_bandwidth", labels): end["sum_sent"]["bits_per_second"] / 8,
        ("received_bandwidth", labels): end["sum_received"]["bits_per_second"] / 8}


def test_bugs_14_vllm_p99_from_the_lists(tmp_path):
    status, out, err = command(tmp_path, "vllm_bench", json.dumps(DETAILED), "--json")
    assert status == 0 and err == ""
    values = as_values(out)
    labels = json.dumps({"concurrency": "4"})
    assert values[("ttft_p99", labels)] == pytest.approx(0.79374, rel=0.005)
    assert values[("ttft_p90", labels)] == pytest.approx(0.7284, rel=0.005)
    assert values[("itl_p99", labels)] == pytest.approx(0.0495, rel=0.005)
    assert values[("failed_requests", labels)] == 1


def test_bugs_15_vllm_ttft_0_for_completed_requests(tmp_path):
    doc = {"request_rate": "inf", "num_prompts": 900, "completed": 900,
           "request_goodput:": None, "median_ttft_ms": 0.0}
    status, out, err = command(tmp_path, "vllm_bench", json.dumps(doc, indent=1))
    assert_one_line_refusal(status, out, err, "vllm_bench: line 6: ")
    assert "expected a possible median_ttft_ms" in err and "'median_ttft_ms = 0'" in err
