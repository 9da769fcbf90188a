import asyncio
import logging
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from reports.signing import (
    DEV_CA_NAME,
    DEV_SIGNER_NAME,
    SigningSetupError,
    ensure_dev_signer,
    load_signer,
    sign_pdf,
    trust_roots,
    verify_pdf,
)


def _flip_inside_a_stream(signed: bytes, original_length: int) -> bytes:
    """Change one byte of compressed page content in the middle of the signed revision."""
    start = signed.index(b"stream", original_length // 2) + len(b"stream\n") + 16
    assert start < original_length
    tampered = bytearray(signed)
    tampered[start] ^= 0x01
    return bytes(tampered)


# --- the development signer -----------------------------------------------------------------


def test_it_makes_a_dev_ca_and_signer_with_private_file_modes(signing_dir: Path):
    for name in ("ca.pem", "signer.p12", "signer.pass"):
        assert stat.S_IMODE((signing_dir / name).stat().st_mode) == 0o600
    p12_path, passphrase = ensure_dev_signer(signing_dir)
    key, cert, extra = pkcs12.load_key_and_certificates(p12_path.read_bytes(), passphrase)
    ca = x509.load_pem_x509_certificate((signing_dir / "ca.pem").read_bytes())

    def cn(name: x509.Name) -> str:
        return name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value

    assert cn(ca.subject) == DEV_CA_NAME
    assert cn(cert.subject) == DEV_SIGNER_NAME
    assert cert.issuer == ca.subject
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.content_commitment
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert timedelta(days=729) < lifetime < timedelta(days=732)
    cert.verify_directly_issued_by(ca)


def test_it_never_overwrites_an_existing_dev_signer(signing_dir: Path):
    before = {p.name: p.read_bytes() for p in signing_dir.iterdir()}
    p12_path, passphrase = ensure_dev_signer(signing_dir)
    assert p12_path == signing_dir / "signer.p12"
    assert passphrase == (signing_dir / "signer.pass").read_bytes()
    assert {p.name: p.read_bytes() for p in signing_dir.iterdir()} == before


def test_it_refuses_a_half_made_signing_dir(tmp_path: Path):
    (tmp_path / "ca.pem").write_text("left over")
    with pytest.raises(SigningSetupError, match="ca.pem"):
        ensure_dev_signer(tmp_path)
    assert (tmp_path / "ca.pem").read_text() == "left over"


def test_it_loads_a_configured_pkcs12_from_settings(settings, signing_dir: Path):
    settings.REPORT_SIGNING_PKCS12 = str(signing_dir / "signer.p12")
    settings.REPORT_SIGNING_PASSPHRASE = (signing_dir / "signer.pass").read_text()
    settings.SIGNING_DIR = signing_dir / "not-used"
    signer = load_signer()
    assert signer.signing_cert.subject.native["common_name"] == DEV_SIGNER_NAME
    assert not (signing_dir / "not-used").exists()


def test_it_explains_a_wrong_passphrase(signing_dir: Path):
    with pytest.raises(SigningSetupError, match="wrong passphrase"):
        load_signer(pkcs12_path=signing_dir / "signer.p12", passphrase="nope")


def test_it_takes_trust_roots_from_settings(settings, signing_dir: Path):
    settings.REPORT_TRUST_ROOTS = [str(signing_dir / "ca.pem")]
    (root,) = trust_roots(signing_dir=Path("/nonexistent"))
    assert root.subject.native["common_name"] == DEV_CA_NAME


# --- signing and verifying ------------------------------------------------------------------


def test_it_verifies_a_signed_report(signed_g1_pdf: bytes, roots):
    result = verify_pdf(signed_g1_pdf, roots=roots)
    assert result.valid and result.intact and result.trusted
    assert result.signer == DEV_SIGNER_NAME
    assert result.signed_at is not None
    assert abs(datetime.now(UTC) - result.signed_at) < timedelta(minutes=1)
    assert result.summary.startswith("signature intact and trusted; signed by " + DEV_SIGNER_NAME)
    assert "; covers whole document; " in result.summary
    assert result.summary.endswith("embedded evidence matches: 6 raw outputs hash to the summary")
    assert result.error == ""
    assert not result.modified_after_signing
    (only,) = result.signatures
    assert (only.field, only.signer, only.whole_file, only.timestamp) == (
        "AcceptanceSignature", DEV_SIGNER_NAME, True, None)


def test_it_signs_with_the_configured_dev_signer_by_default(
    g1_pdf: bytes, no_configured_signer, roots
):
    assert verify_pdf(sign_pdf(g1_pdf), roots=roots).valid


def test_it_detects_one_changed_byte(signed_g1_pdf: bytes, g1_pdf: bytes, roots):
    result = verify_pdf(_flip_inside_a_stream(signed_g1_pdf, len(g1_pdf)), roots=roots)
    assert not result.valid
    assert not result.intact
    assert "changed after signing" in result.summary


def test_it_rejects_an_unsigned_report(g1_pdf: bytes, roots):
    result = verify_pdf(g1_pdf, roots=roots)
    assert not result.valid
    assert result.summary == "the document carries no signature"


@pytest.mark.parametrize("data", [b"", b"garbage", b"%PDF-1.7\n\x00\x01 nothing else"])
def test_it_rejects_garbage_without_raising(data: bytes, roots):
    result = verify_pdf(data, roots=roots)
    assert not result.valid
    assert result.summary


def test_it_rejects_content_appended_after_signing(signed_g1_pdf: bytes, roots):
    result = verify_pdf(signed_g1_pdf + b"\n%%appended\n", roots=roots)
    assert result.intact and not result.valid
    assert "whole document" in result.summary


def test_it_rejects_a_signer_outside_the_trust_roots(
    signed_g1_pdf: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd
):
    ensure_dev_signer(tmp_path)  # a different development CA
    caplog.set_level(logging.DEBUG)
    result = verify_pdf(signed_g1_pdf, roots=trust_roots(signing_dir=tmp_path))
    assert result.intact and not result.trusted and not result.valid
    assert "not trusted" in result.summary
    # pyHanko's traceback for the missing trust path stays out of the logs and the terminal
    assert not [r for r in caplog.records if r.name.startswith("pyhanko")]
    assert "Traceback" not in capfd.readouterr().err


def test_it_signs_and_verifies_inside_a_running_event_loop(g1_pdf: bytes, signer, roots):
    async def in_loop():
        signed = sign_pdf(g1_pdf, signer=signer)
        return verify_pdf(signed, roots=roots)

    assert asyncio.run(in_loop()).valid


def test_poppler_sees_the_signature(signed_g1_pdf: bytes, tmp_path: Path):
    path = tmp_path / "signed.pdf"
    path.write_bytes(signed_g1_pdf)
    out = subprocess.run(["pdfsig", str(path)], capture_output=True, text=True, timeout=30).stdout
    assert "Signature #1" in out
    assert "AcceptanceSignature" in out
    assert DEV_SIGNER_NAME in out
    assert "Signature is Valid" in out
    assert "Total document signed" in out
