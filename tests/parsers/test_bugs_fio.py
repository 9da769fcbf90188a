"""BUGS.md #1-#5 (fio): every public report about reading fio's JSON, with inputs of its shape.

Real fio 3.33 runs made here (``--ioengine=null``, no disk needed) where fio can print the shape;
otherwise the shape is built field by field from fio's print code at the named version, with the
derivation of each expected value beside it."""

import json
import shutil
import subprocess

import pytest

from runners.parsers import fio
from runners.parsers.base import ParseError
from tests.parsers.corpus import by_metric

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def real_fio(tmp_path, *options):
    """stdout of a real fio run of the null engine (no I/O to any disk), as fio printed it."""
    completed = subprocess.run(
        ["fio", "--name=nullread", "--ioengine=null", "--size=64M", "--bs=4k", "--rw=read",
         "--output-format=json", *options],
        capture_output=True, cwd=tmp_path, timeout=60, check=True)
    return completed.stdout.decode()


@pytest.fixture(scope="module")
def run_33(tmp_path_factory):
    return real_fio(tmp_path_factory.mktemp("fio"))


# --- #1 axboe/fio#731, #1685: lines before (and after) the JSON -----------------------------------

# backend.c thread_main(), label err: (fio 2.x … 3.36):
#   log_info("fio: pid=%d, err=%d/%s\n", (int) td->pid, td->error, td->verror);
# with td->verror from __td_verror(): "file:%s:%d, func=%s, error=%s" (file, line, func, strerror).
def td_verror_line(pid, err, func="td_io_queue", where="ioengines.c:351",
                   message="Input/output error"):
    return f"fio: pid={pid}, err={err}/file:{where}, func={func}, error={message}\n"


@needs_fio
def test_a_preamble_err_line_fails_the_run_although_the_job_error_is_0(run_33):
    document = json.loads(run_33)
    assert document["jobs"][0]["error"] == 0  # the real run had no error
    m = by_metric(fio.parse((td_verror_line(4896, 5) + run_33).encode()))
    assert m["job_errors"].value == 1  # one failing pid (4896, err=5 = EIO), JSON error 0
    # the figures are still the run's own: bw_bytes and iops of the real document
    assert m["read_bandwidth"].value == document["jobs"][0]["read"]["bw_bytes"]
    assert m["read_iops"].value == document["jobs"][0]["read"]["iops"]


@needs_fio
def test_err_lines_count_failing_jobs_once_each(run_33):
    preamble = (td_verror_line(4896, 5) + td_verror_line(4896, 5)  # the same job twice
                + td_verror_line(4897, 5, "io_u_queued_complete", "io_u.c:2010"))
    m = by_metric(fio.parse((preamble + run_33).encode()))
    assert m["job_errors"].value == 2  # pids 4896 and 4897
    # after the document too (--output-format=json,normal puts text after it)
    m = by_metric(fio.parse((run_33 + td_verror_line(77, 84, message="Invalid exchange")).encode()))
    assert m["job_errors"].value == 1


@needs_fio
def test_the_benign_tausworthe_and_cpu_mask_lines_count_nothing(run_33):
    # redhat-cip/hardware#201 (filesetup.c) and ezfio#38 (Windows os-windows.h), verbatim texts
    preamble = ("fio: file /dev/sda exceeds 32-bit tausworthe random generator.\n"
                "fio: Switching to tausworthe64. Use the random_generator= option to get rid "
                "of this warning.\n"
                "fio: CPU mask cannot bind CPUs 0 and 64 in different processor groups\n")
    m = by_metric(fio.parse((preamble + run_33).encode()))
    assert m["job_errors"].value == 0 and m["run_interrupted"].value == 0


@needs_fio
def test_the_document_starts_at_the_first_line_that_is_a_brace(run_33):
    # a preamble line holding a "{" (a job-file echo) is not taken for the document
    preamble = "fio: bad option value {rate_iops=abc} ignored\n"
    document = json.loads(run_33)
    m = by_metric(fio.parse((preamble + run_33).encode()))
    assert m["read_iops"].value == document["jobs"][0]["read"]["iops"]


@pytest.mark.parametrize(("capture", "found"), [
    (b"", "an empty capture"),
    (b"fio: failed to setup shm segment\n", "failed to setup shm segment"),
])
def test_zero_bytes_or_no_brace_is_a_failure_never_0_iops(capture, found):
    with pytest.raises(ParseError) as error:
        fio.parse(capture)
    assert found in str(error.value)


# --- #2 axboe/fio#511: duplicate "0.00" padding keys, 6-decimal percentile keys -------------------

