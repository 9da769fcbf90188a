"""Trust per party in the auditor's verifier (``python -m acceptance_core redecide``) and in the
service: the vendor's signature is trusted only against the vendor's roots (``--trust``), the
customer's countersignature only against the customer's (``--customer-trust``; in the service,
the engagement's registered certificates). Real certificates made with ``cryptography``, real
pyHanko signatures, a real signed lab report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from weasyprint import Attachment

from acceptance_core.__main__ import main, redecide_file
from acceptance_core.pdf import embedded, load_roots
from reports.evidence import SUMMARY_NAME
from reports.render import render_html_pdf
from reports.signing import CUSTOMER_SIGNATURE_FIELD, load_signer, sign_pdf
from tests.reports.test_redecide import ca_path, report_of
from tests.reports.test_trust import _SIGNING_USAGE, _cert, _pem, _sign, _signer
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow

CA_USAGE = {"key_cert_sign": True, "crl_sign": True}


def _party(name: str, org: str) -> dict:
    """A party's root CA and a signing leaf it issued: {"ca", "cert", "signer"}."""
    ca = _cert(f"{name} Root CA", ca=True, usage=CA_USAGE, org=org)
    key, cert = _cert(name, issuer=ca, usage=_SIGNING_USAGE, org=org)
    return {"ca": ca, "cert": cert, "signer": _signer(key, cert, ca[1])}


def _resigned(data: bytes, signer) -> bytes:
    """The report's evidence rendered again and signed in the vendor's field by ``signer``."""
    summary, files = embedded(data)
    pdf = render_html_pdf("<html><body><p>report</p></body></html>", attachments=[
        Attachment(file_obj=io.BytesIO(content), name=name, relationship="Data")
        for name, content in files.items()])
    return sign_pdf(pdf, signer=signer, timestamper=None)


def _check(data: bytes, tmp_path: Path, trust: list[Path], customer: list[Path] = ()
           ) -> tuple[int, str]:
    out = io.StringIO()
    status = redecide_file(data, load_roots([str(p) for p in trust]), out,
                           load_roots([str(p) for p in customer]))
    return status, out.getvalue()


