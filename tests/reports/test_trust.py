"""Issue 13, items 1–3 and the verify page's cost: whose certificate vouches for which
signature, what a countersignature may change, who may countersign, and junk refused cheaply.
Real WeasyPrint reports, real pyHanko signatures, certificates made here with ``cryptography``.
"""

from __future__ import annotations

import io
import os
import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from asn1crypto import pem as asn1_pem
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from pyhanko.sign import fields, signers
from pyhanko.stamp import TextStampStyle

from acceptance.models import Membership
from gates.services import engagement_create
from reports.models import CustomerCertificate, Report
from reports.render import render_gate_report_pdf
from reports.services import (
    ReportRefused,
    countersigned_store,
    customer_certificate_add,
    report_issue,
    report_verify,
)
from reports.signing import (
    CUSTOMER_SIGNATURE_FIELD,
    DEV_SIGNER_NAME,
    SIGNATURE_FIELD,
    load_signer,
    sign_pdf,
    verify_pdf,
)
from tests.reports.samples import g1_stopped
from tests.web.conftest import G1_MISSING_DRIVE, decide, make_user

# --- certificates made here ----------------------------------------------------------------------

_SIGNING_USAGE = {"digital_signature": True, "content_commitment": True}


def _usage(**on: bool) -> x509.KeyUsage:
    names = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
             "key_agreement", "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
    return x509.KeyUsage(**{n: on.get(n, False) for n in names})


def _cert(common_name: str, *, issuer=None, ca: bool = False, usage: dict | None = None,
          org: str = "ACME"):
    """(key, certificate): self-signed when ``issuer`` is None, else issued by (key, cert)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)])
    issuer_key, issuer_name = (key, subject) if issuer is None else (issuer[0],
                                                                     issuer[1].subject)
    now = datetime.now(UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(minutes=5))
               .not_valid_after(now + timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage is not None:
        builder = builder.add_extension(_usage(**usage), critical=True)
    return key, builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _signer(key, cert, *chain):
    p12 = pkcs12.serialize_key_and_certificates(
        name=b"x", key=key, cert=cert, cas=list(chain) or None,
        encryption_algorithm=serialization.NoEncryption())
    return signers.SimpleSigner.load_pkcs12_data(p12, other_certs=[], passphrase=None)


def _sign(data: bytes, signer, field: str, *, box=None, text: str = "") -> bytes:
    writer = IncrementalPdfFileWriter(io.BytesIO(data), strict=False)
    meta = signers.PdfSignatureMetadata(field_name=field, md_algorithm="sha256",
                                        subfilter=fields.SigSeedSubFilter.PADES)
    spec = fields.SigFieldSpec(field, on_page=0, box=box) if box else None
    style = TextStampStyle(stamp_text=text) if text else None
    out = signers.PdfSigner(meta, signer, stamp_style=style, new_field_spec=spec).sign_pdf(writer)
    return out.getvalue()


# --- the engagement, its people and its report ---------------------------------------------------


@pytest.fixture
def acme(db):
    return engagement_create(name="acme-1", customer="ACME",
                             start_date=timezone.localdate() - timedelta(weeks=3))


@pytest.fixture
def people(acme):
    return {"pm": make_user("pat-pm", Membership.Role.PROJECT_MANAGER),
            "engineer": make_user("erin-engineer", Membership.Role.ENGINEER),
            "customer": make_user("cora-customer", Membership.Role.CUSTOMER, acme.customer)}


@pytest.fixture
def g1_report(acme) -> Report:
    return report_issue(decision=decide(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped"))


@pytest.fixture(scope="module")
def doctored_pdf() -> bytes:
    """The stopped G1 report re-rendered as "passed": what a forger would sign."""
    return render_gate_report_pdf(g1_stopped(engagement_name="acme-1", customer="ACME",
                                             decision_outcome="passed",
                                             decision_sentence="G1 PASSED"))


@pytest.fixture(scope="module")
def customer_key():
    """The customer's genuine signing certificate (a leaf of their own CA) and its signer."""
    ca = _cert("ACME Root CA", ca=True, usage={"key_cert_sign": True, "crl_sign": True})
    key, cert = _cert("Cora Customer", issuer=ca, usage=_SIGNING_USAGE)
    return {"ca": ca, "cert": cert, "signer": _signer(key, cert, ca[1])}


