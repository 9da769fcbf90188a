"""iperf3 parser: every corpus sample (expected values read off each file by hand), the quirks of
``-J`` output (errors, ``^C``, ``-nan``, truncation) and one run of the real iperf3."""

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from runners.parsers import PARSERS, iperf3
from runners.parsers.base import ParseError, null_bare_nonfinite
from tests.parsers.corpus import CORPUS, by_metric, needs_corpus

IPERF3 = CORPUS / "iperf3"
FRAGMENT = IPERF3 / "iperf-3.0.11-udp-interval-FRAGMENT-lost_percent-minus-nan-from-issue-364.txt"


def parse_file(name):
    return by_metric(iperf3.parse((IPERF3 / name).read_bytes()))


def refusal(name):
    with pytest.raises(ParseError) as error:
        iperf3.parse((IPERF3 / name).read_bytes())
    return error.value


def total(bits_per_second, **extra):
    return {"start": 0, "end": 10.0, "seconds": 10.0, "bytes": 1, "bits_per_second":
            bits_per_second, **extra}


def tcp(streams=1, sent=None, received=None, **end):
    return {
        "start": {"connected": [], "version": "iperf 3.12",
                  "test_start": {"protocol": "TCP", "num_streams": streams, "blksize": 131072,
                                 "omit": 0, "duration": 10}},
        # iperf3 prints one interval per second; their figures are not read (end totals are)
        "intervals": [{"streams": [], "sum": total(8e9, sender=True)}],
        "end": {"streams": [],
                "sum_sent": sent or total(8e9, retransmits=3, sender=True),
                "sum_received": received or total(7.2e9, sender=True), **end},
    }