def _file(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_each_signature_is_trusted_only_against_its_own_partys_roots(lab, tmp_path):
    engagement, _ = lab("missing-drive")
    assert run_gate(engagement.name, "G1")[0] == 1
    original = report_of(engagement, "G1").read_bytes()
    vendor = _party("Vendor Signer", "Vendor")
    customer = _party("Cora Customer", "ACME")
    vendor_ca = _file(tmp_path, "vendor-ca.pem", _pem(vendor["ca"][1]))
    customer_ca = _file(tmp_path, "customer-ca.pem", _pem(customer["ca"][1]))
    report = _resigned(original, vendor["signer"])

    status, out = _check(report, tmp_path, [vendor_ca])
    assert status == 0, out
    assert "vendor signature by " in out and "trusted (vendor's root)" in out

    # the customer's genuine countersignature: trusted only with the customer's root
    countersigned = _sign(report, customer["signer"], CUSTOMER_SIGNATURE_FIELD)
    status, out = _check(countersigned, tmp_path, [vendor_ca], [customer_ca])
    assert status == 0, out
    assert "countersignature by Organization: ACME, Common Name: Cora Customer: trusted " \
        "(customer's root)" in out
    # no customer root: the table is printed, the countersignature is said to be unchecked, 2
    status, out = _check(countersigned, tmp_path, [vendor_ca])
    assert status == 2, out
    assert "Cora Customer: intact, NOT CHECKED (no customer root given)" in out
    assert "decision G1: recorded stopped, recomputed stopped" in out
    assert out.strip().endswith(
        "no customer root given (--customer-trust CUSTOMER-ROOT.pem); the decision above rests "
        "on the vendor's signature")
    # the vendor's root does not vouch for the customer's countersignature
    status, out = _check(countersigned, tmp_path, [vendor_ca], [vendor_ca])
    assert status == 2, out
    assert ("countersignature: signer 'Organization: ACME, Common Name: Cora Customer' is not "
            "trusted by the given roots (the customer's)") in out
    path = _file(tmp_path, "countersigned.pdf", countersigned)
    assert main(["redecide", str(path), "--trust", str(vendor_ca),
                 "--customer-trust", str(customer_ca)]) == 0
    assert main(["redecide", str(path), "--trust", str(vendor_ca)]) == 2

    # a countersignature made with the vendor's key is refused, whatever roots are given
    by_vendor = _sign(report, vendor["signer"], CUSTOMER_SIGNATURE_FIELD)
    for customer_roots in ([], [customer_ca], [vendor_ca]):
        status, out = _check(by_vendor, tmp_path, [vendor_ca], customer_roots)
        assert status == 2, out
        assert ("countersignature (Organization: Vendor, Common Name: Vendor Signer) refused: it "
                "was made with the vendor's key") in out
        assert "REFUSED" in out and "decision G1" not in out
    # ... and so is one made with another key the vendor's CA issued
    key, colleague = _cert("Vendor Colleague", issuer=vendor["ca"], usage=_SIGNING_USAGE,
                           org="Vendor")
    by_colleague = _sign(report, _signer(key, colleague, vendor["ca"][1]),
                         CUSTOMER_SIGNATURE_FIELD)
    status, out = _check(by_colleague, tmp_path, [vendor_ca], [customer_ca])
    assert status == 2, out
    assert "refused: its signer chains to the vendor's root; only the customer countersigns" \
        in out
    # a countersignature outside the customer's field is refused
    elsewhere = _sign(report, customer["signer"], "Approval")
    status, out = _check(elsewhere, tmp_path, [vendor_ca], [customer_ca])
    assert status == 2 and "only one countersignature, in the field 'CustomerSignature'" in out

    # a vendor signature chained to the customer's root is refused, even if that root is
    # (wrongly) given as the vendor's too
    by_customer = _resigned(original, customer["signer"])
    status, out = _check(by_customer, tmp_path, [vendor_ca, customer_ca], [customer_ca])
    assert status == 2, out
    assert ("vendor signature (Organization: ACME, Common Name: Cora Customer) refused: its "
            "signer chains to the customer's root") in out
    status, out = _check(by_customer, tmp_path, [vendor_ca], [customer_ca])
    assert status == 2 and "refused: its signer chains to the customer's root" in out, out
    status, out = _check(by_customer, tmp_path, [vendor_ca])
    assert status == 2 and "is not trusted by the given roots (the vendor's)" in out, out


def test_a_difference_outranks_an_unchecked_countersignature(lab, tmp_path):
    engagement, _ = lab("missing-drive")
    assert run_gate(engagement.name, "G1")[0] == 1
    summary, files = embedded(report_of(engagement, "G1").read_bytes())
    criterion = next(c for c in summary["gates"][0]["redecide"]["criteria"]
                     if c["key"] == "drive-count")
    criterion["recorded"] = {"measured": 24.0, "verdict": "pass"}
    files[SUMMARY_NAME] = json.dumps(summary).encode()
    pdf = render_html_pdf("<html><body><p>report</p></body></html>", attachments=[
        Attachment(file_obj=io.BytesIO(content), name=name, relationship="Data")
        for name, content in files.items()])
    claims = sign_pdf(pdf, signer=load_signer(), timestamper=None)
    customer = _party("Cora Customer", "ACME")
    countersigned = _sign(claims, customer["signer"], CUSTOMER_SIGNATURE_FIELD)
    status, out = _check(countersigned, tmp_path, [Path(ca_path())])
    assert status == 1, out
    assert "DIFFERS: G1 drive-count (drive_count): recorded 24 pass, the evidence gives 23 fail" \
        in out
    assert "NOT CHECKED" in out
