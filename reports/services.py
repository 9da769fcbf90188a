"""Issuing, re-issuing, signing off and countersigning reports.

``report_issue`` builds the report context of a decision (``reports.assembly``), renders it
with WeasyPrint as PDF/A-3b with the evidence embedded, signs it with pyHanko and stores it
under REPORTS_DIR (``reports.storage``: whole or not at all, never overwriting an earlier file),
and in the same transaction settles the decision (its gate moves only with its signed report).
Issuing is idempotent under row locks: two requests at once give one version and one
``ReportRefused``. Every later change makes a new version of the same series naming the one
it replaces:

- ``signoff_record``: the vendor's project manager and a customer of the engagement's
  organisation approve the decision; when both have, a version with the sign-off page filled
  is issued.
- ``final_report_issue``: the final acceptance report of all gates (on request, once every gate
  has a decision or the engagement has stopped at a gate).
- ``countersigned_store``: the customer's countersigned copy of the latest version, accepted
  only as an incremental update of our file adding one invisible signature in the customer's
  field, by a certificate the customer registered, and nothing else.

``report_verify`` answers "is this file genuine?" for the verify page and ``verify_report``
alike: each signature against its own party's trust anchors (``reports.signing``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

from asn1crypto import pem as asn1_pem
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from django.db import IntegrityError, transaction
from django.utils import timezone

from acceptance import events
from acceptance.models import AuditEntry, Engagement
from acceptance.permissions import Role, engagements_for, role_of
from gates.models import Decision
from gates.services import decision_settle
from reports.assembly import (  # report_context etc. re-exported: the doors import them here
    ReportRefused,
    final_report_context,
    final_report_decisions,
    report_context,
)
from reports.context import GateReportContext
from reports.evidence import SUMMARY_NAME, embedded_files
from reports.models import CustomerCertificate, Report, ReportDownload, SignOff
from reports.render import render_gate_report_pdf
from reports.signer import service_signer
from reports.signing import CustomerTrust, VerificationResult, sign_pdf, verify_pdf
from reports.storage import (
    ReportNotWritten,
    files_kept_on_commit,
    report_file_write,
    report_files_sweep,
)
from runners.decision import gate_run_done
from runners.models import GateRun

MAX_COUNTERSIGNED_BYTES = 50 * 1024 * 1024

logger = logging.getLogger(__name__)


# --- storing signed versions ------------------------------------------------------------------


def _file_name(engagement: Engagement, kind: str, about: Decision | None, version: int) -> str:
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S%fZ")
    if kind == Report.Kind.FINAL:
        return f"{engagement.name}-final-v{version}-{stamp}.pdf"
    return (f"{engagement.name}-{about.gate.code}-run{about.gate_run.attempt}-v{version}-"
            f"{stamp}.pdf")


def _write_new(engagement: Engagement, name: str, data: bytes) -> Path:
    return report_file_write(engagement.name, name, data)


def _sign_and_store(build: Callable[[], GateReportContext], *, engagement: Engagement,
                    kind: str, about: Decision | None, decision: Decision | None, version: int,
                    replaces: Report | None, reason: str, issued_by: str,
                    signoff_complete: bool | None = None) -> Report:
    """Render, sign, verify and store one version: the file (whole or not at all,
    ``reports.storage``) and its row together. ``build`` makes the report's context, dropped
    once rendered (a G4 context at site scale holds every collected raw output and figure:
    the verification after signing does not hold it too); ``signoff_complete`` None: the
    context's. Call inside ``files_kept_on_commit`` and a transaction holding the series'
    lock. Raises ReportRefused when the version exists already (issued meanwhile),
    ReportNotWritten when the file could not be written."""
    context = build()
    label = (f"{context.gate_code} decision: {context.decision_outcome}" if kind == "gate"
             else f"final acceptance report: {context.decision_outcome}")
    simulated, outcome = context.simulated, context.decision_outcome
    if signoff_complete is None:
        signoff_complete = context.signoff_complete
    pdf = render_gate_report_pdf(context)
    del context
    signing_started = time.monotonic()
    signed = sign_pdf(pdf, signer=service_signer(), reason=f"{label} (v{version})")
    signing_seconds = time.monotonic() - signing_started
    del pdf
    check = verify_pdf(signed)
    if not check.valid:
        raise RuntimeError(f"the freshly signed report does not verify: {check.summary}")
    with transaction.atomic():
        try:
            with transaction.atomic():
                report = Report.objects.create(
                    engagement=engagement, decision=decision, about=about, kind=kind,
                    version=version, replaces=replaces, reason=reason, issued_by=issued_by,
                    signoff_complete=signoff_complete,
                    path="", sha256=hashlib.sha256(signed).hexdigest(), size_bytes=len(signed),
                    signer=check.signer, signed_at=check.signed_at or timezone.now(),
                    simulated=simulated, signing_seconds=signing_seconds, outcome=outcome,
                )
        except IntegrityError:  # the same version issued meanwhile (the unique constraints)
            raise ReportRefused(f"version {version} of this report was issued meanwhile; "
                                f"nothing was stored") from None
        path = _write_new(engagement, _file_name(engagement, kind, about, version), signed)
        report.path = str(path)
        report.save(update_fields=["path"])
    events.announce(events.report_issued, report_id=report.id)  # notifications
    return report


def report_issue(*, decision: Decision) -> Report:
    """Render, sign and store version 1 of the gate report of ``decision`` (its sign-off page
    "awaiting sign-off") and, in the same transaction, settle the decision: the gate moves
    (``gates.services.decision_settle``) and the run is done. Idempotent: under the decision's
    row lock, a report already issued is returned as it is (a duplicate delivery, recovery
    racing the worker). Raises ReportNotWritten (nothing stored, the gate not moved)."""
    with files_kept_on_commit(), transaction.atomic():
        decision = (Decision.objects.select_for_update(of=("self",))
                    .select_related("gate__engagement", "gate_run").get(pk=decision.pk))
        existing = Report.objects.filter(decision=decision).first()
        if existing is not None:
            return existing
        report = _sign_and_store(lambda: report_context(decision),
                                 engagement=decision.gate.engagement,
                                 kind=Report.Kind.GATE, about=decision, decision=decision,
                                 version=1, replaces=None,
                                 reason="issued when the decision was recorded",
                                 issued_by="service", signoff_complete=False)
        decision_settle(decision=decision)
        gate_run = decision.gate_run
        if gate_run.state == GateRun.State.FAILED:  # an error finished later (recovery)
            AuditEntry.objects.create(
                engagement=decision.gate.engagement, actor="service",
                action="report_recovered",
                reason=f"the signed report of {decision.gate.code} run #{gate_run.attempt} was "
                       f"issued after: {gate_run.error}",
                details={"report": report.pk, "decision": decision.pk,
                         "gate_run": gate_run.pk})
            gate_run.error = ""
        gate_run_done(gate_run=gate_run)
        events.announce(events.signoff_waiting, report_id=report.id,  # notifications
                        parties=[SignOff.Party.VENDOR.value, SignOff.Party.CUSTOMER.value])
    return report


def report_files_recover() -> list[str]:
    """Recovery's step for files: unfinished report files a killed writer left are removed, a
    signed file no row names is moved aside (``reports.storage.report_files_sweep``)."""
    return report_files_sweep(known_paths=Report.objects.values_list("path", flat=True))


def latest_version(report: Report) -> Report:
    return report.series().last()


def _version_text(report: Report) -> str:
    return f"version {report.version} (sha256 {report.sha256[:16]}…)"


def report_reissue(*, report: Report, reason: str, issued_by: str) -> Report:
    """A new signed version of ``report``'s series, naming the latest version it replaces; its
    sign-off page shows every sign-off recorded in the series. Raises ReportRefused for an
    empty reason."""
    reason = reason.strip()
    if not reason:
        raise ReportRefused("a re-issued report needs a reason")
    seen = latest_version(report)
    with files_kept_on_commit(), transaction.atomic():
        latest = Report.objects.select_for_update().get(pk=seen.pk)
        if not latest.is_latest():  # two issued at once: the other one won
            newer = latest_version(latest)
            raise ReportRefused(f"version {newer.version} of this report was issued meanwhile "
                                f"by another request; nothing was stored")
        signoffs = list(SignOff.objects.filter(report__in=latest.series()).order_by("at", "id"))
        engagement = latest.engagement
        version = latest.version + 1
        kwargs = {"signoffs": signoffs, "version": version, "replaces": _version_text(latest),
                  "reason": reason}
        if latest.kind == Report.Kind.FINAL:
            def build() -> GateReportContext:
                return final_report_context(engagement, **kwargs)
        else:
            def build() -> GateReportContext:
                return report_context(latest.about, **kwargs)
        new = _sign_and_store(
            build, engagement=engagement, kind=latest.kind, about=latest.about, decision=None,
            version=version, replaces=latest, reason=reason, issued_by=issued_by)
        AuditEntry.objects.create(
            engagement=engagement, actor=issued_by, action="report_reissue", reason=reason,
            details={"report": new.pk, "version": version, "replaces": latest.pk})
    return new


def _final_latest(engagement: Engagement) -> Report | None:
    return (Report.objects.filter(engagement=engagement, kind=Report.Kind.FINAL)
            .order_by("-version").first())


def final_report_issue(*, engagement: Engagement, issued_by: str) -> Report:
    """Issue the final acceptance report (version 1), or a new version of it when one exists.
    Raises ReportRefused while a gate lacks a decision and none has stopped, when another
    request issued a version while this one waited for the engagement's lock (two at once give
    one version and one refusal), or when the file could not be written (nothing stored)."""
    final_report_decisions(engagement)  # refuses early, before rendering
    seen = _final_latest(engagement)
    try:
        with files_kept_on_commit(), transaction.atomic():
            Engagement.objects.select_for_update().get(pk=engagement.pk)
            existing = _final_latest(engagement)
            if (existing and existing.pk) != (seen and seen.pk):
                raise ReportRefused(f"final report version {existing.version} was issued "
                                    f"meanwhile by another request; nothing was stored")
            if existing is not None:
                return report_reissue(report=existing, issued_by=issued_by,
                                      reason="final report re-issued on request with the "
                                             "latest decisions")
            report = _sign_and_store(lambda: final_report_context(engagement),
                                     engagement=engagement, kind=Report.Kind.FINAL,
                                     about=None, decision=None, version=1, replaces=None,
                                     reason="issued on request", issued_by=issued_by,
                                     signoff_complete=False)
            AuditEntry.objects.create(engagement=engagement, actor=issued_by,
                                      action="final_report",
                                      reason="final acceptance report issued",
                                      details={"report": report.pk})
    except ReportNotWritten as error:
        raise ReportRefused(_not_written(error)) from None
    return report


def _not_written(error: OSError) -> str:
    return f"{error.strerror or error}; try again once the reports directory has room"


# --- sign-off ---------------------------------------------------------------------------------


def signoff_party(user, engagement: Engagement) -> str | None:
    """"vendor" for a project manager (or superuser), "customer" for a customer of the
    engagement's organisation, None for anyone else."""
    role = role_of(user)
    if role in ("superuser", Role.PROJECT_MANAGER):
        return SignOff.Party.VENDOR
    if role == Role.CUSTOMER and user.membership.organisation_id == engagement.customer_id:
        return SignOff.Party.CUSTOMER
    return None


