"""Every parser, fed damaged captures, either returns measurements or raises ParseError.

For each registered parser, every corpus sample of its tool (plus a small hand-made sample, and
real fio json+ / iperf3 -J output produced here when the tools are installed) is truncated at
random points, has bytes flipped, inserted (also tokens that upset JSON readers: ``-nan``, deep
nesting, 5000-digit numbers, a BOM, a second document) and deleted; JSON samples also get values
replaced by JSON of another type (objects for numbers, 1e308, "inf"…), and every sample is cut
at every 97th byte. The parser must return a list of MeasurementData whose values are finite,
units in base.UNITS and labels str → str, or raise ParseError; any other exception is a crash.

Bounded for CI: 50 examples per parser, derandomized, no example database. Explore more with
``PARSER_FUZZ_EXAMPLES=5000 PARSER_FUZZ_RANDOM=1 .venv/bin/pytest tests/parsers/test_fuzz.py``.
"""

import copy
import json
import math
import os
import shutil
import socket
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runners.parsers import PARSERS
from runners.parsers.base import UNITS, MeasurementData, ParseError
from tests.parsers.corpus import CORPUS

# parser → corpus files of its tool (read in place, never copied)
CORPUS_FILES = {
    "fio": ("fio/*",),
    "nvme_list": ("nvme/*",),
    "nvme_smart_log": ("nvme/*",),
    "nvme_self_test_log": ("nvme/*",),
    "smartctl": ("smartctl/*",),
    "iperf3": ("iperf3/*",),
    "vllm_bench": ("vllm/*",),
    "ethtool": ("misc/ethtool-*",),
    "bom_checklist": (),
}

# one small valid capture per parser, so the test means something without the corpus
HAND_MADE = {
    "fio": {"fio version": "fio-3.33", "jobs": [
        {"jobname": "seqread", "error": 0,
         "read": {"bw_bytes": 1000, "iops": 1.5,
                  "clat_ns": {"percentile": {"50.000000": 100, "99.000000": 900},
                              "bins": {"100": 60, "900": 40}}},
         "write": {"bw": 0, "iops": 0}},
        {"jobname": "seqread", "error": 0,
         "read": {"bw_bytes": 1000, "iops": 1.5,
                  "clat_ns": {"percentile": {"50.000000": 200, "99.000000": 300},
                              "bins": {"200": 90, "300": 10}}}}]},
    "nvme_list": {"Devices": [{"DevicePath": "/dev/nvme0n1", "NameSpace": 1,
                               "SerialNumber": "S1", "ModelNumber": "M"}]},
    "nvme_smart_log": {"critical_warning": {"value": 0}, "temperature": 310,
                       "percent_used": 2, "media_errors": 0},
    "nvme_self_test_log": {"Current Device Self-Test Operation": 0,
                           "Current Device Self-Test Completion": 0,
                           "List of Valid Reports": [{"Self test result": 15},
                                                     {"Self test result": 7}]},
    "smartctl": {"json_format_version": [1, 0], "smartctl": {"exit_status": 4},
                 "device": {"name": "/dev/sda", "protocol": "ATA"}, "serial_number": "S",
                 "smart_status": {"passed": True}, "temperature": {"current": 30},
                 "ata_smart_self_test_log": {"standard": {"table": [
                     {"status": {"value": 249}}, {"status": {"value": 121, "passed": False}}]}},
                 "scsi_self_test_0": {"result": {"value": 3}}},
    "iperf3": {"start": {"test_start": {"protocol": "UDP", "num_streams": 2}},
               "end": {"sum": {"bits_per_second": 8e6, "lost_packets": 1, "packets": 4}}},
    "vllm_bench": {"completed": 10, "num_prompts": 12, "max_concurrency": 4,
                   "median_ttft_ms": 120.0, "p99_itl_ms": 30.0, "request_rate": "inf"},
    "ethtool": "Settings for eth0:\n\tSpeed: 100000Mb/s\n\tLink detected: yes\n",
    "bom_checklist": {"engagement": "e", "items": [
        {"position": 1, "description": "array", "quantity": 1, "ticked_by": "a",
         "ticked_at": "2026-01-01T00:00:00Z"},
        {"position": 2, "description": "cables", "quantity": 8}]},
    "nic_counters": (
        "sample=t0 time=1764500000.123456789 device=mlx5_0 port=1 counter=port_rcv_data "
        "value=123\n"
        "sample=t1 time=1764500060.456789012 device=mlx5_0 port=1 counter=port_rcv_data "
        "value=4560000\n"),
    "vllm_metrics": (
        "# acceptance-scrape: name=t0 time=1764500000.1 url=http://127.0.0.1:8000/metrics\n"
        "# TYPE vllm:prefix_cache_hits counter\n"
        'vllm:prefix_cache_hits_total{engine="0"} 10\n'
        "lmcache:num_remote_read_bytes 1000\n"
        "# acceptance-scrape: name=t1 time=1764500060.1 url=http://127.0.0.1:8000/metrics\n"
        'vllm:prefix_cache_hits_total{engine="0"} 250\n'
        "lmcache:num_remote_read_bytes 5000\n"),
}
# parsers registered later without a sample here are still fuzzed, from these seeds
GENERIC = [b'{"a": 1, "b": [1.5, "x"]}\n', b"key: value\nname=value other=2\n"]

