"""BUGS.md #11-#13 (iperf3): nan and impossible UDP figures, polluted or repeated documents, what
success and throughput are. Real iperf 3.12 runs on loopback (UDP, normal and ``-R``); the shapes
the loopback cannot produce are built from those real documents by changing the fields
``iperf_print_results`` (``src/iperf_api.c``) prints, with each expected value derived beside it."""

import copy
import json
import shutil
import subprocess
import time

import pytest

from runners.parsers import iperf3
from runners.parsers.base import ParseError
from tests.parsers.corpus import by_metric
from tests.parsers.test_iperf3 import free_port

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")


def real_udp_run(*options):
    """One real ``iperf3 -c 127.0.0.1 -u -b 10M -t 1 -J`` against a one-off server."""
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-u", "-b", "10M", "-t", "1", "-J",
            *options]
    try:
        for _ in range(50):  # the server may not listen yet (see test_iperf3.run_client)
            client = subprocess.run(argv, capture_output=True, timeout=60)
            if b"Connection refused" not in client.stdout:
                break
            time.sleep(0.1)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert client.returncode == 0, client.stdout[-400:]
    return client.stdout.decode()


@pytest.fixture(scope="module")
def udp():
    return real_udp_run()


@pytest.fixture(scope="module")
def udp_reverse():
    return real_udp_run("-R")


def parse_doc(doc):
    return by_metric(iperf3.parse(json.dumps(doc, indent="\t").encode()))


def refusal(text):
    with pytest.raises(ParseError) as error:
        iperf3.parse(text.encode())
    return str(error.value)


# --- #11 esnet/iperf#364, #370, #613, #826, #1489 -------------------------------------------------

def test_a_real_udp_run_reads_sent_and_received(udp, udp_reverse):
    for raw in (udp, udp_reverse):
        end = json.loads(raw)["end"]
        m = by_metric(iperf3.parse(raw.encode()))
        assert m["sent_bandwidth"].value == end["sum_sent"]["bits_per_second"] / 8
        assert m["received_bandwidth"].value == end["sum_received"]["bits_per_second"] / 8
        assert m["received_bandwidth"].labels == {"protocol": "udp", "streams": "1"}
    assert json.loads(udp_reverse)["start"]["test_start"]["reverse"] == 1


def no_datagrams(doc):
    """The real -R document as iperf 3.12 prints it when no datagram arrived: the receiver's
    totals have bytes 0, packets 0, and lost_percent 0.0 ("If no packets were sent, arbitrarily
    set loss percentage to 0", iperf_api.c); jitter 0."""
    doc = copy.deepcopy(doc)
    for key in ("sum", "sum_received"):
        doc["end"][key].update(bytes=0, bits_per_second=0, jitter_ms=0, lost_packets=0,
                               packets=0, lost_percent=0)
    for stream in doc["end"]["streams"]:
        stream["udp"].update(bytes=0, bits_per_second=0, jitter_ms=0, lost_packets=0,
                             packets=0, lost_percent=0)
    return doc


def test_a_reverse_test_where_no_datagram_arrived_says_so(udp_reverse):
    doc = no_datagrams(json.loads(udp_reverse))
    message = refusal(json.dumps(doc, indent="\t"))
    assert message.startswith("iperf3: line ")
    assert "no datagrams received (packets = 0)" in message


def test_old_udp_sum_without_datagrams_and_a_bare_nan_loss(udp_reverse):
    # iperf 3.0.11 (#364): only end.sum, packets 0, lost_percent printed as the bare token -nan
    doc = json.loads(udp_reverse)
    end = doc["end"]
    end.pop("sum_sent"), end.pop("sum_received")
    end["sum"].update(lost_packets=0, packets=0, lost_percent="NAN-TOKEN", jitter_ms=6.11273e+08)
    text = json.dumps(doc, indent="\t").replace('"NAN-TOKEN"', "-nan")
    assert "no datagrams received" in refusal(text)  # not a sent rate alone, not a pass


def test_a_loss_above_100_percent_is_refused_not_a_negative_bandwidth(udp):
    # iperf 3.9-style end.sum under overload (#1489): 1796 of 1000 datagrams "lost" = 179.6 %.
    # The old reading sent × (1 − 1796/1000) = 37.4e6 B/s × −0.796 would be −29.8 MB/s.
    doc = json.loads(udp)
    end = doc["end"]
    end.pop("sum_sent"), end.pop("sum_received")
    end["sum"].update(bits_per_second=299_000_000.0, lost_packets=1796, packets=1000,
                      lost_percent=179.6)
    message = refusal(json.dumps(doc, indent="\t"))
    assert "lost_percent = 179.6" in message and "between 0 and 100 %" in message