def _verify_command(data: bytes, tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / f"file-{time.monotonic_ns()}.pdf"
    path.write_bytes(data)
    out = StringIO()
    try:
        call_command("verify_report", str(path), stdout=out)
    except SystemExit as e:
        return int(e.code or 0), out.getvalue()
    return 0, out.getvalue()


def _page(client, user, data: bytes) -> str:
    client.force_login(user)
    response = client.post(reverse("report-verify"),
                           {"pdf": SimpleUploadedFile("r.pdf", data, "application/pdf")})
    assert response.status_code == 200
    return response.content.decode()


def _api(user):
    from rest_framework.test import APIClient

    from acceptance.tokens import api_token_create

    client = APIClient()
    _, key = api_token_create(user=user, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


# --- 1. a forged report never verifies as genuine ------------------------------------------------


def test_it_handles_a_customer_ca_forging_the_vendors_signature(client, g1_report, people,
                                                               doctored_pdf, tmp_path):
    ca = _cert("Acceptance Service Development CA", ca=True,
               usage={"key_cert_sign": True, "crl_sign": True})
    key, leaf = _cert(DEV_SIGNER_NAME, issuer=ca, usage=_SIGNING_USAGE,
                      org="Acceptance service (development)")
    # The CA is refused now; a row left from before the fix, and the forged leaf itself
    # (a well-formed signing certificate), are registered as the customer's anyway.
    with pytest.raises(ReportRefused, match="CA certificate"):
        customer_certificate_add(engagement=g1_report.engagement, pem=_pem(ca[1]),
                                 uploaded_by="cora")
    CustomerCertificate.objects.create(
        engagement=g1_report.engagement, pem=_pem(ca[1]).decode(), subject="legacy CA",
        sha256_fingerprint=ca[1].fingerprint(hashes.SHA256()).hex(),
        not_after=ca[1].not_valid_after_utc, uploaded_by="cora")
    customer_certificate_add(engagement=g1_report.engagement, pem=_pem(leaf),
                             uploaded_by="cora")
    forger = _signer(key, leaf, ca[1])
    forgeries = {
        "vendor field": _sign(doctored_pdf, forger, SIGNATURE_FIELD),
        "customer field only": _sign(doctored_pdf, forger, CUSTOMER_SIGNATURE_FIELD),
    }
    for what, forged in forgeries.items():
        result = report_verify(data=forged)
        assert not result.valid and not result.trusted, what
        assert [s.party for s in result.signatures] == ["untrusted"], what
        for who in ("customer", "pm", "engineer"):
            html = _page(client, people[who], forged)
            assert "Genuine" not in html, (what, who)
            assert "Not valid" in html or "not one this service trusts" in html
            assert "untrusted" in html
        code, out = _verify_command(forged, tmp_path)
        assert code == 1 and out.startswith("NOT valid: "), (what, out)
        assert "untrusted, signed by Acceptance Service (development)" in out


def test_it_handles_a_leaf_issued_by_a_legacy_ca_row_countersigning(g1_report, tmp_path):
    ca = _cert("ACME Root CA", ca=True, usage={"key_cert_sign": True, "crl_sign": True})
    key, leaf = _cert("Someone at ACME", issuer=ca, usage=_SIGNING_USAGE)
    CustomerCertificate.objects.create(
        engagement=g1_report.engagement, pem=_pem(ca[1]).decode(), subject="legacy CA",
        sha256_fingerprint=ca[1].fingerprint(hashes.SHA256()).hex(),
        not_after=ca[1].not_valid_after_utc, uploaded_by="cora")
    theirs = _sign(Path(g1_report.path).read_bytes(), _signer(key, leaf, ca[1]),
                   CUSTOMER_SIGNATURE_FIELD)
    result = report_verify(data=theirs)
    assert not result.valid
    assert [s.party for s in result.signatures] == ["vendor", "untrusted"]
    assert "not made with a registered customer certificate" in result.summary
    with pytest.raises(ReportRefused, match="does not validate"):
        countersigned_store(report=g1_report, data=theirs, uploaded_by="cora")


# --- registering the customer's certificate ------------------------------------------------------


@pytest.mark.parametrize("kind,message", [
    ("ca", "CA certificate"),
    ("encipherment only", "key usage does not allow signing"),
    ("no key usage", "key usage does not allow signing"),
])
def test_it_refuses_a_certificate_that_cannot_be_a_signing_certificate(acme, kind, message):
    cert = {"ca": lambda: _cert("ACME CA", ca=True, usage={"key_cert_sign": True})[1],
            "encipherment only": lambda: _cert("x", usage={"key_encipherment": True})[1],
            "no key usage": lambda: _cert("x")[1]}[kind]()
    with pytest.raises(ReportRefused, match=message):
        customer_certificate_add(engagement=acme, pem=_pem(cert), uploaded_by="cora")
    assert not CustomerCertificate.objects.exists()


def test_the_page_says_why_a_ca_certificate_is_refused(client, acme, people):
    ca = _cert("ACME CA", ca=True, usage={"key_cert_sign": True})[1]
    client.force_login(people["customer"])
    response = client.post(reverse("report-certificate", args=["acme-1"]),
                           {"certificate": SimpleUploadedFile("ca.pem", _pem(ca))})
    assert response.status_code == 200
    assert "basicConstraints cA=true" in response.content.decode()
    assert not CustomerCertificate.objects.exists()


# --- 2. a countersignature changes nothing visible -----------------------------------------------


def test_it_refuses_a_visible_countersignature_painting_over_the_report(
        g1_report, people, customer_key, tmp_path):
    customer_certificate_add(engagement=g1_report.engagement, pem=_pem(customer_key["cert"]),
                             uploaded_by="cora")
    overlay = _sign(Path(g1_report.path).read_bytes(), customer_key["signer"],
                    CUSTOMER_SIGNATURE_FIELD, box=(0, 500, 595, 842), text="DECISION: STOPPED")
    upload = SimpleUploadedFile("countersigned.pdf", overlay, "application/pdf")
    response = _api(people["customer"]).post(f"/api/reports/{g1_report.id}/countersigned/",
                                             {"pdf": upload}, format="multipart")
    assert response.status_code == 400
    assert "is visible" in response.json()["pdf"][0]
    assert Report.objects.count() == 1

    result = report_verify(data=overlay)
    assert not result.valid and result.modified_after_signing
    assert "the countersignature in 'CustomerSignature' is visible" in result.summary
    code, out = _verify_command(overlay, tmp_path)
    assert code == 1 and "is visible" in out and "modified after signing: yes" in out


def _add_annotation(data: bytes) -> bytes:
    writer = IncrementalPdfFileWriter(io.BytesIO(data), strict=False)
    page_ref = writer.root["/Pages"]["/Kids"][0]
    page = page_ref.get_object()
    note = writer.add_object(generic.DictionaryObject({
        generic.pdf_name("/Type"): generic.pdf_name("/Annot"),
        generic.pdf_name("/Subtype"): generic.pdf_name("/FreeText"),
        generic.pdf_name("/Rect"): generic.ArrayObject(
            [generic.NumberObject(n) for n in (0, 700, 595, 842)]),
        generic.pdf_name("/Contents"): generic.TextStringObject("G1 PASSED"),
        generic.pdf_name("/DA"): generic.TextStringObject("/Helv 40 Tf 0 g"),
    }))
    annots = page.get("/Annots")
    if annots is None:
        page[generic.pdf_name("/Annots")] = generic.ArrayObject([note])
    else:
        annots = annots.get_object()
        annots.append(note)
    writer.update_container(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_it_names_an_annotation_added_before_an_invisible_countersignature(
        g1_report, customer_key):
    customer_certificate_add(engagement=g1_report.engagement, pem=_pem(customer_key["cert"]),
                             uploaded_by="cora")
    changed = _add_annotation(Path(g1_report.path).read_bytes())
    theirs = _sign(changed, customer_key["signer"], CUSTOMER_SIGNATURE_FIELD)
    result = report_verify(data=theirs)
    assert not result.valid and result.modified_after_signing
    assert "a FreeText annotation was added on page 1" in result.summary
    with pytest.raises(ReportRefused, match="a FreeText annotation was added on page 1"):
        countersigned_store(report=g1_report, data=theirs, uploaded_by="cora")


def test_it_names_another_form_field_signed_after_ours(g1_report, customer_key):
    customer_certificate_add(engagement=g1_report.engagement, pem=_pem(customer_key["cert"]),
                             uploaded_by="cora")
    theirs = _sign(Path(g1_report.path).read_bytes(), customer_key["signer"], "Decision")
    result = report_verify(data=theirs)
    assert not result.valid
    assert "form fields were filled or changed after signing: 'Decision'" in result.summary
    assert [s.party for s in result.signatures] == ["vendor", "untrusted"]


# --- 3. only the customer registers the anchor and countersigns ----------------------------------


@pytest.mark.parametrize("who", ["pm", "engineer"])
def test_only_the_customer_may_register_the_certificate_or_upload_a_countersigned_copy(
        client, g1_report, people, customer_key, who):
    customer_certificate_add(engagement=g1_report.engagement, pem=_pem(customer_key["cert"]),
                             uploaded_by="cora")
    theirs = _sign(Path(g1_report.path).read_bytes(), customer_key["signer"],
                   CUSTOMER_SIGNATURE_FIELD)
    client.force_login(people[who])
    own = _cert("Pat as 'the customer'", usage=_SIGNING_USAGE)[1]
    page = client.post(reverse("report-certificate", args=["acme-1"]),
                       {"certificate": SimpleUploadedFile("c.pem", _pem(own))})
    assert page.status_code == 403
    page = client.post(reverse("report-countersigned", args=[g1_report.id]),
                       {"pdf": SimpleUploadedFile("c.pdf", theirs, "application/pdf")})
    assert page.status_code == 403
    api = _api(people[who]).post(f"/api/reports/{g1_report.id}/countersigned/",
                                 {"pdf": SimpleUploadedFile("c.pdf", theirs)},
                                 format="multipart")
    assert api.status_code == 403
    body = client.get(reverse("engagement-reports", args=["acme-1"])).content.decode()
    assert "Register the certificate" not in body
    assert "Upload a countersigned copy" not in body
    assert CustomerCertificate.objects.count() == 1 and Report.objects.count() == 1


def test_a_genuine_invisible_countersignature_uploads_and_names_both_parties(
        client, g1_report, people, customer_key, tmp_path):
    client.force_login(people["customer"])
    response = client.post(reverse("report-certificate", args=["acme-1"]),
                           {"certificate": SimpleUploadedFile("c.pem",
                                                              _pem(customer_key["cert"]))})
    assert response.status_code == 302
    theirs = _sign(Path(g1_report.path).read_bytes(), customer_key["signer"],
                   CUSTOMER_SIGNATURE_FIELD)
    response = _api(people["customer"]).post(f"/api/reports/{g1_report.id}/countersigned/",
                                             {"pdf": SimpleUploadedFile("c.pdf", theirs)},
                                             format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["origin"] == "countersigned"

    result = report_verify(data=theirs)
    assert result.valid, result.summary
    assert [s.party for s in result.signatures] == ["vendor", "customer ACME"]
    assert not result.modified_after_signing
    for who in ("customer", "pm", "engineer"):
        html = _page(client, people[who], theirs)
        assert "Genuine" in html
        assert "the vendor (this service)" in html and "the customer ACME" in html
    code, out = _verify_command(theirs, tmp_path)
    assert code == 0, out
    assert "signature 1: field AcceptanceSignature, vendor" in out
    assert "signature 2: field CustomerSignature, customer ACME, signed by Cora Customer" in out


def test_a_countersignature_for_another_engagement_is_not_trusted(g1_report, customer_key, db):
    other = engagement_create(name="globex-1", customer="Globex",
                              start_date=timezone.localdate())
    customer_certificate_add(engagement=other, pem=_pem(customer_key["cert"]),
                             uploaded_by="gina")
    theirs = _sign(Path(g1_report.path).read_bytes(), customer_key["signer"],
                   CUSTOMER_SIGNATURE_FIELD)
    result = report_verify(data=theirs)
    assert not result.valid
    assert "no customer certificate is registered for this report's engagement" in (
        result.summary)


def test_the_service_refuses_the_vendors_key_and_says_what_it_cannot_check(
        client, g1_report, people):
    vendor = load_signer()
    ours = Path(g1_report.path).read_bytes()
    # no customer certificate registered: not valid, and said to be uncheckable, not forged
    key, cert = _cert("Cora Customer", usage=_SIGNING_USAGE)
    theirs = _sign(ours, _signer(key, cert), CUSTOMER_SIGNATURE_FIELD)
    result = report_verify(data=theirs)
    assert not result.valid
    assert ("the countersignature by 'Cora Customer' cannot be checked: no customer "
            "certificate is registered for this report's engagement (not valid until then)"
            ) in result.summary
    page = _page(client, people["customer"], theirs)
    assert "cannot be checked: no customer certificate is registered" in page
    assert "Genuine" not in page
    # the vendor's own certificate registered as the customer's still cannot countersign
    customer_certificate_add(engagement=g1_report.engagement, uploaded_by="cora",
                             pem=asn1_pem.armor("CERTIFICATE", vendor.signing_cert.dump()))
    by_vendor = sign_pdf(ours, signer=vendor, field_name=CUSTOMER_SIGNATURE_FIELD,
                         timestamper=None)
    result = report_verify(data=by_vendor)
    assert not result.valid
    assert [s.party for s in result.signatures] == ["vendor", "untrusted"]
    assert "it was made with the vendor's key; only the customer countersigns" in result.summary


# --- the verify page's cost ----------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["random", "pdf header and eof"])
def test_it_refuses_50_mb_of_junk_before_parsing(shape):
    junk = os.urandom(50 * 1024 * 1024)
    if shape != "random":
        junk = b"%PDF-1.7\n" + junk + b"\nstartxref\n1234\n%%EOF\n"
    started = time.monotonic()
    result = verify_pdf(junk, roots=[])
    assert time.monotonic() - started < 1.0
    assert not result.valid and "PDF file" in result.summary


def test_the_verify_page_refuses_junk_quickly(client, people):
    started = time.monotonic()
    html = _page(client, people["engineer"], b"%PDF-1.4\n" + os.urandom(2 * 1024 * 1024))
    assert time.monotonic() - started < 5.0
    assert "Not valid" in html and "not a complete PDF file" in html


def test_a_countersigned_file_still_verifies_in_the_old_layout(g1_report, customer_key):
    """Existing genuine files keep verifying: a countersignature by the command line's own
    signing path (``sign_pdf``, invisible) is accepted."""
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=asn1_pem.armor("CERTIFICATE",
                                                customer_key["signer"].signing_cert.dump()),
                             uploaded_by="cora")
    theirs = sign_pdf(Path(g1_report.path).read_bytes(), signer=customer_key["signer"],
                      field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None)
    new = countersigned_store(report=g1_report, data=theirs, uploaded_by="cora-customer")
    assert new.version == 2 and new.signer == "Cora Customer"
