"""Bad input to the auditor's verifier (``python -m acceptance_core redecide``) and to
``manage.py redecide``: a report that is empty, not a PDF, truncated, missing or a directory,
a trust file that is not a certificate, a summary.json of the wrong shape, and a reader that
goes away (``| head -1``). Each is one line naming what was wrong, exit 2 (for the vanished
reader 141, as every manage.py command), never a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from weasyprint import Attachment

from acceptance_core.__main__ import main, redecide_evidence
from acceptance_core.pdf import embedded
from acceptance_core.redecide import CannotCheck, redecide, table
from reports.evidence import SUMMARY_NAME
from reports.render import render_html_pdf
from reports.signing import ensure_dev_signer, load_signer, sign_pdf
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


def _piped_into_nothing(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command with its reader gone before it writes (as ``| head -0``)."""
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env)
    process.stdout.close()
    stderr = process.stderr.read()
    process.wait(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, b"", stderr)


def test_a_reader_that_goes_away_is_no_traceback(files, tmp_path):
    done = _piped_into_nothing(sys.executable, "-m", "acceptance_core", "redecide",
                               str(files["empty"]), "--trust", str(files["text"]))
    assert (done.returncode, done.stderr) == (141, b"")
    env = {**os.environ, "ACCEPTANCE_VAR_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "acceptance.settings"}
    env.pop("DATABASE_URL", None)
    done = _piped_into_nothing(sys.executable, "manage.py", "redecide", str(files["empty"]),
                               env=env)
    assert (done.returncode, done.stderr) == (141, b"")


@pytest.mark.slow
def test_a_whole_table_cut_short_ends_141_without_a_traceback(lab, tmp_path):
    engagement, _ = lab("healthy")
    assert run_gate(engagement.name, "G1")[0] == 0
    report = str(report_of(engagement, "G1"))
    done = _piped_into_nothing(sys.executable, "-m", "acceptance_core", "redecide", report,
                               "--trust", ca_path())
    assert (done.returncode, done.stderr) == (141, b"")
    status, out = _managed(report)
    assert status == 0 and out.splitlines()[-1] == \
        "result: the evidence gives the recorded decision" and "\n\n" not in out, out


def _malformed(summary: dict, change) -> dict:
    changed = json.loads(json.dumps(summary))
    change(changed)
    return changed


def _basis(summary: dict) -> dict:
    return summary["gates"][0]["redecide"]


MALFORMED = [
    (lambda s: s["runs"].__setitem__(0, []), "summary.json is not well formed: its runs: "
                                             "AttributeError"),
    (lambda s: s["runs"][1].__setitem__("attachment", ["x"]), "summary.json is not well "
                                                               "formed: its runs: TypeError"),
    (lambda s: s["gates"].__setitem__(0, ["G1"]), "?: summary.json is not well formed: "
                                                  "TypeError: a gate entry is list, not an "
                                                  "object"),
    (lambda s: _basis(s)["criteria"][0].__setitem__("recorded", 3), "G1: summary.json is not "
                                                                     "well formed: "
                                                                     "AttributeError"),
    (lambda s: _basis(s).__setitem__("arrays", True), "G1: summary.json is not well formed: "
                                                      "AttributeError"),
    (lambda s: _basis(s)["runs"][0]["measurements"][0].__setitem__("labels", 7),
     "G1: summary.json is not well formed: AttributeError"),
]


@pytest.mark.slow
def test_a_summary_of_the_wrong_shape_cannot_be_checked_without_a_traceback(lab):
    """A summary.json whose parts have the wrong JSON type (only a vendor could sign one, but
    the verifier answers any input): one line, exit 2; a requirement that is not text is
    printed as text."""
    engagement, _ = lab("healthy")
    assert run_gate(engagement.name, "G1")[0] == 0
    summary, files = embedded(report_of(engagement, "G1").read_bytes())
    for change, says in MALFORMED:
        with pytest.raises(CannotCheck) as refused:
            redecide(_malformed(summary, change), files)
        assert str(refused.value).startswith(says), str(refused.value)
        assert "\n" not in str(refused.value)
    odd = _malformed(summary, lambda s: _basis(s)["criteria"][0].__setitem__(
        "requirement", {"at least": 24}))
    result = redecide(odd, files)
    assert result.exit_code == 0 and "{'at least': 24}" in table(result)
    # the same through the command's output (signatures aside): one line, exit 2
    pdf = render_html_pdf("<p>report</p>", attachments=[
        Attachment(file_obj=io.BytesIO(content), name=name, relationship="Data")
        for name, content in {**files, SUMMARY_NAME: json.dumps(_malformed(
            summary, MALFORMED[0][0])).encode()}.items()])
    out = io.StringIO()
    assert redecide_evidence(pdf, out) == 2
    assert out.getvalue().splitlines() == [
        "cannot check: summary.json is not well formed: its runs: AttributeError: 'list' "
        "object has no attribute 'get'"]


@pytest.mark.django_db
def test_a_signed_pdf_without_a_summary_says_so(tmp_path, settings):
    signing_dir = Path(settings.SIGNING_DIR)
    ensure_dev_signer(signing_dir)
    path = tmp_path / "letter.pdf"
    path.write_bytes(sign_pdf(render_html_pdf("<p>a letter, not a report</p>"),
                              signer=load_signer(), timestamper=None))
    status, out = _cli(str(path), "--trust", str(signing_dir / "ca.pem"))
    assert status == 2
    assert out.splitlines()[-1] == (
        "cannot check: the PDF embeds no summary.json: a signed PDF but not a gate report of "
        "the service, or one issued before reports carried their evidence")
    status, out = _managed(str(path))
    assert status == 2 and out.splitlines()[-1] == (
        "cannot check: the PDF embeds no summary.json: a signed PDF but not a gate report of "
        "the service, or one issued before reports carried their evidence")
