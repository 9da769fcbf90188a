"""Bad input to the auditor's verifier (``python -m acceptance_core redecide``) and to
``manage.py redecide``: a report that is empty, not a PDF, truncated, missing or a directory,
a trust file that is not a certificate, and a reader that goes away (``| head -1``). Each is one
line naming what was wrong, exit 2 (or, for the vanished reader, the check's own status), never
a traceback."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from acceptance_core.__main__ import main
from tests.reports.test_redecide import ca_path, report_of
from tests.reports.test_trust import _cert, _pem
from tests.runners.test_run_gate import run_gate

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    saved, sys.stdout = sys.stdout, out
    try:
        status = main(["redecide", *args])
    finally:
        sys.stdout = saved
    return status, out.getvalue()


def _managed(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("redecide", *args, stdout=out)
    return exit_info.value.code, out.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {"empty": b"", "text": b"hello, auditor\n", "key": (
        b"-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n"
        b"-----END PRIVATE KEY-----\n"), "random": bytes(range(7, 107)),
        "truncated": b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n" * 50}
    paths = {}
    for name, content in made.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(content)
    paths["directory"] = tmp_path / "a-directory.pdf"
    paths["directory"].mkdir()
    paths["missing"] = tmp_path / "missing.pdf"
    return paths


def test_a_report_that_is_not_a_pdf_is_named_in_one_line(files, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(_pem(_cert("Auditor's Root", ca=True)[1]))
    expected = {
        "empty": "the file is empty (0 bytes), not a PDF file",
        "text": "not a PDF file (no %PDF- header in its first kilobyte)",
        "truncated": "not a complete PDF file (no %EOF marker at its end: truncated?)",
        "missing": f"cannot read {files['missing']}: No such file or directory",
        "directory": f"cannot read {files['directory']}: Is a directory",
    }
    for name, words in expected.items():
        status, out = _cli(str(files[name]), "--trust", str(ca))
        assert (status, out.splitlines()) == (2, [f"cannot check: {words}"]), name


def test_a_trust_file_that_is_not_a_certificate_says_so(files):
    for name, words in [("text", "not a PEM/DER certificate"),
                        ("random", "not a PEM/DER certificate"),
                        ("empty", "not a PEM/DER certificate"),
                        ("key", "it holds no certificate (a PEM/DER certificate is expected)"),
                        ("directory", "Is a directory"),
                        ("missing", "No such file or directory")]:
        for option in ("--trust", "--customer-trust"):
            status, out = _cli(str(files["text"]), option, str(files[name]))
            assert (status, out.splitlines()) == (
                2, [f"cannot check: cannot load trust root {files[name]}: {words}"]), name


@pytest.mark.django_db
def test_the_service_command_names_the_same_faults(files):
    for name, words in [("empty", "the file is empty (0 bytes), not a PDF file"),
                        ("text", "not a PDF file (no %PDF- header in its first kilobyte)"),
                        ("truncated", "not a complete PDF file (no %EOF marker at its end: "
                                      "truncated?)")]:
        status, out = _managed(str(files[name]))
        assert (status, out.splitlines()) == (2, [f"cannot check: {files[name]}: {words}"])
    signed_stand_in = files["truncated"].read_bytes() + b"startxref\n9\n%%EOF\n"
    files["truncated"].write_bytes(signed_stand_in)
    status, out = _managed(str(files["truncated"]), "--trust", str(files["text"]))
    assert (status, out.splitlines()) == (
        2, [f"cannot check: cannot load trust root {files['text']}: not a PEM/DER certificate"])


def _piped_into_nothing(*args: str) -> subprocess.CompletedProcess:
    """The command with its reader gone before it writes (as ``| head -0``)."""
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = process.stderr.read()
    process.wait(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, b"", stderr)


def test_a_reader_that_goes_away_is_no_traceback(files):
    done = _piped_into_nothing(sys.executable, "-m", "acceptance_core", "redecide",
                               str(files["empty"]), "--trust", str(files["text"]))
    assert (done.returncode, done.stderr) == (2, b"")


@pytest.mark.slow
def test_a_whole_table_cut_short_keeps_the_checks_status(lab, tmp_path):
    engagement, _ = lab("healthy")
    assert run_gate(engagement.name, "G1")[0] == 0
    report = str(report_of(engagement, "G1"))
    done = _piped_into_nothing(sys.executable, "-m", "acceptance_core", "redecide", report,
                               "--trust", ca_path())
    assert (done.returncode, done.stderr) == (0, b"")
    status, out = _managed(report)
    assert status == 0 and out.splitlines()[-1] == \
        "result: the evidence gives the recorded decision" and "\n\n" not in out, out