def parse(doc, prefix="", suffix=""):
    return by_metric(iperf3.parse((prefix + json.dumps(doc, indent=2) + suffix).encode()))


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize(("name", "sent_bps", "received_bps", "retransmits"), [
    # end.sum_sent / end.sum_received, lines 402-418 of each file
    ("iperf-3.9-tcp-1stream-omit3-crlf.json", 87031381.5462304, 87236180.395996377, 5),
    ("iperf-3.9-tcp-1stream-omit3-lf.json", 152045025.24574995, 150318320.60751131, 0),
])
def test_it_reads_the_end_totals_of_a_tcp_run(name, sent_bps, received_bps, retransmits):
    m = parse_file(name)
    assert m["sent_bandwidth"].value == pytest.approx(sent_bps / 8)
    assert m["sent_bandwidth"].unit == "B/s"
    assert m["received_bandwidth"].value == pytest.approx(received_bps / 8)
    assert m["retransmits"].value == retransmits
    assert m["retransmits"].unit == "1"
    assert m["retransmits"].labels == {"protocol": "tcp", "streams": "1"}
    assert set(m) == {"sent_bandwidth", "received_bandwidth", "retransmits"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_the_single_sum_of_an_old_udp_run():
    m = parse_file("iperf-3.9-udp-localhost-reformatted.json")
    # end.sum: bits_per_second 1048569.7085817485, lost_packets 0 of 40 packets
    assert m["sent_bandwidth"].value == pytest.approx(1048569.7085817485 / 8)
    assert m["received_bandwidth"].value == pytest.approx(1048569.7085817485 / 8)
    assert "retransmits" not in m
    assert m["sent_bandwidth"].labels == {"protocol": "udp", "streams": "1"}


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize(("name", "line", "message"), [
    ("iperf-3.6-error-control-socket-closed.json", 29,
     "iperf3: error - control socket has closed unexpectedly"),
    ("iperf-3.7-error-test-authorization-failed.json", 19,
     "iperf3: error - test authorization failed"),
    ("iperf-3.7-error-unable-to-connect-connected-empty.json", 9,
     "iperf3: error - unable to connect to server: Connection refused"),
    # ^C glued before "{", CRLF; its end looks complete but sum_received is 0
    ("iperf-3.6-tcp-bytes-mode-interrupted-caret-C-prefix-crlf.json", 351,
     "iperf3: interrupt - the client has terminated"),
])
def test_it_surfaces_the_error_iperf3_reported(name, line, message):
    error = refusal(name)
    assert error.line == line
    assert message in str(error)


@needs_corpus
@pytest.mark.corpus
def test_it_refuses_an_empty_end_without_error():
    error = refusal("iperf-3.9-empty-end-NO-error-key.json")
    assert error.line == 27  # "end": {
    assert "no end totals" in str(error)


@needs_corpus
@pytest.mark.corpus
def test_it_names_the_line_where_the_truncated_capture_stops():
    error = refusal("iperf-3.9-truncated-json-bytes-mode-10k.json")
    assert error.line == 71  # the file is cut after "seconds": 0.323972, on line 70 + a tab
    assert "complete JSON" in str(error)


@needs_corpus
@pytest.mark.corpus
def test_it_refuses_the_text_report_of_a_run_without_json():
    error = refusal("iperf-3.x-text-output-not-json-omitted-intervals.txt")
    assert error.line == 1
    assert "iperf3 -J" in str(error)
    assert "Connecting to host 34.142.73.160, port 5200" in str(error)


@needs_corpus
@pytest.mark.corpus
def test_it_maps_the_bare_minus_nan_of_the_fragment_to_null():
    text = FRAGMENT.read_text()
    mapped = null_bare_nonfinite(text)
    assert "-nan" not in mapped
    assert mapped.count("\n") == text.count("\n")  # line numbers unchanged
    interval = json.loads("{" + mapped + "}")  # the fragment is the inside of one interval
    assert interval["sum"]["lost_percent"] is None
    assert interval["streams"][0]["lost_percent"] is None
    assert interval["sum"]["jitter_ms"] == 0.452296


@needs_corpus
@pytest.mark.corpus
def test_it_parses_a_document_holding_the_fragment_and_a_nan_total():
    doc = tcp()
    doc["start"]["test_start"]["protocol"] = "UDP"
    head = json.dumps({"start": doc["start"]})[:-1]
    end = ('"end": {"sum": {"start": 0, "end": 10, "seconds": 10, "bytes": 1310720, '
           '"bits_per_second": 1048576, "jitter_ms": 0.4, "lost_packets": 0, "packets": 40, '
           '"lost_percent": -nan}}')
    text = head + ', "intervals": [{' + FRAGMENT.read_text() + "}], " + end + "}"
    m = by_metric(iperf3.parse(text.encode()))
    assert m["sent_bandwidth"].value == 1048576 / 8
    assert m["received_bandwidth"].value == 1048576 / 8
    assert m["sent_bandwidth"].labels == {"protocol": "udp", "streams": "1"}


@needs_corpus
@pytest.mark.corpus
def test_every_iperf3_sample_has_a_test_here():
    source = Path(__file__).read_text()
    missing = [p.name for p in IPERF3.iterdir()
               if p.name not in source and p.name != FRAGMENT.name]
    assert missing == []
    assert "FRAGMENT" in source


# --- quirks -------------------------------------------------------------------------------------


def test_it_is_registered():
    assert PARSERS["iperf3"] is iperf3
    assert iperf3.TOOL == "iperf3" and iperf3.PARSER_VERSION == "2"


def test_it_converts_bits_to_bytes_and_labels_the_streams():
    m = parse(tcp(streams=4))
    assert m["sent_bandwidth"].value == 1e9
    assert m["received_bandwidth"].value == 0.9e9
    assert m["retransmits"].value == 3
    assert m["received_bandwidth"].labels == {"protocol": "tcp", "streams": "4"}


def test_it_omits_retransmits_the_os_did_not_report():
    m = parse(tcp(sent=total(8e9, sender=True)))
    assert "retransmits" not in m


def test_it_reads_sum_sent_and_sum_received_of_newer_udp_runs():
    doc = tcp()
    doc["start"]["test_start"]["protocol"] = "UDP"
    doc["end"] = {"sum": total(1e6, jitter_ms=0.1, lost_packets=0, packets=4),
                  "sum_sent": total(8e6, jitter_ms=0, lost_packets=0, packets=4),
                  "sum_received": total(4e6, jitter_ms=0.1, lost_packets=2, packets=4)}
    m = parse(doc)
    assert {k: x.value for k, x in m.items()} == {"sent_bandwidth": 1e6,
                                                   "received_bandwidth": 0.5e6}
    assert m["sent_bandwidth"].labels["protocol"] == "udp"


def test_it_discounts_lost_datagrams_of_an_old_udp_sum():
    doc = tcp()
    del doc["start"]["test_start"]  # protocol inferred from the UDP-shaped total
    doc["end"] = {"streams": [{"udp": {"bits_per_second": 8e6}}],
                  "sum": total(8e6, jitter_ms=0.1, lost_packets=10, packets=40)}
    m = parse(doc)
    assert m["sent_bandwidth"].value == 1e6
    assert m["received_bandwidth"].value == pytest.approx(0.75e6)
    assert m["sent_bandwidth"].labels == {"protocol": "udp", "streams": "1"}


def test_it_skips_warnings_before_and_text_after_the_json():
    m = parse(tcp(), prefix="iperf3: warning: something\n^C", suffix="\niperf Done.\n")
    assert m["sent_bandwidth"].value == 1e9


def test_it_refuses_a_second_document():
    text = json.dumps(tcp(), indent=2)
    other = json.dumps(tcp(received=total(7.1e9, sender=True)), indent=2)
    with pytest.raises(ParseError) as error:
        iperf3.parse((text + "\n" + other).encode())
    assert "several JSON documents" in str(error.value)
    # the *same* document twice is one result (esnet/iperf#1716; test_bugs_iperf3)
    assert by_metric(iperf3.parse((text + "\n" + text).encode()))["received_bandwidth"].value \
        == 7.2e9 / 8


@pytest.mark.parametrize("capture", [b"", b"\r\n"])
def test_it_refuses_empty_output(capture):
    with pytest.raises(ParseError) as error:
        iperf3.parse(capture)
    assert error.value.line == 0


def test_it_refuses_a_total_that_is_not_a_number():
    text = json.dumps(tcp(), indent=2).replace('"bits_per_second": 8000000000.0',
                                               '"bits_per_second": -nan')
    with pytest.raises(ParseError) as error:
        iperf3.parse(text.encode())
    assert "bits_per_second" in str(error.value)


def test_it_keeps_the_whole_error_text():
    doc = tcp()
    doc["error"] = ("error - unable to connect to server - server may have stopped running or "
                    "use a different port, firewall issue, etc.: Connection refused")
    with pytest.raises(ParseError) as error:
        parse(doc)
    assert "firewall issue, etc.: Connection refused" in str(error.value)


# --- the real binary ----------------------------------------------------------------------------


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_client(port):
    """``iperf3 -c`` against the server just started, retried while it is not listening yet
    (its stdout is block-buffered in a pipe, so "Server listening" cannot be waited for).
    iperf 3.12 exits 0 even when it could not connect: only the JSON ``error`` tells."""
    argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "1", "-J"]
    for _ in range(50):
        client = subprocess.run(argv, capture_output=True, timeout=60)
        if b"Connection refused" not in client.stdout:
            return client
        time.sleep(0.1)
    return client


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")
def test_it_matches_what_the_real_iperf3_reports():
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = run_client(port)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert client.returncode == 0, client.stdout[-400:]
    doc = json.loads(client.stdout)
    m = by_metric(iperf3.parse(client.stdout))
    assert m["received_bandwidth"].value == doc["end"]["sum_received"]["bits_per_second"] / 8
    assert m["sent_bandwidth"].value == doc["end"]["sum_sent"]["bits_per_second"] / 8
    assert m["received_bandwidth"].value > 0
    assert m["retransmits"].value == doc["end"]["sum_sent"]["retransmits"]
    assert m["sent_bandwidth"].labels == {"protocol": "tcp", "streams": "1"}