def _person(user) -> str:
    return (user.get_full_name() or user.get_username()).strip()


def signoff_record(*, report: Report, user, comment: str = "") -> tuple[SignOff, Report | None]:
    """Record ``user``'s approval of the decision of ``report``'s series. Returns the sign-off
    and, when it was the second party's, the new version with the sign-off page filled.
    Raises PermissionError when the user may not sign off for either party, ReportRefused when
    their party already has."""
    engagement = report.engagement
    party = signoff_party(user, engagement)
    if party is None:
        raise PermissionError("only the vendor's project manager or a customer of this "
                              "engagement's organisation may sign off")
    both_parties = {SignOff.Party.VENDOR, SignOff.Party.CUSTOMER}
    # One transaction: a sign-off is not committed without the version it makes (a full disk
    # rolls both back, so the sign-off can be retried).
    try:
        with files_kept_on_commit(), transaction.atomic():
            latest = Report.objects.select_for_update().get(pk=latest_version(report).pk)
            done = SignOff.objects.filter(report__in=latest.series())
            signoff = done.filter(party=party).first()
            if signoff is not None:
                if ({s.party for s in done} >= both_parties
                        and not latest.series().filter(signoff_complete=True).exists()):
                    # signed off before, its version never written (an older release): issue it
                    return signoff, _signed_off_version(latest)
                raise ReportRefused(f"the {party} has already signed off this report")
            # stored in English (data); reports print it in their own language
            role = ("project manager (vendor)" if party == SignOff.Party.VENDOR
                    else f"customer representative ({engagement.customer.name})")
            signoff = SignOff.objects.create(report=latest, party=party, user=user,
                                             name=_person(user), role=role,
                                             comment=comment.strip(), at=timezone.now())
            AuditEntry.objects.create(
                engagement=engagement, actor=user.get_username(), action="report_signoff",
                reason=comment.strip() or f"{party} approved the decision",
                details={"report": latest.pk, "version": latest.version, "party": party})
            both = {s.party for s in done} | {party}
            if both >= both_parties:
                return signoff, _signed_off_version(latest)
    except ReportNotWritten as error:
        raise ReportRefused(_not_written(error) + " (the sign-off was not recorded)") from None
    waiting = sorted({SignOff.Party.VENDOR.value, SignOff.Party.CUSTOMER.value} - both)
    events.announce(events.signoff_waiting, report_id=latest.id, parties=waiting)  # notifications
    return signoff, None


