"""Sign gate-report PDFs and check their signatures (pyHanko).

Production configures a PKCS#12 signing identity and its trust roots in settings; without one,
a development CA and signing certificate are made under SIGNING_DIR on first use. Every function
also takes explicit paths so tests and tools can work in their own directories.

pyHanko's synchronous API calls ``asyncio.run()``, which fails inside a running event loop
(PLATFORM gotcha 10): such calls are moved to a worker thread here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import TypeVar

from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from acceptance_core.pdf import ReportUnreadable, load_roots
from reports.evidence import evidence_check
from reports.trust import CUSTOMER_SIGNATURE_FIELD as CUSTOMER_SIGNATURE_FIELD
from reports.trust import (
    MAX_SIGNATURES,
    NOT_CHECKABLE,
    CustomerResolver,
    CustomerTrust,
    changes_after,
    countersignature_refusal,
    named_changes,
    pdf_structure_problem,
    revision_bytes,
    widget_problem,
)

DEV_CA_NAME = "Acceptance Service Development CA"
DEV_SIGNER_NAME = "Acceptance Service (development)"
SIGNATURE_FIELD = "AcceptanceSignature"

CA_FILE = "ca.pem"
P12_FILE = "signer.p12"
PASS_FILE = "signer.pass"  # noqa: S105 - a file name, not a password

_QUIET_LOGGERS = ("pyhanko", "pyhanko_certvalidator")

T = TypeVar("T")


class SigningSetupError(RuntimeError):
    """The signing identity or the trust roots cannot be loaded."""


# --- development signer -------------------------------------------------------------------


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600; fail rather than overwrite."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def _dir_lock(directory: Path) -> Iterator[None]:
    # Two workers may reach first use together; only one may make the keys.
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acceptance service (development)"),
        ]
    )


def _make_dev_identity(passphrase: bytes) -> tuple[bytes, bytes]:
    """A fresh development CA and a signing certificate it issued: (ca PEM, signer PKCS#12)."""
    now = datetime.now(UTC)
    not_before = now - timedelta(minutes=5)  # tolerate small clock differences between hosts

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    ca_name = _name(DEV_CA_NAME)
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + timedelta(days=5 * 365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(DEV_SIGNER_NAME))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(now + timedelta(days=2 * 365))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=True,  # nonRepudiation
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    p12 = pkcs12.serialize_key_and_certificates(
        name=DEV_SIGNER_NAME.encode(),
        key=key,
        cert=cert,
        cas=[ca_cert],
        encryption_algorithm=serialization.BestAvailableEncryption(passphrase),
    )
    return ca_cert.public_bytes(serialization.Encoding.PEM), p12


def ensure_dev_signer(signing_dir: Path) -> tuple[Path, bytes]:
    """Make the development CA and signer in ``signing_dir`` once; return (p12 path, passphrase).

    Existing files are never overwritten: a half-made directory is reported, not repaired.
    """
    signing_dir = Path(signing_dir)
    signing_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_path, p12_path, pass_path = (signing_dir / n for n in (CA_FILE, P12_FILE, PASS_FILE))
    with _dir_lock(signing_dir):
        present = [p for p in (ca_path, p12_path, pass_path) if p.exists()]
        if len(present) == 3:
            return p12_path, pass_path.read_bytes().strip()
        if present:
            names = ", ".join(p.name for p in present)
            raise SigningSetupError(
                f"{signing_dir} holds {names} but not the whole development signer "
                f"({CA_FILE}, {P12_FILE}, {PASS_FILE}); move it aside to make a new one"
            )
        passphrase = secrets.token_urlsafe(32).encode()
        ca_pem, p12 = _make_dev_identity(passphrase)
        _write_new(ca_path, ca_pem)
        _write_new(pass_path, passphrase)
        _write_new(p12_path, p12)
    return p12_path, passphrase


# --- loading the signer and the trust roots ------------------------------------------------


def _settings_value(name: str, default: object) -> object:
    from django.conf import settings

    return getattr(settings, name, default)


def signer_source(pkcs12_path, passphrase, signing_dir) -> tuple[Path | str, bytes | None]:
    """The PKCS#12 file and passphrase ``load_signer`` reads (see there)."""
    configured = str(_settings_value("REPORT_SIGNING_PKCS12", "") or "")
    if pkcs12_path is None and configured:
        pkcs12_path, passphrase = configured, _settings_value("REPORT_SIGNING_PASSPHRASE", "")
    elif pkcs12_path is None:
        dev_dir = signing_dir or Path(str(_settings_value("SIGNING_DIR", "")))
        pkcs12_path, passphrase = ensure_dev_signer(dev_dir)
    return pkcs12_path, (str(passphrase or "").encode() if isinstance(passphrase, str | None)
                         else passphrase)


def load_signer(
    *,
    pkcs12_path: Path | str | None = None,
    passphrase: bytes | str | None = None,
    signing_dir: Path | None = None,
):
    """The pyHanko ``SimpleSigner``: an explicit PKCS#12, else settings, else the dev signer."""
    from pyhanko.sign import signers

    pkcs12_path, passphrase = signer_source(pkcs12_path, passphrase, signing_dir)
    try:
        data = Path(pkcs12_path).read_bytes()
    except OSError as e:
        raise SigningSetupError(f"cannot read signing key {pkcs12_path}: {e.strerror}") from e
    try:
        return signers.SimpleSigner.load_pkcs12_data(
            data, other_certs=[], passphrase=passphrase or None
        )
    except ValueError as e:
        raise SigningSetupError(
            f"cannot load signing key {pkcs12_path}: wrong passphrase or not a PKCS#12 file"
        ) from e


def trust_roots(
    *, paths: Sequence[Path | str] | None = None, signing_dir: Path | None = None
) -> list[asn1_x509.Certificate]:
    """Certificates a report signature must chain to: explicit paths, settings, or the dev CA.
    A file that cannot be read or holds no certificate raises SigningSetupError naming it."""
    if paths is None:
        paths = list(_settings_value("REPORT_TRUST_ROOTS", []) or [])  # type: ignore[call-overload]
    if not paths:
        dev_dir = signing_dir or Path(str(_settings_value("SIGNING_DIR", "")))
        ca_path = Path(dev_dir) / CA_FILE
        # No development CA yet means nothing was signed by it: trust nothing.
        paths = [ca_path] if ca_path.exists() else []
    try:
        return load_roots([str(p) for p in paths])
    except ReportUnreadable as e:
        raise SigningSetupError(str(e)) from e


def tsa_trust_roots(*, paths: Sequence[Path | str] | None = None) -> list[asn1_x509.Certificate]:
    """Roots a timestamp token may chain to: explicit paths or ``SIGNING_TSA_TRUST_ROOTS``."""
    if paths is None:
        paths = list(_settings_value("SIGNING_TSA_TRUST_ROOTS", []) or [])  # type: ignore[call-overload]
    try:
        return load_roots([str(p) for p in paths])
    except ReportUnreadable as e:
        raise SigningSetupError(f"timestamp authority: {e}") from e


# --- signing and verifying -----------------------------------------------------------------


def _call_sync(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """Call a pyHanko sync API; in a worker thread when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args, **kwargs)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyhanko") as pool:
        return pool.submit(fn, *args, **kwargs).result()


@contextlib.contextmanager
def _quiet_pyhanko() -> Iterator[None]:
    # pyHanko logs a traceback at WARNING when no trust path can be built; for a verifier
    # that is an expected answer, reported in the result instead.
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def tsa_timestamper():
    """The timestamp authority of ``SIGNING_TSA_URL`` (RFC 3161 over HTTP), or None when unset."""
    url = str(_settings_value("SIGNING_TSA_URL", "") or "")
    if not url:
        return None
    from pyhanko.sign.timestamps.requests_client import RequestsHTTPTimeStamper

    return RequestsHTTPTimeStamper(url, timeout=float(_settings_value("SIGNING_TSA_TIMEOUT_S", 10)))


def _sign(pdf: bytes, signer, reason: str, location: str, field_name: str, timestamper) -> bytes:
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers

    writer = IncrementalPdfFileWriter(BytesIO(pdf), strict=False)
    meta = signers.PdfSignatureMetadata(
        field_name=field_name,
        reason=reason,
        location=location,
        subfilter=fields.SigSeedSubFilter.PADES,
        md_algorithm="sha256",
    )
    out = signers.sign_pdf(writer, meta, signer=signer, timestamper=timestamper)
    return out.getvalue()


_DEFAULT = object()


def sign_pdf(
    pdf: bytes,
    *,
    signer=None,
    reason: str = "Gate decision",
    location: str = "acceptance service",
    field_name: str = SIGNATURE_FIELD,
    timestamper=_DEFAULT,
) -> bytes:
    """``pdf`` with an invisible PAdES signature in the field ``field_name`` appended as an
    incremental update (earlier signatures stay valid). ``timestamper`` defaults to the TSA of
    ``SIGNING_TSA_URL`` (none when unset). Raises SigningSetupError for a bad signing identity
    and pyHanko's errors for an unreadable PDF or an unreachable TSA."""
    if signer is None:
        signer = load_signer()
    if timestamper is _DEFAULT:
        timestamper = tsa_timestamper()
    return _call_sync(_sign, pdf, signer, reason, location, field_name, timestamper)


@dataclass(frozen=True)
class SignatureInfo:
    """One signature of a document, oldest first."""

    field: str
    signer: str
    signed_at: datetime | None  # as reported by the signer
    timestamp: datetime | None  # from a timestamp authority's token, when there is one
    timestamp_ok: bool | None  # the token is intact and its TSA trusted (None: no token)
    intact: bool
    trusted: bool
    whole_file: bool  # covers the whole file as it is now
    later_changes: str  # "" when none; else what was appended after this signature
    later_changes_allowed: bool  # only further signatures were added after it
    problem: str  # "" when this signature is fine
    party: str = "untrusted"  # "vendor", "customer ORG" or "untrusted": whose root it chains to

    @property
    def ok(self) -> bool:
        return not self.problem


@dataclass(frozen=True)
class VerificationResult:
    """What a person needs to know about a report's signatures and embedded evidence."""

    intact: bool  # every signature's signed bytes are unchanged and cryptographically sound
    trusted: bool  # every signer's certificate chains to one of the trust roots
    valid: bool  # intact, trusted, nothing but signatures appended, evidence matches
    signer: str  # subject CN of the newest signature's certificate, "" if none
    signed_at: datetime | None  # as reported by the newest signer
    summary: str  # one line for people
    error: str = ""  # why not valid, "" when valid
    signatures: tuple[SignatureInfo, ...] = ()
    modified_after_signing: bool = False
    evidence: object = None  # reports.evidence.EvidenceCheck, None when not checked

    @property
    def vendor_signer(self) -> str:
        return self.signatures[0].signer if self.signatures else ""


def _not_valid(reason: str, **known: object) -> VerificationResult:
    fields_ = {"intact": False, "trusted": False, "signer": "", "signed_at": None} | known
    return VerificationResult(valid=False, summary=reason, error=reason, **fields_)  # type: ignore[arg-type]


def _common_name(cert: asn1_x509.Certificate) -> str:
    name = cert.subject.native
    return str(name.get("common_name") or cert.subject.human_friendly)


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "?"


def _one_signature(embedded, context, ts_context, is_last: bool, party: str,
                   pinned: tuple[asn1_x509.Certificate, ...] = (),
                   refused: str = "") -> SignatureInfo:
    from pyhanko.sign.validation import SignatureCoverageLevel, validate_pdf_signature

    status = validate_pdf_signature(embedded, context, ts_validation_context=ts_context)
    signer = _common_name(status.signing_cert)
    signed_at = status.signer_reported_dt or embedded.self_reported_timestamp
    intact = bool(status.intact and status.valid)
    trusted = bool(status.trusted) and not refused
    if trusted and pinned:
        # a registered customer certificate vouches for itself only, never for what it issued
        trusted = status.signing_cert.sha256 in {c.sha256 for c in pinned}
        refused = "" if trusted else "it was not made with a registered customer certificate"
    whole = status.coverage == SignatureCoverageLevel.ENTIRE_FILE
    ts = status.timestamp_validity
    timestamp = ts.timestamp if ts is not None else None
    timestamp_ok = None if ts is None else bool(ts.intact and ts.valid and ts.trusted)
    level = status.modification_level
    later, allowed = "", True
    if not whole:
        name = level.name.lower().replace("_", " ") if level is not None else "unknown"
        if status.coverage != SignatureCoverageLevel.ENTIRE_REVISION:
            later, allowed = "the signature does not cover its whole revision", False
        elif is_last:
            # nothing signed what follows this signature: whatever it is, it is unsigned
            later, allowed = f"an unsigned incremental update follows ({name})", False
        elif status.docmdp_ok is False:
            later, allowed = f"content was changed after signing ({name})", False
        else:
            later = changes_after(embedded, level)
            later, allowed = (later, False) if later else (
                "later signatures were added (allowed)", True)
    problems = []
    if not intact:
        # pyHanko does not judge the chain of a broken signature: say only what is known.
        problems.append("the document was changed after signing (signature does not match)")
    elif refused.startswith(NOT_CHECKABLE):
        problems.append(f"the countersignature by {signer!r} {refused} (not valid until then)")
    elif refused:
        problems.append(f"signer {signer!r} is not trusted: {refused}")
    elif not trusted:
        indication = status.trust_problem_indic
        why = f" ({indication.name.lower().replace('_', ' ')})" if indication else ""
        problems.append(f"signer {signer!r} is not trusted by the {party}'s roots{why}")
    if not whole and (is_last or not allowed):
        problems.append(
            "the signature does not cover the whole document (content was added"
            + (f": {later})" if later and not allowed else ")"))
    if timestamp_ok is False:
        problems.append("its timestamp token does not validate")
    return SignatureInfo(
        field=embedded.field_name, signer=signer, signed_at=signed_at, timestamp=timestamp,
        timestamp_ok=timestamp_ok, intact=intact, trusted=trusted, whole_file=whole,
        later_changes=later, later_changes_allowed=allowed, problem="; ".join(problems),
        party=party if intact and trusted else "untrusted",
    )


def _customer_of(data: bytes, vendor, customer) -> CustomerTrust | None:
    if customer is None or isinstance(customer, CustomerTrust):
        return customer
    return customer(revision_bytes(data, vendor))


def _check_one(data: bytes, i: int, embedded: list, infos: list, roots, tsa_roots,
               customer) -> SignatureInfo:
    """Signature ``i`` against its own party's roots: the first is the vendor's (vendor roots
    only); the second, in the customer's field, after a genuine vendor signature, the
    customer's registered certificates only; anything else is trusted by nobody."""
    from pyhanko_certvalidator import ValidationContext

    sig, is_last = embedded[i], i == len(embedded) - 1
    if i == 0:
        context = ValidationContext(trust_roots=roots, allow_fetching=False)
        # a timestamp token chains to a TSA root, never trusted for document signatures
        ts = ValidationContext(trust_roots=roots + tsa_roots, allow_fetching=False)
        info = _one_signature(sig, context, ts, is_last, "vendor")
        if info.intact and not info.later_changes_allowed:
            names = named_changes(revision_bytes(data, sig), sig.reader)
            if names:
                later = f"{info.later_changes}: {'; '.join(names)}"
                info = dataclasses.replace(info, later_changes=later,
                                           problem=info.problem.replace(info.later_changes,
                                                                        later))
        return info
    genuine = infos[0].intact and infos[0].trusted
    trust = _customer_of(data, embedded[0], customer) if genuine and i == 1 else None
    refused = countersignature_refusal(sig, i, embedded[0], genuine, trust)
    anchors = list(trust.certificates) if trust is not None and not refused else []
    context = ValidationContext(trust_roots=anchors, allow_fetching=False)
    # the customer's certificate vouches for their signature, never for a timestamp
    ts = ValidationContext(trust_roots=list(tsa_roots), allow_fetching=False)
    party = f"customer {trust.name}" if trust is not None else "customer"
    return _one_signature(sig, context, ts, is_last, party, pinned=tuple(anchors),
                          refused=refused)


def _validate(data: bytes, roots: list[asn1_x509.Certificate],
              tsa_roots: list[asn1_x509.Certificate], check_evidence: bool,
              customer) -> VerificationResult:
    from pyhanko.pdf_utils.reader import PdfFileReader

    problem = pdf_structure_problem(data)
    if problem:
        return _not_valid(problem)
    try:
        reader = PdfFileReader(BytesIO(data), strict=False)
        embedded = list(reader.embedded_signatures)
    except Exception as e:
        return _not_valid(f"cannot read the PDF: {e}")
    if not embedded:
        return _not_valid("the document carries no signature")
    if len(embedded) > MAX_SIGNATURES:
        return _not_valid(f"the document carries {len(embedded)} signatures; a report has at "
                          f"most the vendor's and the customer's")
    embedded.sort(key=lambda sig: sig.signed_revision)

    infos: list[SignatureInfo] = []
    for i, sig in enumerate(embedded):
        try:
            infos.append(_check_one(data, i, embedded, infos, roots, tsa_roots, customer))
        except Exception as e:
            return _not_valid(f"signature {sig.field_name!r} cannot be checked: {e}")

    evidence = None
    if check_evidence:
        evidence = evidence_check(data)
    newest = infos[-1]
    intact = all(i.intact for i in infos)
    trusted = all(i.trusted for i in infos)
    modified = not intact or not newest.whole_file or any(
        not i.later_changes_allowed for i in infos) or any(
        widget_problem(sig) for sig in embedded[1:])
    problems = [f"{i.field} ({i.signer}): {i.problem}" if len(infos) > 1 else i.problem
                for i in infos if i.problem]
    if evidence is not None and not evidence.ok:
        problems.append(f"embedded evidence: {evidence.summary}")
    signers_text = "; ".join(f"signed by {i.signer} at {_when(i.signed_at)}"
                             + (f" (timestamp {_when(i.timestamp)})" if i.timestamp else "")
                             + f" as {i.party}" for i in infos)
    common = {"intact": intact, "trusted": trusted, "signer": newest.signer,
              "signed_at": newest.signed_at, "signatures": tuple(infos),
              "modified_after_signing": modified, "evidence": evidence}
    if problems:
        reason = "; ".join(problems)
        return VerificationResult(valid=False, summary=reason, error=reason, **common)
    noun = "signature" if len(infos) == 1 else f"{len(infos)} signatures"
    summary = f"{noun} intact and trusted; {signers_text}; covers whole document"
    if evidence is not None:
        summary += f"; {evidence.summary}"
    return VerificationResult(valid=True, summary=summary, **common)


def verify_pdf(
    data: bytes,
    *,
    roots: Sequence[asn1_x509.Certificate] | None = None,
    customer: CustomerTrust | CustomerResolver | None = None,
    tsa_roots: Sequence[asn1_x509.Certificate] | None = None,
    check_evidence: bool = True,
) -> VerificationResult:
    """Check a report's signatures, each against its own party: the vendor's (the first)
    against ``roots`` only (default: ``trust_roots()``); a countersignature in the field
    ``CUSTOMER_SIGNATURE_FIELD`` after a genuine vendor signature against ``customer`` only
    (its registered certificates, or a resolver given the vendor's signed revision), and only
    when it is invisible and nothing else changed after the vendor's signature. Timestamp
    tokens are checked against ``tsa_roots`` (default: ``SIGNING_TSA_TRUST_ROOTS``), the
    embedded evidence against the embedded summary. Never raises: every problem is in the
    result."""
    try:
        root_list = list(roots) if roots is not None else trust_roots()
        tsa_list = list(tsa_roots) if tsa_roots is not None else tsa_trust_roots()
    except SigningSetupError as e:
        return _not_valid(str(e))
    try:
        with _quiet_pyhanko():
            return _call_sync(_validate, data, root_list, tsa_list, check_evidence, customer)
    except Exception as e:  # a verifier answers; it does not crash on hostile input
        return _not_valid(f"signature cannot be checked: {type(e).__name__}: {e}")