def test_lost_packets_above_packets_is_refused_without_lost_percent(udp):
    doc = json.loads(udp)
    doc["end"]["sum_received"].update(lost_packets=12, packets=10)
    doc["end"]["sum_received"].pop("lost_percent")
    assert "lost_packets = 12" in refusal(json.dumps(doc, indent="\t"))


def test_a_negative_bandwidth_is_refused_naming_it(udp):
    doc = json.loads(udp)
    doc["end"]["sum_received"]["bits_per_second"] = -239_000_000.0
    message = refusal(json.dumps(doc, indent="\t"))
    assert "received_bandwidth cannot be negative" in message
    assert "bits_per_second = -2.39e+08" in message


def test_a_real_loss_is_discounted_from_the_old_single_sum(udp):
    # 3.9-style: received = sent × (1 − lost/packets): 10e6 bit/s / 8 × (1 − 1/39) = 1217948.7 B/s
    doc = json.loads(udp)
    end = doc["end"]
    end.pop("sum_sent"), end.pop("sum_received")
    end["sum"].update(bits_per_second=10e6, lost_packets=1, packets=39, lost_percent=2.564103)
    assert parse_doc(doc)["received_bandwidth"].value == pytest.approx(1217948.7, rel=1e-6)


# --- #12 esnet/iperf#1716, #1223, #1776, #1491 ----------------------------------------------------

def test_the_same_document_twice_is_one_result(udp):
    once = by_metric(iperf3.parse(udp.encode()))
    twice = by_metric(iperf3.parse((udp + udp).encode()))  # 3.17: glued, identical (#1716)
    assert {k: v.value for k, v in twice.items()} == {k: v.value for k, v in once.items()}
    assert by_metric(iperf3.parse((udp + "\n" + udp).encode()))["sent_bandwidth"].value == \
        once["sent_bandwidth"].value


def test_two_different_documents_are_refused(udp, udp_reverse):
    assert "several JSON documents" in refusal(udp + udp_reverse)


def test_a_warning_before_the_json_and_crlf_are_skipped(udp):
    # iperf_api.c (-u -l 2048 over a 1448-byte MSS), #1223; a TTY capture with CRLF and ^C
    text = ("warning: UDP block size 2048 exceeds TCP MSS 1448, may result in fragmentation / "
            "drops\n" + udp).replace("\n", "\r\n")
    m = by_metric(iperf3.parse(text.encode()))
    assert m["sent_bandwidth"].value == json.loads(udp)["end"]["sum_sent"]["bits_per_second"] / 8
    assert by_metric(iperf3.parse(("^C" + udp).encode()))["sent_bandwidth"].value == \
        m["sent_bandwidth"].value


def test_a_truncated_document_is_a_failed_run(udp):
    cut = udp[: len(udp) // 2]
    assert "expected complete JSON" in refusal("warning: JSON data length overflow\n" + cut)


# --- #13 esnet/iperf#167, #545, #1413 -------------------------------------------------------------

def test_an_error_key_fails_even_with_totals(udp):
    doc = json.loads(udp)
    doc["error"] = "unable to receive results: "  # #1776, -P 6 --get-server-output
    assert 'iperf3 reported "iperf3: unable to receive results:"' in refusal(json.dumps(doc))


def test_empty_intervals_or_end_without_error_is_a_failure(udp):
    doc = json.loads(udp)
    doc["intervals"] = []
    assert "non-empty 'intervals'" in refusal(json.dumps(doc, indent=1))
    doc = json.loads(udp)
    doc["end"] = {}  # a killed client: valid JSON, no error key
    assert "no end totals" in refusal(json.dumps(doc, indent=1))


def test_tcp_needs_the_receivers_total(udp):
    # a TCP document with only sum_sent: the sender's count is not the throughput
    doc = json.loads(udp)
    doc["start"]["test_start"]["protocol"] = "TCP"
    doc["end"].pop("sum_received"), doc["end"].pop("sum")
    assert "end.sum_received" in refusal(json.dumps(doc, indent=1))