def test_duplicate_padding_keys_and_float_keys_are_read_numerically():
    # fio-3.1 stat.c show_clat_percentiles JSON: "%f" keys ("99.000000"), and unused slots of
    # the 20-entry list printed as "0.00" : 0, several times (invalid for strict parsers).
    raw = ('{"fio version": "fio-3.1", "jobs": [{"jobname": "randread", "error": 0,\n'
           '"read": {"io_kbytes": 400, "bw": 4000, "iops": 1000.0, "clat_ns": {"percentile": {\n'
           '"1.000000": 48, "50.000000": 2000, "99.000000": 5408, "99.990000": 9000,\n'
           '"0.00": 0, "0.00": 0, "0.00": 0}}}}]}\n')
    m = by_metric(fio.parse(raw.encode()))
    assert m["read_clat_p50"].value == 2000 / 1e9  # clat_ns: ns → s
    assert m["read_clat_p99"].value == 5408 / 1e9  # "99.000000", not "99.990000"
    assert m["read_bandwidth"].value == 4000 * 1024  # fio-3.1 has no bw_bytes: KiB/s × 1024


# --- #3 axboe/fio#378, #422, PR #487: units per version -------------------------------------------

def test_fio_2_18_bw_is_kib_and_clat_is_microseconds():
    # fio-2.18 with bs=4k: total_ios 4392 × 4 KiB = 17568, so io_bytes holds KiB (#378); bw 292
    # KiB/s; 2.x latency block "clat" in µs.
    raw = json.dumps({"fio version": "fio-2.18", "jobs": [{
        "jobname": "qd1", "error": 0,
        "read": {"io_bytes": 17568, "bw": 292, "iops": 73.0, "total_ios": 4392, "runtime": 60000,
                 "clat": {"percentile": {"50.000000": 12000, "99.000000": 25000}}}}]})
    m = by_metric(fio.parse(raw.encode()))
    assert m["read_bandwidth"].value == 292 * 1024  # 299008 B/s; kb_base never applies to JSON
    assert m["read_clat_p50"].value == pytest.approx(0.012)  # 12000 µs
    assert m["read_clat_p99"].value == pytest.approx(0.025)


@needs_fio
def test_fio_3_33_bw_bytes_wins_over_bw(run_33):
    job = json.loads(run_33)["jobs"][0]["read"]
    m = by_metric(fio.parse(run_33.encode()))
    assert m["read_bandwidth"].value == job["bw_bytes"]
    # bw is KiB/s truncated to an integer (stat.c: bw = bw_bytes / 1024): within 1 KiB/s
    assert abs(job["bw"] * 1024 - job["bw_bytes"]) < 1024


# --- #4 axboe/fio#1134: the steadystate block -----------------------------------------------------

@needs_fio
def test_a_real_steadystate_run_is_attained(tmp_path):
    raw = real_fio(tmp_path, "--time_based", "--runtime=3", "--ss=iops:50%", "--ss_dur=1s")
    block = json.loads(raw)["jobs"][0]["steadystate"]
    assert block["ss"] == "iops:50.000000%" and block["attained"] == 1
    m = by_metric(fio.parse(raw.encode()))
    assert m["steadystate_not_attained"].value == 0
    # steadystate.data.bw_mean is B/s (#1134), not read as a bandwidth: read_bandwidth is bw_bytes
    assert m["read_bandwidth"].value == json.loads(raw)["jobs"][0]["read"]["bw_bytes"]


@needs_fio
def test_a_job_that_did_not_attain_steady_state_is_counted(tmp_path):
    raw = real_fio(tmp_path, "--time_based", "--runtime=3", "--ss=iops:50%", "--ss_dur=1s")
    document = json.loads(raw)
    # stat.c prints "attained" : 0 when the criterion was not met within ss_dur (the run then
    # lasts its whole runtime); the real document with that one field changed:
    document["jobs"][0]["steadystate"]["attained"] = 0
    m = by_metric(fio.parse(json.dumps(document, indent=2).encode()))
    assert m["steadystate_not_attained"].value == 1


@needs_fio
def test_no_steadystate_figure_without_ss(run_33):
    assert "steadystate_not_attained" not in by_metric(fio.parse(run_33.encode()))


# --- #5 axboe/fio#448: per-log-sample min/max/mean are not run figures ----------------------------

def test_per_sample_iops_statistics_are_not_read():
    # write_iops_log without log_avg_msec: every I/O is one sample (iops_min = iops_max = 1)
    raw = json.dumps({"fio version": "fio-3.1", "jobs": [{
        "jobname": "w", "error": 0,
        "write": {"bw_bytes": 13113999, "bw": 12806, "iops": 3201.66, "iops_min": 1,
                  "iops_max": 1, "iops_mean": 1.0, "iops_samples": 32030, "bw_agg": 14.013106,
                  "bw_min": 4, "bw_mean": 4.0}}]})
    m = by_metric(fio.parse(raw.encode()))
    assert m["write_iops"].value == 3201.66  # top-level iops, not iops_mean 1
    assert m["write_bandwidth"].value == 13113999  # bw_bytes, not bw_agg (a percent share)


# --- impossible figures ---------------------------------------------------------------------------

def test_a_negative_bandwidth_is_refused_naming_it():
    raw = json.dumps({"jobs": [{"jobname": "x", "error": 0,
                                "read": {"bw_bytes": -5, "iops": 1.0}}]}, indent=1)
    with pytest.raises(ParseError) as error:
        fio.parse(raw.encode())
    assert "read_bandwidth cannot be negative" in str(error.value)
    assert "bw = -5" in str(error.value)
