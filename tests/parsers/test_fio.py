"""fio parser: real third-party outputs (expected values read off each file by hand), the quirks
of RUNBOOK §3.2/§6, and one run of the real fio binary."""

import json
import shutil
import subprocess

import pytest

from runners.parsers import fio
from runners.parsers.base import ParseError
from tests.parsers.corpus import CORPUS, by_metric, needs_corpus

FIO = CORPUS / "fio"


def parse_file(name):
    return by_metric(fio.parse((FIO / name).read_bytes()))


def section(*, bw_bytes=None, bw=None, iops=0.0, percentile=None, bins=None, usec=False):
    data = {"io_bytes": 0, "iops": iops, "runtime": 1000}
    if bw_bytes is not None:
        data["bw_bytes"] = bw_bytes
    if bw is not None:
        data["bw"] = bw
    clat = {"min": 0, "max": 0, "mean": 0.0, "N": 0}
    if percentile is not None:
        clat["percentile"] = percentile
    if bins is not None:
        clat["bins"] = bins
    data["clat" if usec else "clat_ns"] = clat
    return data


def document(*jobs):
    return {"fio version": "fio-3.33", "jobs": list(jobs)}


def job(name="seqread", *, error=0, read=None, write=None):
    return {"jobname": name, "groupid": 0, "error": error,
            "read": read or section(bw_bytes=0, bw=0), "write": write or section(bw_bytes=0, bw=0)}


def raw(doc, prefix=""):
    return (prefix + json.dumps(doc, indent=2)).encode()


# --- corpus -------------------------------------------------------------------------------------


