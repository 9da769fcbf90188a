"""``manage.py parse_output``: measurements as lines or METRICS.md JSON; exit 2 with one line."""

import io
import json

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.parsers.corpus import CORPUS, needs_corpus

pytestmark = pytest.mark.skipif(not settings.configured, reason="needs Django (pytest-django)")

FIO = {"fio version": "fio-3.33", "jobs": [
    {"jobname": "seqread", "error": 0,
     "read": {"bw_bytes": 11534336000, "iops": 11000.0,
              "clat_ns": {"percentile": {"50.000000": 2000000, "99.000000": 4000000}}},
     "write": {"bw_bytes": 0, "iops": 0}}]}


def run(*args):
    """(exit status, stdout, stderr) of parse_output ARGS."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("parse_output", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def fio_file(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("fio: a warning before the JSON\n" + json.dumps(FIO, indent=2))
    return path


def test_it_prints_one_line_per_measurement(fio_file):
    status, out, err = run("--tool", "fio", str(fio_file))
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == 'read_bandwidth 11534336000.0 B/s {"job": "seqread"}'
    assert 'read_clat_p99 0.004 s {"job": "seqread"}' in lines
    assert 'job_errors 0.0 1 {"job": "seqread"}' in lines
    assert len(lines) == 8  # read/write bandwidth and iops, p50, p99, job_errors, interrupted


def test_it_prints_the_measurements_as_metrics_md_json(fio_file):
    status, out, _ = run("--tool", "fio", str(fio_file), "--json")
    assert status == 0
    assert out.startswith('[{"metric": "read_bandwidth", "value": 11534336000.0, "unit": "B/s", '
                          '"labels": {"job": "seqread"}}, ')
    measurements = json.loads(out)
    assert all(set(m) == {"metric", "value", "unit", "labels"} for m in measurements)
    assert {"metric": "read_clat_p50", "value": 0.002, "unit": "s",
            "labels": {"job": "seqread"}} in measurements


def test_it_exits_2_with_the_parse_error_on_one_line(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(FIO, indent=2)[:200])
    status, out, err = run("--tool", "fio", str(path))
    assert status == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("fio: line ")
    assert "expected complete JSON" in err


@needs_corpus
@pytest.mark.corpus
def test_it_surfaces_the_error_iperf3_reported():
    path = CORPUS / "iperf3" / "iperf-3.7-error-unable-to-connect-connected-empty.json"
    status, _, err = run("--tool", "iperf3", str(path))
    assert status == 2
    assert err == ('iperf3: line 9: expected a completed test; iperf3 reported "iperf3: error - '
                   'unable to connect to server: Connection refused"\n')


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_corpus_smartctl_report_as_json():
    path = CORPUS / "smartctl" / "smartctl-7.0-windows-open-failed-exit2.json"
    status, out, _ = run("--tool", "smartctl", str(path), "--json")
    assert status == 0
    assert json.loads(out) == [{"metric": "exit_status", "value": 2.0, "unit": "1",
                                "labels": {"device": "/dev/sda"}}]


def test_it_exits_2_for_an_unknown_tool(fio_file):
    status, out, err = run("--tool", "iostat", str(fio_file))
    assert status == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: unknown tool 'iostat'; known: ")
    assert "fio" in err and "smartctl" in err


def test_it_exits_2_for_a_missing_file(tmp_path):
    status, out, err = run("--tool", "fio", str(tmp_path / "nope.json"))
    assert status == 2 and out == ""
    assert err == f"error: cannot read {tmp_path / 'nope.json'}: No such file or directory\n"


def test_it_exits_2_for_an_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    status, _, err = run("--tool", "fio", str(path))
    assert status == 2
    assert err == "fio: input: expected output from the tool, found 'an empty capture'\n"