def _signed_off_version(latest: Report) -> Report:
    return report_reissue(report=latest, issued_by="service",
                          reason="signed off by the vendor's project manager and the "
                                 "customer's representative")


# --- downloads --------------------------------------------------------------------------------


def download_record(*, report: Report, user, via: str) -> ReportDownload:
    """Log that ``user`` downloaded ``report`` (``via`` "web" or "api")."""
    return ReportDownload.objects.create(report=report, user=user,
                                         username=user.get_username(), via=via)


# --- the customer's certificate and countersigned copies -----------------------------------


def _signing_certificate_problem(cert: x509.Certificate) -> str:
    """Why ``cert`` cannot be a customer's countersigning certificate, "" when it can: it must be
    the certificate they sign with (a leaf), never an authority that could issue others."""
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is not None and constraints.ca:
        return ("this is a CA certificate (basicConstraints cA=true): register the certificate "
                "you sign with, not the authority that issued it (nothing was stored)")
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    except x509.ExtensionNotFound:
        usage = None
    if usage is None or not (usage.digital_signature or usage.content_commitment):
        return ("the certificate's key usage does not allow signing documents: it needs "
                "digitalSignature or nonRepudiation (nothing was stored)")
    return ""


def customer_certificate_add(*, engagement: Engagement, pem: bytes,
                             uploaded_by: str) -> CustomerCertificate:
    """Store the customer's public signing certificate (PEM or DER) as the trust anchor of their
    countersignature on ``engagement``: it vouches for signatures made with itself only.
    Refuses (ReportRefused) anything holding a private key, anything that is not one X.509
    certificate, a CA certificate, one whose key usage does not allow signing, and an expired
    certificate."""
    if b"PRIVATE KEY" in pem:
        raise ReportRefused("the file contains a private key: upload only the public "
                            "certificate (nothing was stored)")
    try:
        cert = (x509.load_pem_x509_certificate(pem) if b"-----BEGIN CERTIFICATE" in pem
                else x509.load_der_x509_certificate(pem))
    except ValueError as e:
        raise ReportRefused(f"not an X.509 certificate in PEM or DER form: {e}") from None
    problem = _signing_certificate_problem(cert)
    if problem:
        raise ReportRefused(problem)
    if cert.not_valid_after_utc < timezone.now():
        raise ReportRefused(f"the certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    fingerprint = cert.fingerprint(hashes.SHA256()).hex()
    existing = CustomerCertificate.objects.filter(engagement=engagement,
                                                  sha256_fingerprint=fingerprint).first()
    if existing is not None:
        return existing
    subject = cert.subject.rfc4514_string()[:300]
    entry = CustomerCertificate.objects.create(
        engagement=engagement,
        pem=cert.public_bytes(serialization.Encoding.PEM).decode(), subject=subject,
        sha256_fingerprint=fingerprint, not_after=cert.not_valid_after_utc.astimezone(UTC),
        uploaded_by=uploaded_by)
    AuditEntry.objects.create(engagement=engagement, actor=uploaded_by,
                              action="customer_certificate", reason=f"uploaded {subject}",
                              details={"sha256": fingerprint})
    return entry


def customer_roots(engagement: Engagement) -> list:
    """The engagement's customer certificates as pyHanko certificates."""
    roots = []
    for entry in engagement.customer_certificates.all():
        _, _, der = asn1_pem.unarmor(entry.pem.encode())
        roots.append(asn1_x509.Certificate.load(der))
    return roots


def customer_trust(engagement: Engagement) -> CustomerTrust:
    """Whom the customer field of ``engagement``'s reports may be signed by."""
    return CustomerTrust(engagement.customer.name, tuple(customer_roots(engagement)))


def _engagement_of(vendor_revision: bytes) -> Engagement | None:
    """The engagement of a report, from the vendor's signed revision: the report stored here
    with those bytes, else the engagement its embedded summary names (authentic only because
    the caller checked the vendor's signature over these bytes first)."""
    digest = hashlib.sha256(vendor_revision).hexdigest()
    report = Report.objects.filter(sha256=digest).select_related("engagement__customer").first()
    if report is not None:
        return report.engagement
    try:
        summary = json.loads(embedded_files(vendor_revision, only={SUMMARY_NAME}).get(
            SUMMARY_NAME, b"{}"))
        name = str(summary.get("engagement") or "")
    except (ValueError, AttributeError):
        return None
    return Engagement.objects.filter(name=name).select_related("customer").first()


def _customer_name(cert) -> str:
    subject = cert.subject.native
    return str(subject.get("organization_name") or subject.get("common_name") or "?")


def report_verify(*, data: bytes, roots=None, tsa_roots=None,
                  customer_certificates=()) -> VerificationResult:
    """Verify a report as anyone may: the vendor's signature against the vendor's roots, the
    customer field against the customer certificates of the engagement the vendor's revision
    belongs to (plus ``customer_certificates``, given on the command line). The verify page and
    ``verify_report`` both answer through here, so they give the same answer for a file."""
    extra = tuple(customer_certificates)

    def resolve(vendor_revision: bytes) -> CustomerTrust | None:
        engagement = _engagement_of(vendor_revision)
        trust = customer_trust(engagement) if engagement is not None else None
        if not extra:
            return trust
        if trust is None:
            return CustomerTrust(_customer_name(extra[0]), extra)
        return CustomerTrust(trust.name, trust.certificates + extra)

    return verify_pdf(data, roots=roots, tsa_roots=tsa_roots, customer=resolve)


def countersigned_store(*, report: Report, data: bytes, uploaded_by: str) -> Report:
    """Store the customer's countersigned copy of ``report`` (the latest version of its series)
    as a new version. Accepted only when ``data`` is our signed file byte for byte followed by
    an incremental update adding one invisible signature in the customer's field, made with a
    certificate registered for this engagement, and changing nothing else; our signature
    validates against our roots and the evidence still matches. Raises ReportRefused saying
    which check failed; nothing is stored then. (Only the customer may call this: the doors
    check the role.)"""
    latest = latest_version(report)
    if latest.pk != report.pk:
        raise ReportRefused(f"only the latest version (version {latest.version}) may be "
                            f"countersigned; this is version {report.version}")
    if len(data) > MAX_COUNTERSIGNED_BYTES:
        raise ReportRefused("the file is larger than 50 MB")
    original = Path(report.path).read_bytes()
    if hashlib.sha256(original).hexdigest() != report.sha256:
        raise ReportRefused("the stored report no longer matches its recorded sha256")
    if len(data) <= len(original) or data[:len(original)] != original:
        raise ReportRefused(
            f"not an incremental update of version {report.version}: the file must begin with "
            f"our signed file byte for byte ({len(original)} bytes) and add the countersignature "
            f"after it")
    trust = customer_trust(report.engagement)
    if not trust.certificates:
        raise ReportRefused("no customer certificate is registered for this engagement: upload "
                            "the public certificate first")
    result = verify_pdf(data, customer=trust)
    if not result.valid:
        raise ReportRefused(f"the countersigned file does not validate: {result.summary}")
    ours = verify_pdf(original, check_evidence=False)
    if len(result.signatures) != len(ours.signatures) + 1:
        raise ReportRefused("the file must carry exactly one new signature, the customer's")
    newest = result.signatures[-1]
    if newest.party != f"customer {trust.name}":
        raise ReportRefused(f"the new signature ({newest.signer}) does not chain to a customer "
                            f"certificate registered for this engagement")
    with files_kept_on_commit(), transaction.atomic():
        locked = Report.objects.select_for_update().get(pk=report.pk)
        if latest_version(locked).pk != locked.pk:
            raise ReportRefused("a newer version was issued meanwhile; countersign that one")
        path = _write_new(report.engagement, Path(report.path).stem + "-countersigned.pdf", data)
        new = Report.objects.create(
            engagement=report.engagement, decision=None, about=report.about, kind=report.kind,
            version=report.version + 1, replaces=report,
            reason=f"countersigned by the customer ({newest.signer})",
            origin=Report.Origin.COUNTERSIGNED, signoff_complete=report.signoff_complete,
            issued_by=uploaded_by, path=str(path), sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data), signer=newest.signer,
            signed_at=newest.signed_at or timezone.now(), simulated=report.simulated)
        AuditEntry.objects.create(
            engagement=report.engagement, actor=uploaded_by, action="report_countersigned",
            reason=new.reason, details={"report": new.pk, "replaces": report.pk})
        events.announce(events.report_issued, report_id=new.id)  # notifications
    return new


def visible_reports(user):
    return Report.objects.filter(engagement__in=engagements_for(user))


__all__ = [
    "ReportRefused", "report_issue", "report_reissue", "final_report_issue", "signoff_record",
    "download_record", "customer_certificate_add", "countersigned_store", "report_verify",
    "report_context", "final_report_context",
]
