"""Shared fixtures: one development signer and one rendered report per test session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reports.render import render_gate_report_pdf
from reports.signing import ensure_dev_signer, load_signer, sign_pdf, trust_roots
from tests.reports.samples import g1_stopped


def pdftotext(pdf: Path, page: int | None = None) -> str:
    args = ["pdftotext"]
    if page is not None:
        args += ["-f", str(page), "-l", str(page)]
    return subprocess.run(
        [*args, str(pdf), "-"], check=True, capture_output=True, text=True, timeout=30
    ).stdout


def page_count(pdf: Path) -> int:
    info = subprocess.run(
        ["pdfinfo", str(pdf)], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


@pytest.fixture(scope="session")
def signing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("signing")
    ensure_dev_signer(directory)
    return directory


@pytest.fixture(scope="session")
def signer(signing_dir: Path):
    return load_signer(signing_dir=signing_dir)


@pytest.fixture(scope="session")
def roots(signing_dir: Path):
    return trust_roots(signing_dir=signing_dir)


@pytest.fixture(scope="session")
def g1_pdf() -> bytes:
    return render_gate_report_pdf(g1_stopped())


@pytest.fixture(scope="session")
def signed_g1_pdf(g1_pdf: bytes, signer) -> bytes:
    return sign_pdf(g1_pdf, signer=signer)


@pytest.fixture
def no_configured_signer(settings, signing_dir: Path):
    """Settings that point at the session's development signer and nothing else."""
    settings.REPORT_SIGNING_PKCS12 = ""
    settings.REPORT_SIGNING_PASSPHRASE = ""
    settings.REPORT_TRUST_ROOTS = []
    settings.SIGNING_DIR = signing_dir
    return settings


@pytest.fixture(scope="session")
def customer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The customer's own CA and signing key (a PKCS#12 on their side, never uploaded)."""
    directory = tmp_path_factory.mktemp("customer-signing")
    ensure_dev_signer(directory)
    return directory


@pytest.fixture(scope="session")
def customer_signer(customer_dir: Path):
    return load_signer(signing_dir=customer_dir)


@pytest.fixture(scope="session")
def customer_cert_pem(customer_signer) -> bytes:
    """The customer's public signing certificate (a leaf, not their CA): what they register."""
    from asn1crypto import pem

    return pem.armor("CERTIFICATE", customer_signer.signing_cert.dump())


@pytest.fixture(scope="session")
def customer_trust(customer_signer):
    from reports.signing import CustomerTrust

    return CustomerTrust("ACME", (customer_signer.signing_cert,))


@pytest.fixture(scope="session")
def countersigned_g1_pdf(signed_g1_pdf: bytes, customer_signer) -> bytes:
    from reports.signing import CUSTOMER_SIGNATURE_FIELD

    return sign_pdf(signed_g1_pdf, signer=customer_signer, field_name=CUSTOMER_SIGNATURE_FIELD,
                    reason="customer countersignature", timestamper=None)
