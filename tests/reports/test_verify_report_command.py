from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from reports.signing import DEV_SIGNER_NAME


def _verify(path: Path, *args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("verify_report", str(path), *args, stdout=out)
    except SystemExit as e:
        return int(e.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.fixture
def signed_file(signed_g1_pdf: bytes, tmp_path: Path) -> Path:
    path = tmp_path / "G1-signed.pdf"
    path.write_bytes(signed_g1_pdf)
    return path


def test_it_accepts_a_valid_report(signed_file: Path, no_configured_signer):
    code, out = _verify(signed_file)
    assert code == 0
    assert out.startswith(f"valid: signature intact and trusted; signed by {DEV_SIGNER_NAME} at ")
    assert "covers whole document; embedded evidence matches: 6 raw outputs" in out


def test_it_rejects_a_changed_report(signed_file: Path, no_configured_signer):
    data = bytearray(signed_file.read_bytes())
    data[len(data) // 3] ^= 0x01
    signed_file.write_bytes(bytes(data))
    code, out = _verify(signed_file)
    assert code == 1
    assert out.startswith("NOT valid: ")


def test_it_rejects_a_report_from_an_untrusted_signer(
    signed_file: Path, no_configured_signer, tmp_path: Path
):
    from reports.signing import ensure_dev_signer

    ensure_dev_signer(tmp_path / "other")
    code, out = _verify(signed_file, "--trust-root", str(tmp_path / "other" / "ca.pem"))
    assert code == 1
    assert "not trusted" in out


def test_it_reports_a_missing_file(tmp_path: Path, no_configured_signer):
    missing = tmp_path / "nope.pdf"
    code, out = _verify(missing)
    assert code == 1
    assert out.startswith(f"NOT valid: cannot read {missing}: ")