TOKENS = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"\n", b"\r\n", b"\\", b"-nan", b"nan",
          b"inf", b"-inf", b"NaN", b"Infinity", b"1e999", b"-1", b"0x1f", b"null", b"true",
          b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"\n{}\n", b'\n{"a": 1}\n', b"[" * 3000,
          b"9" * 5000, b'"9' + b"9" * 4999 + b'"', b"fio: terminating on signal 2\n",
          b'"error": "boom",', b"Speed: 10Mb/s\n", b"Speed: " + b"9" * 5000 + b"Mb/s\n"]


def corpus_samples(tool):
    files = sorted(path for pattern in CORPUS_FILES.get(tool, ())
                   for path in CORPUS.glob(pattern))
    return [path.read_bytes() for path in files if path.is_file()]


def hand_made(tool):
    if tool not in HAND_MADE:
        return None
    sample = HAND_MADE[tool]
    return (sample if isinstance(sample, str) else json.dumps(sample, indent=2)).encode()


def real_fio(directory):
    if shutil.which("fio") is None:
        return []
    done = subprocess.run(
        ["fio", "--name=fuzz", f"--filename={directory / 'scratch.bin'}", "--rw=randrw",
         "--bs=4k", "--size=2M", "--ioengine=psync", "--numjobs=2",
         "--output-format=json+"], capture_output=True, cwd=directory, timeout=60)
    return [done.stdout] if done.returncode == 0 else []


def real_iperf3():
    if shutil.which("iperf3") is None:
        return []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # retried until the server listens (iperf 3.12 exits 0 regardless)
            done = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-n", "4M",
                                   "-J"], capture_output=True, timeout=30)
            if b"Connection refused" not in done.stdout:
                return [done.stdout]
            time.sleep(0.1)
        return []
    finally:
        server.kill()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    produced = {"fio": real_fio(tmp_path_factory.mktemp("fio")), "iperf3": real_iperf3()}
    return {tool: [*([hand_made(tool)] if tool in HAND_MADE else GENERIC),
                   *corpus_samples(tool), *produced.get(tool, [])]
            for tool in PARSERS}


# JSON values to put where the tools print something else (type confusion, overflow, "inf")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from([1e308, -1e308, 2**70, 10**30, "inf", "-nan", "0x1f", "", "37 C"]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)


def documents_of(originals):
    """The JSON documents among the samples (the first one of each), for structural mutation."""
    found = []
    for raw in originals:
        text = raw.decode("utf-8", "replace").lstrip("\ufeff")
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
        try:
            document, _ = json.JSONDecoder().raw_decode(text, start) if start >= 0 else (None, 0)
        except ValueError:
            continue
        if isinstance(document, dict | list):
            found.append(document)
    return found


def slots(node):
    """Every (container, key) of a JSON document, depth first."""
    pairs = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in list(pairs):
        yield node, key
        if isinstance(value, dict | list):
            yield from slots(value)


