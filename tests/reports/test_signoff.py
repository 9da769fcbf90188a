"""Sign-off, versions, countersigned uploads, the customer's certificate and the download log,
through the services and the pages (real WeasyPrint and pyHanko, no SSH)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from pypdf import PdfReader

from acceptance.models import AuditEntry, Membership, Organisation
from gates.services import engagement_create
from reports.evidence import SUMMARY_NAME
from reports.models import CustomerCertificate, Report, ReportDownload, SignOff
from reports.services import (
    ReportRefused,
    countersigned_store,
    customer_certificate_add,
    report_issue,
    signoff_record,
)
from reports.signing import CUSTOMER_SIGNATURE_FIELD, sign_pdf, verify_pdf
from tests.web.conftest import G1_MISSING_DRIVE, decide, make_user


@pytest.fixture
def acme(db):
    return engagement_create(name="acme-1", customer="ACME",
                             start_date=timezone.localdate() - timedelta(weeks=3))


@pytest.fixture
def people(acme):
    globex = Organisation.objects.create(name="Globex")
    pm = make_user("pat-pm", Membership.Role.PROJECT_MANAGER)
    pm.first_name, pm.last_name = "Pat", "Lee"
    pm.save()
    return {
        "pm": pm,
        "engineer": make_user("erin-engineer", Membership.Role.ENGINEER),
        "customer": make_user("cora-customer", Membership.Role.CUSTOMER, acme.customer),
        "other": make_user("otto-globex", Membership.Role.CUSTOMER, globex),
    }


@pytest.fixture
def g1_report(acme) -> Report:
    decision = decide(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    return report_issue(decision=decision)


def _summary(report: Report) -> dict:
    reader = PdfReader(Path(report.path).as_posix())
    return json.loads(reader.attachments[SUMMARY_NAME][0])


def test_the_first_version_awaits_sign_off(g1_report):
    assert (g1_report.version, g1_report.replaces, g1_report.signoff_complete) == (1, None, False)
    assert _summary(g1_report)["signoffs"] == []
    assert verify_pdf(Path(g1_report.path).read_bytes()).valid


def test_both_parties_sign_off_and_a_new_version_names_the_one_it_replaces(g1_report, people):
    before = Path(g1_report.path).read_bytes()
    signoff, new = signoff_record(report=g1_report, user=people["pm"], comment="23 drives: stop")
    assert new is None
    assert (signoff.party, signoff.name, signoff.role) == ("vendor", "Pat Lee",
                                                           "project manager (vendor)")
    signoff, new = signoff_record(report=g1_report, user=people["customer"], comment="agreed")
    assert signoff.party == "customer"
    assert signoff.role == "customer representative (ACME)"
    assert new is not None
    assert (new.version, new.replaces_id, new.signoff_complete, new.decision_id) == (
        2, g1_report.id, True, None)
    assert new.about_id == g1_report.about_id
    assert "signed off by the vendor's project manager and the customer's representative" in (
        new.reason)
    # the old file is untouched, the new one verifies and its sign-off page is filled
    assert Path(g1_report.path).read_bytes() == before
    assert verify_pdf(Path(new.path).read_bytes()).valid
    summary = _summary(new)
    assert [(s["party"], s["name"], s["comment"]) for s in summary["signoffs"]] == [
        ("vendor", "Pat Lee", "23 drives: stop"), ("customer", "cora-customer", "agreed")]
    assert summary["version"] == 2 and summary["replaces"].startswith("version 1 (sha256 ")
    actions = list(AuditEntry.objects.filter(engagement=g1_report.engagement)
                   .values_list("action", flat=True))
    assert actions.count("report_signoff") == 2 and "report_reissue" in actions


def test_a_party_signs_off_once(g1_report, people):
    signoff_record(report=g1_report, user=people["pm"])
    with pytest.raises(ReportRefused, match="vendor has already signed off"):
        signoff_record(report=g1_report, user=people["pm"])
    assert SignOff.objects.count() == 1


@pytest.mark.parametrize("who", ["engineer", "other"])
def test_only_the_pm_and_the_engagements_customer_may_sign_off(g1_report, people, who):
    with pytest.raises(PermissionError):
        signoff_record(report=g1_report, user=people[who])
    assert not SignOff.objects.exists()


# --- the customer's certificate and countersigned copies ---------------------------------------


def test_a_countersigned_copy_becomes_a_new_version(g1_report, people, customer_cert_pem,
                                                    customer_signer):
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=customer_cert_pem, uploaded_by="cora")
    ours = Path(g1_report.path).read_bytes()
    theirs = sign_pdf(ours, signer=customer_signer, field_name=CUSTOMER_SIGNATURE_FIELD,
                      timestamper=None)
    new = countersigned_store(report=g1_report, data=theirs, uploaded_by="cora-customer")
    assert (new.version, new.replaces_id, new.origin) == (2, g1_report.id, "countersigned")
    assert Path(new.path).read_bytes() == theirs
    assert new.signer == "Acceptance Service (development)"  # the customer's dev CN here
    assert new.reason.startswith("countersigned by the customer")


def test_a_countersigned_copy_must_extend_our_exact_file(g1_report, customer_cert_pem,
                                                         customer_signer, signer):
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=customer_cert_pem, uploaded_by="cora")
    ours = bytearray(Path(g1_report.path).read_bytes())
    ours[len(ours) // 3] ^= 0x01
    theirs = sign_pdf(bytes(ours), signer=customer_signer,
                      field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None)
    with pytest.raises(ReportRefused, match="not an incremental update of version 1"):
        countersigned_store(report=g1_report, data=theirs, uploaded_by="cora")
    assert Report.objects.count() == 1


def test_a_countersignature_by_an_unregistered_key_is_refused(g1_report, customer_signer,
                                                              tmp_path):
    from asn1crypto import pem

    from reports.signing import ensure_dev_signer, load_signer

    ensure_dev_signer(tmp_path / "someone")
    someone = load_signer(signing_dir=tmp_path / "someone").signing_cert
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=pem.armor("CERTIFICATE", someone.dump()), uploaded_by="x")
    theirs = sign_pdf(Path(g1_report.path).read_bytes(), signer=customer_signer,
                      field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None)
    with pytest.raises(ReportRefused, match="does not validate.*not trusted"):
        countersigned_store(report=g1_report, data=theirs, uploaded_by="cora")
    assert Report.objects.count() == 1


def test_a_countersignature_needs_a_registered_certificate(g1_report, customer_signer):
    theirs = sign_pdf(Path(g1_report.path).read_bytes(), signer=customer_signer,
                      field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None)
    with pytest.raises(ReportRefused, match="no customer certificate is registered"):
        countersigned_store(report=g1_report, data=theirs, uploaded_by="cora")


def test_it_never_stores_a_private_key(acme, customer_dir):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    key, cert, _ = pkcs12.load_key_and_certificates(
        (customer_dir / "signer.p12").read_bytes(), (customer_dir / "signer.pass").read_bytes())
    bundle = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    with pytest.raises(ReportRefused, match="contains a private key"):
        customer_certificate_add(engagement=acme, pem=bundle, uploaded_by="cora")
    with pytest.raises(ReportRefused, match="not an X.509 certificate"):
        customer_certificate_add(engagement=acme, pem=b"hello", uploaded_by="cora")
    assert not CustomerCertificate.objects.exists()


# --- pages -------------------------------------------------------------------------------------


def test_the_pages_sign_off_log_downloads_and_show_the_log_to_the_pm(client, g1_report, people):
    page = reverse("engagement-reports", args=["acme-1"])
    client.force_login(people["customer"])
    body = client.get(page).content.decode()
    assert "Approve this decision" in body and "Download log" not in body
    response = client.post(reverse("report-signoff", args=[g1_report.id]),
                           {"comment": "fine by us"}, follow=True)
    assert response.status_code == 200
    assert "other party" in response.content.decode()
    download = client.get(reverse("report-download", args=[g1_report.id]))
    assert download.status_code == 200
    b"".join(download.streaming_content)

    client.force_login(people["pm"])
    response = client.post(reverse("report-signoff", args=[g1_report.id]), {"comment": ""},
                           follow=True)
    text = response.content.decode()
    assert "version 2 with the sign-off page filled was issued" in text
    assert "Download log" in text and "cora-customer" in text
    (logged,) = ReportDownload.objects.all()
    assert (logged.username, logged.via, logged.report_id) == ("cora-customer", "web",
                                                               g1_report.id)
    assert Report.objects.filter(engagement=g1_report.engagement).count() == 2


def test_the_verify_page_lists_each_signature(client, g1_report, people, customer_cert_pem,
                                              customer_signer):
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=customer_cert_pem, uploaded_by="cora")
    theirs = sign_pdf(Path(g1_report.path).read_bytes(), signer=customer_signer,
                      field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None)
    client.force_login(people["customer"])
    upload = io.BytesIO(theirs)
    upload.name = "countersigned.pdf"
    text = client.post(reverse("report-verify"), {"pdf": upload}).content.decode()
    assert "Genuine" in text
    assert "AcceptanceSignature" in text and "CustomerSignature" in text
    assert "embedded evidence matches" in text


# --- the API -----------------------------------------------------------------------------------


def _api(user=None):
    from rest_framework.test import APIClient

    from acceptance.tokens import api_token_create

    client = APIClient()
    if user is not None:
        _, key = api_token_create(user=user, name="test")
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_api_signs_off_lists_versions_and_logs_downloads(g1_report, people):
    base = f"/api/reports/{g1_report.id}"
    assert _api().post(f"{base}/signoffs/", {"comment": "x"}).status_code == 401
    assert _api(people["other"]).post(f"{base}/signoffs/", {}).status_code == 404
    assert _api(people["engineer"]).post(f"{base}/signoffs/", {}).status_code == 403
    assert not SignOff.objects.exists()

    first = _api(people["customer"]).post(f"{base}/signoffs/", {"comment": "ok"}, format="json")
    assert first.status_code == 201, first.content
    assert first.json()["party"] == "customer" and "X-New-Report" not in first
    again = _api(people["customer"]).post(f"{base}/signoffs/", {}, format="json")
    assert again.status_code == 409
    second = _api(people["pm"]).post(f"{base}/signoffs/", {"comment": "go"}, format="json")
    assert second.status_code == 201
    new_id = int(second["X-New-Report"])

    versions = _api(people["customer"]).get(f"{base}/versions/").json()
    assert [(v["version"], v["replaces"], v["signoff_complete"]) for v in versions] == [
        (1, None, False), (2, g1_report.id, True)]
    assert versions[1]["id"] == new_id and versions[1]["gate"] == "G1"
    signoffs = _api(people["engineer"]).get(f"/api/reports/{new_id}/signoffs/").json()
    assert [s["party"] for s in signoffs] == ["customer", "vendor"]

    download = _api(people["customer"]).get(f"/api/reports/{new_id}/download/")
    assert download.status_code == 200 and download.content.startswith(b"%PDF-")
    assert _api(people["customer"]).get(f"/api/reports/{new_id}/downloads/").status_code == 403
    log = _api(people["pm"]).get(f"/api/reports/{new_id}/downloads/").json()
    assert [(d["username"], d["via"]) for d in log] == [("cora-customer", "api")]
    listed = _api(people["other"]).get("/api/reports/").json()
    assert listed["count"] == 0


def test_the_api_accepts_a_countersigned_copy_and_refuses_a_forged_one(g1_report, people,
                                                                      customer_cert_pem,
                                                                      customer_signer):
    customer_certificate_add(engagement=g1_report.engagement,
                             pem=customer_cert_pem, uploaded_by="cora")
    ours = Path(g1_report.path).read_bytes()
    url = f"/api/reports/{g1_report.id}/countersigned/"
    forged = io.BytesIO(ours + b"\n% not a signature\n")
    forged.name = "forged.pdf"
    response = _api(people["customer"]).post(url, {"pdf": forged}, format="multipart")
    assert response.status_code == 400
    assert "does not validate" in response.json()["pdf"][0]
    good = io.BytesIO(sign_pdf(ours, signer=customer_signer,
                               field_name=CUSTOMER_SIGNATURE_FIELD, timestamper=None))
    good.name = "countersigned.pdf"
    assert _api(people["engineer"]).post(url, {"pdf": good}, format="multipart"
                                         ).status_code == 403
    good.seek(0)
    response = _api(people["customer"]).post(url, {"pdf": good}, format="multipart")
    assert response.status_code == 201, response.content
    assert (response.json()["version"], response.json()["origin"]) == (2, "countersigned")


def test_the_signed_off_version_names_both_parties_in_chinese(acme, people, tmp_path):
    import os
    import shutil

    from tests.reports.conftest import pdftotext

    acme.report_language = "zh-hans"
    acme.save(update_fields=["report_language"])
    decision = decide(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    first = report_issue(decision=decision)
    assert "等待签字确认" in pdftotext(Path(first.path))
    signoff_record(report=first, user=people["customer"], comment="同意停止")
    _, new = signoff_record(report=first, user=people["pm"], comment="23 drives")
    text = " ".join(pdftotext(Path(new.path)).split())
    assert '<html lang="zh-CN">' not in text  # (sanity: text, not HTML)
    assert "本报告中的决定已由双方在验收服务中批准" in text
    assert "Pat Lee" in text and "cora-customer" in text and "同意停止" in text
    assert "客户代表（ACME）" in text and "项目经理（供应商）" in text
    assert "取代 version 1 (sha256" in text
    if os.environ.get("REPORTS_LOOK_DIR"):
        shutil.copy(new.path, Path(os.environ["REPORTS_LOOK_DIR"]) / "acme-G1-v2-zh.pdf")
