"""The verification page: upload a PDF, read the signature check in plain words; files above
50 MB are refused with a clear error and never checked."""

from __future__ import annotations

import dataclasses
import re
from io import BytesIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.writer import PdfFileWriter

from reports import forms
from reports.render import render_gate_report_pdf
from reports.signing import sign_pdf
from tests.reports.samples import g1_stopped
from tests.web.conftest import report_for


@pytest.fixture
def signed_pdf(private_dirs) -> bytes:
    """A one-page blank PDF, signed by the tests' development signer (``private_dirs`` points
    SIGNING_DIR at it first)."""
    writer = PdfFileWriter()
    writer.insert_page(generic.DictionaryObject({
        generic.pdf_name("/Type"): generic.pdf_name("/Page"),
        generic.pdf_name("/MediaBox"): generic.ArrayObject(
            [generic.NumberObject(n) for n in (0, 0, 595, 842)]),
        generic.pdf_name("/Resources"): generic.DictionaryObject(),
    }))
    out = BytesIO()
    writer.write(out)
    return sign_pdf(out.getvalue())


def upload(client, user, data: bytes, name: str = "report.pdf"):
    client.force_login(user)
    return client.post(reverse("report-verify"),
                       {"pdf": SimpleUploadedFile(name, data, "application/pdf")})


def test_a_genuine_report_verifies(client, customer_a, signed_pdf):
    html = upload(client, customer_a, signed_pdf).content.decode()
    assert "Genuine: the signature is intact, the signer is trusted" in html
    assert "Acceptance Service (development)" in html
    assert " UTC" in html


def test_a_changed_report_does_not(client, customer_a, signed_pdf):
    tampered = signed_pdf + b"\n% appended after signing\n"
    html = upload(client, customer_a, tampered).content.decode()
    assert "Not valid" in html and "Genuine" not in html


def test_a_changed_byte_says_the_signature_does_not_match_not_an_untrusted_signer(
        client, customer_a, signed_pdf):
    # one byte of the signed content changed: the page of a tampered file named the vendor's
    # signer "untrusted" although only the file's integrity failed
    assert b"/Type /Catalog" in signed_pdf
    tampered = signed_pdf.replace(b"/Type /Catalog", b"/Type /Catalof", 1)
    html = upload(client, customer_a, tampered).content.decode()
    assert "Not valid" in html
    assert html.count("not judged: the signature does not match the file") == 2  # summary, row
    assert "<td>not judged</td>" in html and "untrusted" not in html


def test_a_file_that_is_not_a_pdf_is_not_valid(client, customer_a):
    html = upload(client, customer_a, b"hello", "notes.txt").content.decode()
    assert "Not valid: no signature this service can check." in html
    assert "not a PDF file" in html
    # no signature: nothing to call unchanged, trusted or modified after signing ("no" beside
    # "no" read as a contradiction)
    for row in ("Unchanged since signing", "Signer trusted", "Modified after signing"):
        assert re.search(rf"<dt>{row}</dt><dd>— \(no signature\)</dd>", html), row
    assert "not judged" not in html


def test_it_names_a_report_of_this_service_the_user_may_see(client, customer_a, stopped_a,
                                                            signed_pdf, tmp_path):
    engagement, decision, report = stopped_a
    report.delete()
    report_for(decision, tmp_path, signed_pdf)
    html = upload(client, customer_a, signed_pdf).content.decode()
    assert "This is the G1 Arrival acceptance report of acme-1 issued here on" in html


def test_it_never_names_another_customers_report(client, customer_b, stopped_a, signed_pdf,
                                                 tmp_path):
    engagement, decision, report = stopped_a
    report.delete()
    report_for(decision, tmp_path, signed_pdf)
    html = upload(client, customer_b, signed_pdf).content.decode()
    assert "Genuine" in html and "acme-1" not in html


@pytest.mark.parametrize("size", [
    200_000,  # the request announces more than the limit: dropped before any byte is kept
    5_000,  # within the request's margin, but the file itself passes the limit as it arrives
])
def test_a_file_over_the_limit_is_refused_with_a_clear_error(client, customer_a, monkeypatch,
                                                             size):
    monkeypatch.setattr(forms, "max_verify_bytes", lambda: 1000)
    response = upload(client, customer_a, b"%PDF-" + b"x" * size)
    assert response.status_code == 413
    html = response.content.decode()
    assert "The file is larger than" in html and "Nothing was checked." in html
    assert "Genuine" not in html and "Not valid" not in html


def test_the_limit_is_20_mb_by_default(settings):
    assert forms.max_verify_bytes() == 20 * 1024 * 1024
    assert "larger than 20 MB" in forms.too_large_message()
    settings.REPORT_VERIFY_MAX_BYTES = 5 * 1024 * 1024
    assert "larger than 5 MB" in forms.too_large_message()


def test_a_post_without_a_file_asks_for_one(client, customer_a):
    client.force_login(customer_a)
    html = client.post(reverse("report-verify"), {}).content.decode()
    assert "Choose a PDF file to check." in html


def _report_pdf(simulated: bool) -> bytes:
    """A real gate report (WeasyPrint, summary.json and raw outputs embedded), signed."""
    ctx = g1_stopped()
    if not simulated:
        ctx = dataclasses.replace(ctx, simulated=False, runs=[
            dataclasses.replace(r, simulated=False) for r in ctx.runs])
    return sign_pdf(render_gate_report_pdf(ctx))


def test_a_genuine_report_of_simulated_evidence_says_so(client, customer_a, private_dirs):
    html = upload(client, customer_a, _report_pdf(simulated=True)).content.decode()
    assert "Genuine: the signature is intact" in html
    assert 'id="simulated"' in html and "SIMULATED EVIDENCE" in html
    assert "this genuine report was made from simulated evidence" in html


def test_a_genuine_report_of_real_evidence_carries_no_simulated_mark(client, customer_a,
                                                                     private_dirs):
    html = upload(client, customer_a, _report_pdf(simulated=False)).content.decode()
    assert "Genuine: the signature is intact" in html
    assert 'id="simulated"' not in html and "SIMULATED EVIDENCE" not in html