@st.composite
def retyped(draw, documents):
    """A sample document with one to three values replaced by arbitrary JSON values."""
    document = copy.deepcopy(draw(st.sampled_from(documents)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        places = list(slots(document))
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        container[key] = draw(JSON_VALUES)
    return json.dumps(document, indent=1).encode()


@st.composite
def damaged(draw, originals):
    data = bytearray(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
        size = len(data)
        if kind == "truncate":
            del data[draw(st.integers(min_value=0, max_value=size)):]
        elif kind == "flip" and size:
            data[draw(st.integers(min_value=0, max_value=size - 1))] ^= draw(
                st.integers(min_value=1, max_value=255))
        elif kind == "insert":
            at = draw(st.integers(min_value=0, max_value=size))
            data[at:at] = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=8))
        elif kind == "delete" and size:
            at = draw(st.integers(min_value=0, max_value=size - 1))
            del data[at:at + draw(st.integers(min_value=1, max_value=64))]
    return bytes(data)


FUZZ = settings(
    max_examples=int(os.environ.get("PARSER_FUZZ_EXAMPLES", "50")),
    deadline=None,
    derandomize=not os.environ.get("PARSER_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(tool, raw):
    try:
        measurements = PARSERS[tool].parse(raw)
    except ParseError:
        return
    assert isinstance(measurements, list)
    for m in measurements:
        assert isinstance(m, MeasurementData)
        assert isinstance(m.value, float | int) and math.isfinite(m.value), m
        assert m.unit in UNITS, m
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in m.labels.items()), m


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_it_parses_or_refuses_every_damaged_capture(tool, samples):
    originals = samples[tool]

    @FUZZ
    @given(raw=damaged(originals))
    def run(raw):
        check(tool, raw)

    run()


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_it_parses_or_refuses_json_with_values_of_the_wrong_type(tool, samples):
    documents = documents_of(samples[tool])
    if not documents:
        pytest.skip(f"no JSON sample for {tool}")

    @FUZZ
    @given(raw=retyped(documents))
    def run(raw):
        check(tool, raw)

    run()


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_it_parses_or_refuses_every_prefix_of_its_samples(tool, samples):
    """Truncation at every 97th byte of every sample (systematic, next to the random cuts)."""
    for original in samples[tool]:
        for cut in range(0, len(original), 97):
            check(tool, original[:cut])


@pytest.mark.parametrize("tool", sorted(HAND_MADE))
def test_the_hand_made_sample_parses(tool):
    assert PARSERS[tool].parse(hand_made(tool))


# What the fuzzing found (each crashed with another exception before it was fixed).
FOUND = [
    ("nvme_list", b'{"Devices": [{"NameSpace": ' + b"9" * 5000 + b"}]}"),  # json ValueError
    ("fio", b'{"jobs": ' + b"[" * 100_000),  # RecursionError in the JSON decoder
    ("vllm_bench", b'{"completed": ' + b"[" * 100_000),
    ("vllm_bench", b'{"completed": ' + b"9" * 5000 + b"}"),
    ("vllm_bench", b"\xef\xbb\xbf"),  # only a BOM: IndexError
    ("vllm_bench", b"\x1c\n"),  # only Unicode whitespace: IndexError
    ("vllm_bench", b'{"completed": 1e308, "num_prompts": -1e308}'),  # failed = -inf
    ("ethtool", b"9" * 5000),  # int() past 4300 digits
    ("ethtool", b"Settings for eth0:\n\tSpeed: " + b"9" * 5000 + b"Mb/s\n"),
    ("bom_checklist", b'{"items": [1, "x"]}'),  # AttributeError
    ("nvme_list", b'{"Devices": [{"Subsystems": [{"Controllers": 5}]}]}'),  # TypeError
    ("nvme_list", b'{"Devices": [{"Subsystems": [{"Namespaces": [{"Paths": 7}]}]}]}'),
    ("fio", b'{"jobs": [{"read": {"bw_bytes": 1e308, "iops": 1}},'
            b' {"read": {"bw_bytes": 1e308, "iops": 1}}]}'),  # sum overflows to inf
]


@pytest.mark.parametrize(("tool", "raw"), FOUND, ids=[f"{tool}-{i}" for i, (tool, _) in
                                                      enumerate(FOUND)])
def test_it_refuses_what_the_fuzzing_found(tool, raw):
    with pytest.raises(ParseError):
        PARSERS[tool].parse(raw)