@needs_corpus
@pytest.mark.corpus
def test_it_sums_five_fio_2_1_4_jobs_in_kib_and_microseconds():
    m = parse_file("fio-2.1.4-4jobs-seq-rand-read-write-usec-clat.json")
    # read: sequential_read 129836 KiB/s + random_read_test 1269 + random_read_test_parallel 1292
    assert m["read_bandwidth"].value == pytest.approx((129836 + 1269 + 1292) * 1024)
    assert m["read_bandwidth"].unit == "B/s"
    assert m["read_iops"].value == pytest.approx(253 + 317 + 323)
    assert m["write_bandwidth"].value == pytest.approx((68118 + 6443) * 1024)
    assert m["write_iops"].value == pytest.approx(133 + 1610)
    # no bins: the largest per-job percentile (usec) is the upper bound reported
    assert m["read_clat_p50"].value == pytest.approx(264192e-6)  # vs 3280, 199680
    assert m["read_clat_p99"].value == pytest.approx(473088e-6)  # vs 3728, 209920
    assert m["write_clat_p99"].value == pytest.approx(823296e-6)  # vs 1688
    assert m["read_clat_p50"].unit == "s"
    assert m["job_errors"].value == 0
    assert m["read_bandwidth"].labels == {"job": "all"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_fio_2_17_group_reporting_with_duplicate_keys():
    m = parse_file("fio-2.17-randread-16k-numjobs2-group-hist-dup-filename.json")
    assert m["read_bandwidth"].value == pytest.approx(129386 * 1024)
    assert m["read_iops"].value == pytest.approx(8086.673998)
    assert m["write_bandwidth"].value == pytest.approx(39312 * 1024)
    assert m["write_iops"].value == pytest.approx(2457.017193)
    assert m["read_clat_p50"].value == pytest.approx(96e-6)
    assert m["read_clat_p99"].value == pytest.approx(1352e-6)
    assert m["write_clat_p99"].value == pytest.approx(2384e-6)
    assert m["job_errors"].value == 0
    assert m["write_iops"].labels == {"job": "all"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_fio_2_18_bw_in_kib_and_omits_zero_write_latency():
    m = parse_file("fio-2.18-59-g618e-randread-qd1-usec-iobytes-kib.json")
    assert m["read_bandwidth"].value == pytest.approx(292 * 1024)
    assert m["read_iops"].value == pytest.approx(73.184143)
    assert m["read_clat_p50"].value == pytest.approx(13504e-6)
    assert m["read_clat_p99"].value == pytest.approx(22912e-6)
    assert m["write_bandwidth"].value == 0
    assert m["write_iops"].value == 0
    assert "write_clat_p99" not in m  # all-zero percentile block
    assert m["read_bandwidth"].labels == {"job": "random-io"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_fio_3_1_randrw_without_bw_bytes():
    m = parse_file("fio-3.1-randrw-md0-group_reporting.json")
    assert m["read_bandwidth"].value == pytest.approx(25454 * 1024)
    assert m["read_iops"].value == pytest.approx(6363.743938)
    assert m["write_bandwidth"].value == pytest.approx(25400 * 1024)
    assert m["write_iops"].value == pytest.approx(6350.244163)
    assert m["read_clat_p50"].value == pytest.approx(48384e-9)
    assert m["read_clat_p99"].value == pytest.approx(218112e-9)
    assert m["write_clat_p99"].value == pytest.approx(171008e-9)
    assert m["job_errors"].labels == {"job": "iotest"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_past_warning_lines_and_counts_the_failed_job():
    m = parse_file("fio-3.13-windowsaio-read-verify-error42-with-fio-warning-lines.txt")
    assert m["job_errors"].value == 1  # "error" : 42
    assert m["read_bandwidth"].value == pytest.approx(202249835)
    assert m["read_iops"].value == pytest.approx(49501.318267)
    assert m["read_clat_p50"].value == pytest.approx(6258688e-9)
    assert m["read_clat_p99"].value == pytest.approx(10420224e-9)
    assert m["write_bandwidth"].value == 0
    assert "write_clat_p99" not in m
    assert m["run_interrupted"].value == 0


@needs_corpus
@pytest.mark.corpus
def test_it_never_reports_zero_latency_under_gtod_reduce():
    m = parse_file("fio-3.20-randread-gtod_reduce-zero-latency.json")
    assert m["read_bandwidth"].value == pytest.approx(4039322)
    assert m["read_iops"].value == pytest.approx(982.050780)
    assert m["write_bandwidth"].value == pytest.approx(1616406)
    assert m["write_iops"].value == pytest.approx(390.525218)
    assert not {"read_clat_p50", "read_clat_p99", "write_clat_p99"} & set(m)
    assert m["read_bandwidth"].labels == {"job": "all"}  # read_iops + write_iops jobs


@needs_corpus
@pytest.mark.corpus
def test_it_reads_fio_3_26_mixed_readwrite_with_duplicate_filename_keys():
    m = parse_file("fio-3.26-19-ge7e53-readwrite-70-30-dup-filename-keys.json")
    assert m["read_bandwidth"].value == pytest.approx(149343283)
    assert m["read_iops"].value == pytest.approx(569.699415)
    assert m["write_bandwidth"].value == pytest.approx(67267937)
    assert m["write_iops"].value == pytest.approx(256.606819)
    assert m["read_clat_p50"].value == pytest.approx(99090432e-9)
    assert m["read_clat_p99"].value == pytest.approx(104333312e-9)
    assert m["write_clat_p99"].value == pytest.approx(151864912e-9)
    assert m["read_bandwidth"].labels == {"job": "disk_fill"}


@needs_corpus
@pytest.mark.corpus
def test_it_reads_a_windows_randwrite_run():
    m = parse_file("fio-3.26-windowsaio-randwrite.json")
    assert m["write_bandwidth"].value == pytest.approx(8876980)
    assert m["write_iops"].value == pytest.approx(2167.231601)
    assert m["write_clat_p99"].value == pytest.approx(264192e-9)
    assert m["read_bandwidth"].value == 0
    assert "read_clat_p50" not in m and "read_clat_p99" not in m
    assert m["write_bandwidth"].labels == {"job": "fio_randwrite_1GB_4k_d1_th1_direct"}


@needs_corpus
@pytest.mark.corpus
def test_it_interprets_a_config_error_run_instead_of_raising():
    m = parse_file("fio-3.33-config-error22-eta-intmax-prefix-lines.json")
    assert m["job_errors"].value == 1  # "error" : 22
    assert m["read_bandwidth"].value == 0
    assert m["write_bandwidth"].value == 0
    assert not {"read_clat_p50", "read_clat_p99", "write_clat_p99"} & set(m)
    assert m["job_errors"].labels == {"job": "1m"}


@needs_corpus
@pytest.mark.corpus
def test_it_flags_a_run_terminated_by_a_signal():
    m = parse_file("fio-3.34-macos-randread-interrupted-signal2-prefix.json")
    assert m["run_interrupted"].value == 1
    assert m["job_errors"].value == 0
    assert m["read_bandwidth"].value == pytest.approx(41380254)
    assert m["read_iops"].value == pytest.approx(10102.601156)
    assert m["read_clat_p50"].value == pytest.approx(100864e-9)
    assert m["read_clat_p99"].value == pytest.approx(175104e-9)


@needs_corpus
@pytest.mark.corpus
def test_it_reads_an_rbd_run_with_flag_options_as_empty_strings():
    m = parse_file("fio-3.39-30-g58818-rbd-randread-1280k-disk_util-aggr.json")
    assert m["read_bandwidth"].value == pytest.approx(520032670)
    assert m["read_iops"].value == pytest.approx(396.753442)
    assert m["read_clat_p50"].value == pytest.approx(2670592e-9)
    assert m["read_clat_p99"].value == pytest.approx(4620288e-9)
    assert m["read_bandwidth"].labels == {"job": "cbt-fio-1280krandomread-o01-file-0"}


@needs_corpus
@pytest.mark.corpus
def test_it_sums_numjobs_without_group_reporting():
    m = parse_file("fio-3.6-31-g4386-randread-numjobs4-no-group-reporting.json")
    assert m["read_bandwidth"].value == pytest.approx(84292 + 84353 + 85324 + 82026)
    assert m["read_iops"].value == pytest.approx(20.579217 + 20.594165 + 20.831250 + 20.025990)
    # no bins: largest of the four per-job percentiles
    assert m["read_clat_p50"].value == pytest.approx(40632320e-9)  # 39059456 ×2, 38535168
    assert m["read_clat_p99"].value == pytest.approx(164626432e-9)  # 147849216, 149946368, ...
    assert m["read_bandwidth"].labels == {"job": "random-io"}  # four entries, one name


@needs_corpus
@pytest.mark.corpus
def test_it_rejects_an_empty_capture():
    with pytest.raises(ParseError) as error:
        fio.parse((FIO / "fio-3.33-empty-output-0-bytes.json").read_bytes())
    assert error.value.line == 0


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize(("name", "surfaced"), [
    ("fio-shm-setup-failure-no-json.json", "failed to setup shm segment"),
    ("fio-macos-engine-libaio-not-loadable-no-json.json", "engine libaio not loadable"),
    ("fio-err84-io_u_queued_complete-stderr-lines.txt", "err=84"),
])
def test_it_surfaces_fio_error_text_when_there_is_no_json(name, surfaced):
    with pytest.raises(ParseError) as error:
        fio.parse((FIO / name).read_bytes())
    assert error.value.line == 1
    assert surfaced in str(error.value)


@needs_corpus
@pytest.mark.corpus
def test_it_rejects_normal_format_with_a_bom_naming_the_verify_error():
    with pytest.raises(ParseError) as error:
        fio.parse((FIO / "fio-3.26-19-ge7e53-verify-bad-header-normal-output-with-BOM.txt")
                  .read_bytes())
    assert error.value.line == 6  # the first "verify: bad header" line
    assert "verify: bad header" in str(error.value)


# --- quirks -------------------------------------------------------------------------------------


def test_it_skips_warning_lines_before_the_json():
    doc = document(job(read=section(bw_bytes=1000, iops=10)))
    prefix = "fio: io_u error on file /dev/nvme1n1: Input/output error\nnote: both iodepth\n"
    m = by_metric(fio.parse(raw(doc, prefix)))
    assert m["read_bandwidth"].value == 1000


@pytest.mark.parametrize("capture", [b"", b"   \n\n"])
def test_it_rejects_empty_input(capture):
    with pytest.raises(ParseError) as error:
        fio.parse(capture)
    assert error.value.line == 0


def test_it_reports_the_line_where_truncated_json_stops():
    text = raw(document(job(read=section(bw_bytes=1000, iops=10)))).decode()
    cut = text[: text.index('"iops"')]
    with pytest.raises(ParseError) as error:
        fio.parse(cut.encode())
    assert error.value.line == cut.count("\n") + 1
    assert "complete JSON" in str(error.value)


def test_it_rejects_normal_text_output():
    text = ("seqread: (g=0): rw=read, bs=(R) 1024KiB-1024KiB, ioengine=libaio, iodepth=32\n"
            "fio-3.33\nStarting 1 process\n"
            "   READ: bw=11.0GiB/s (11.8GB/s), io=660GiB (709GB), run=60001-60001msec\n")
    with pytest.raises(ParseError):
        fio.parse(text.encode())


def test_it_multiplies_kib_per_second_when_bw_bytes_is_absent():
    m = by_metric(fio.parse(raw(document(job(read=section(bw=1000, iops=1))))))
    assert m["read_bandwidth"].value == 1024000


def test_it_prefers_bw_bytes_over_kib():
    m = by_metric(fio.parse(raw(document(job(read=section(bw_bytes=1000000, bw=976, iops=1))))))
    assert m["read_bandwidth"].value == 1000000


def test_it_accepts_numeric_strings():
    m = by_metric(fio.parse(raw(document(job(read=section(bw_bytes="2048", iops="2.5"))))))
    assert m["read_bandwidth"].value == 2048
    assert m["read_iops"].value == 2.5


@pytest.mark.parametrize("bad", ["NaN", '"nan"', '"fast"', "null"])
def test_it_rejects_a_bandwidth_that_is_not_a_number(bad):
    text = raw(document(job(read=section(bw_bytes=123456789, iops=1)))).decode()
    text = text.replace("123456789", bad)
    with pytest.raises(ParseError) as error:
        fio.parse(text.encode())
    assert "bw_bytes" in str(error.value)
    assert error.value.line == text[: text.index('"bw_bytes"')].count("\n") + 1


def test_it_takes_the_last_of_duplicate_keys():
    text = raw(document(job(read=section(bw_bytes=5, iops=1)))).decode()
    text = text.replace('"bw_bytes": 5', '"bw_bytes": 1, "bw_bytes": 5')
    assert by_metric(fio.parse(text.encode()))["read_bandwidth"].value == 5


def test_it_converts_microseconds_of_fio_2_and_nanoseconds_of_fio_3():
    usec = section(bw=1, iops=1, percentile={"50.000000": 250, "99.000000": 900}, usec=True)
    nsec = section(bw_bytes=1, iops=1, percentile={"50.000000": 250, "99.000000": 900})
    assert by_metric(fio.parse(raw(document(job(read=usec)))))["read_clat_p99"].value == 900e-6
    assert by_metric(fio.parse(raw(document(job(read=nsec)))))["read_clat_p99"].value == 900e-9


def test_it_merges_json_plus_bins_across_jobs_like_fio():
    # job a: 98 samples at 100 ns, 2 at 10000 ns; job b: 100 samples at 200 ns.
    a = section(bw_bytes=10, iops=1, percentile={"50.000000": 100, "99.000000": 10000},
                bins={"100": 98, "10000": 2})
    b = section(bw_bytes=20, iops=2, percentile={"50.000000": 200, "99.000000": 200},
                bins={"200": 100})
    m = by_metric(fio.parse(raw(document(job("a", read=a), job("b", read=b)))))
    # merged: 200 samples; 50 % = 100th sample → 200 ns; 99 % = 198th sample → 200 ns
    assert m["read_clat_p50"].value == pytest.approx(200e-9)
    assert m["read_clat_p99"].value == pytest.approx(200e-9)
    assert m["read_bandwidth"].value == 30
    assert m["read_bandwidth"].labels == {"job": "all"}


def test_it_reports_the_largest_job_percentile_without_bins():
    a = section(bw_bytes=10, iops=1, percentile={"50.000000": 100, "99.000000": 10000})
    b = section(bw_bytes=20, iops=2, percentile={"50.000000": 200, "99.000000": 300})
    m = by_metric(fio.parse(raw(document(job("w", read=a), job("w", read=b)))))
    assert m["read_clat_p50"].value == pytest.approx(200e-9)
    assert m["read_clat_p99"].value == pytest.approx(10000e-9)
    assert m["read_clat_p99"].labels == {"job": "w"}


def test_it_counts_every_failed_job():
    doc = document(job("a", error=5), job("b"), job("c", error=22))
    assert by_metric(fio.parse(raw(doc)))["job_errors"].value == 2


def test_it_rejects_json_without_jobs():
    with pytest.raises(ParseError) as error:
        fio.parse(b'{"fio version": "fio-3.33", "jobs": []}')
    assert "jobs" in str(error.value)


# --- the real binary ----------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
@pytest.mark.parametrize("output_format", ["json", "json+"])
def test_it_matches_what_the_real_fio_reports(tmp_path, output_format):
    completed = subprocess.run(
        ["fio", "--name=scratchread", f"--filename={tmp_path / 'scratch.bin'}", "--rw=read",
         "--bs=64k", "--size=8M", "--ioengine=psync", "--direct=0",
         f"--output-format={output_format}"],
        capture_output=True, cwd=tmp_path, timeout=60, check=True,
    )
    doc = json.loads(completed.stdout[completed.stdout.index(b"{"):])
    m = by_metric(fio.parse(completed.stdout))

    reads = [j["read"] for j in doc["jobs"]]
    assert m["read_bandwidth"].value == pytest.approx(sum(r["bw_bytes"] for r in reads))
    assert m["read_iops"].value == pytest.approx(sum(r["iops"] for r in reads))
    assert m["job_errors"].value == 0
    assert m["read_bandwidth"].labels == {"job": "scratchread"}
    for r in reads:
        assert r["io_bytes"] == 8 * 1024 * 1024
        if r["runtime"] > 0:  # ms; bw_bytes is io_bytes per runtime, integer-rounded by fio
            assert r["bw_bytes"] == pytest.approx(r["io_bytes"] * 1000 / r["runtime"], rel=1e-3)
    clat = reads[0]["clat_ns"]
    assert m["read_clat_p50"].value == pytest.approx(clat["percentile"]["50.000000"] * 1e-9)
    assert m["read_clat_p99"].value == pytest.approx(clat["percentile"]["99.000000"] * 1e-9)
    if output_format == "json+":  # our bin rule reproduces fio's own percentiles
        bins = {int(k) / 1e9: v for k, v in clat["bins"].items()}
        assert fio._percentile_of_bins(bins, 99.0) == pytest.approx(m["read_clat_p99"].value)
        assert fio._percentile_of_bins(bins, 50.0) == pytest.approx(m["read_clat_p50"].value)


# --- quirks (issue 3 review) --------------------------------------------------------------------


def test_it_ignores_text_printed_after_the_json():
    doc = document(job(read=section(bw_bytes=1000, iops=10)))
    suffix = "\nRun status group 0 (all jobs):\n   READ: bw=1000B/s (1000B/s)\n"
    m = by_metric(fio.parse(raw(doc) + suffix.encode()))
    assert m["read_bandwidth"].value == 1000
    assert m["run_interrupted"].value == 0


def test_it_refuses_a_second_json_document():
    text = raw(document(job(read=section(bw_bytes=1000, iops=10)))).decode()
    with pytest.raises(ParseError) as error:
        fio.parse((text + "\nfio: note\n" + text).encode())
    assert "several JSON documents" in str(error.value)
    assert error.value.line == text.count("\n") + 3  # after the first document and the note


def test_it_flags_a_signal_reported_after_the_json_but_not_inside_it():
    doc = document(job(read=section(bw_bytes=1000, iops=10)))
    doc["jobs"][0]["job options"] = {"description": "\nfio: terminating on signal 2"}
    assert by_metric(fio.parse(raw(doc)))["run_interrupted"].value == 0
    tail = raw(doc) + b"\nfio: terminating on signal 15\n"
    assert by_metric(fio.parse(tail))["run_interrupted"].value == 1


def test_it_reads_bare_nan_that_printf_wrote_as_no_figure():
    text = raw(document(job(read=section(bw_bytes=1000, iops=10)))).decode()
    text = text.replace('"runtime": 1000', '"runtime": 1000, "iops_stddev": -nan, "bw_agg": nan')
    m = by_metric(fio.parse(text.encode()))
    assert m["read_bandwidth"].value == 1000


def test_it_refuses_a_bare_nan_where_a_figure_is_required():
    text = raw(document(job(read=section(bw_bytes=1000, iops=123456)))).decode()
    text = text.replace('"iops": 123456', '"iops": -nan')
    with pytest.raises(ParseError) as error:
        fio.parse(text.encode())
    assert "iops" in str(error.value)


def test_it_reads_jobs_without_optional_sections():
    bare = {"jobname": "r", "error": 0, "read": {"bw_bytes": 500, "iops": 5}}  # no write, clat
    other = {"jobname": "r", "error": 0, "read": {"bw": 1, "iops": 1, "clat_ns": {"N": 0}}}
    m = by_metric(fio.parse(raw(document(bare, other))))
    assert m["read_bandwidth"].value == 500 + 1024
    assert not {"write_bandwidth", "write_iops", "read_clat_p50"} & set(m)


@pytest.mark.parametrize("key", ["99.000000", "99.00", "99", "9.900000e+01"])
def test_it_reads_percentile_keys_however_they_are_spelled(key):
    read = section(bw_bytes=1, iops=1, percentile={"50.000000": 10, key: 990, "0.00": 0})
    assert by_metric(fio.parse(raw(document(job(read=read)))))["read_clat_p99"].value == 990e-9


def test_it_reports_the_largest_percentile_when_some_jobs_lack_bins():
    a = section(bw_bytes=1, iops=1, percentile={"50.000000": 100, "99.000000": 100},
                bins={"100": 10})
    b = section(bw_bytes=1, iops=1, percentile={"50.000000": 300, "99.000000": 300})
    m = by_metric(fio.parse(raw(document(job("x", read=a), job("x", read=b)))))
    assert m["read_clat_p99"].value == pytest.approx(300e-9)


def test_it_merges_string_counts_of_json_plus_bins():
    a = section(bw_bytes=1, iops=1, percentile={"50.000000": 100, "99.000000": 100},
                bins={"100": "98", "300": "2"})
    b = section(bw_bytes=1, iops=1, percentile={"50.000000": 200, "99.000000": 200},
                bins={"200": 100})
    m = by_metric(fio.parse(raw(document(job("x", read=a), job("x", read=b)))))
    # 200 samples: the 100th is at 200 ns, the 198th at 200 ns
    assert m["read_clat_p50"].value == pytest.approx(200e-9)
    assert m["read_clat_p99"].value == pytest.approx(200e-9)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_it_merges_real_json_plus_histograms_of_separate_jobs(tmp_path):
    completed = subprocess.run(
        ["fio", "--name=mixed", f"--filename={tmp_path / 'scratch.bin'}", "--rw=randread",
         "--bs=4k", "--size=4M", "--ioengine=psync", "--numjobs=3", "--output-format=json+"],
        capture_output=True, cwd=tmp_path, timeout=60, check=True,
    )
    doc = json.loads(completed.stdout[completed.stdout.index(b"{"):])
    m = by_metric(fio.parse(completed.stdout))
    assert len(doc["jobs"]) == 3  # no group_reporting: one entry per job
    for percent, metric in ((50.0, "read_clat_p50"), (99.0, "read_clat_p99")):
        per_job = [j["read"]["clat_ns"]["percentile"][f"{percent:.6f}"] * 1e-9
                   for j in doc["jobs"]]
        # a percentile of the merged histogram lies within the jobs' own percentiles
        # (ns → s in floating point: allow one part in 10^9 at either end)
        assert min(per_job) * (1 - 1e-9) <= m[metric].value <= max(per_job) * (1 + 1e-9)
