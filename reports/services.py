"""Issuing, re-issuing, signing off and countersigning reports.

``report_issue`` builds the report context of a decision (queries and arithmetic here, none in
the template), renders it with WeasyPrint as PDF/A-3b with the evidence embedded, signs it with
pyHanko and stores it under REPORTS_DIR, never overwriting an earlier file. Every later change
makes a new version of the same series naming the one it replaces:

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
import os
import time
from datetime import UTC
from pathlib import Path

from asn1crypto import pem as asn1_pem
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from acceptance import events
from acceptance.models import AuditEntry, Engagement
from acceptance.permissions import Role, engagements_for, role_of
from business.presentation import business_page
from gates.models import Decision, Gate
from gates.presentation import verdict_row
from reports.context import (
    AuditRow,
    BomRow,
    EvidenceRow,
    GateReportContext,
    GateSection,
    NodeRow,
    ScheduleRow,
    SignOffRow,
)
from reports.evidence import SUMMARY_NAME, embedded_files, embedded_output
from reports.models import CustomerCertificate, Report, ReportDownload, SignOff
from reports.render import django_language, render_gate_report_pdf
from reports.signing import CustomerTrust, VerificationResult, sign_pdf, verify_pdf
from runners.charts import gate_run_charts
from runners.models import GateRun
from runners.probes import PROBES
from runners.soak.report import soak_report_section

MAX_COUNTERSIGNED_BYTES = 50 * 1024 * 1024

logger = logging.getLogger(__name__)


class ReportRefused(Exception):
    """The request cannot be honoured; the message says why. Nothing was stored."""


def _display_command(run) -> str:
    """The command as a person reads it (scripted probes summarised; the full command stays
    stored with the run and is covered by the machine-readable record)."""
    spec = PROBES.get(run.probe)
    return spec.display(run.parameters, run.command) if spec else run.command


def _charts(gate_run: GateRun) -> list:
    if hasattr(gate_run, "soak"):
        return []  # a soak's time series are drawn by its own section (soak_section)

    try:
        return gate_run_charts(gate_run)
    except Exception:  # a chart is an illustration: its absence never blocks a report
        logger.exception("charts of gate run %s could not be drawn", gate_run.pk)
        return []


def _section(decision: Decision) -> GateSection:
    gate = decision.gate
    gate_run: GateRun = decision.gate_run
    # Descriptions and sources of the default criteria in the report's language, edited ones
    # as written; the explanation is quoted as the evaluation recorded it.
    criteria = [verdict_row(v, stored_explanation=True) for v in decision.verdicts.all()]
    runs = []
    # A per-node re-run is decided over its own runs plus the other nodes' carried runs.
    for run in (gate_run.evidence_probe_runs().select_related("node")
                .order_by("started_at", "id")):
        raw = bytes(run.stdout)
        if run.stdout_pruned_at is not None:  # retention: read back from a signed report
            raw = embedded_output(Report.objects.filter(engagement_id=gate.engagement_id)
                                  .order_by("-id").values_list("path", flat=True),
                                  run.stdout_sha256)
        runs.append(EvidenceRow(
            node=run.node.name if run.node else "service", probe=run.probe,
            command=_display_command(run), tool_version=run.tool_version,
            started_at=run.started_at, finished_at=run.finished_at, exit_code=run.exit_code,
            sha256=run.stdout_sha256 or hashlib.sha256(raw or b"").hexdigest(),
            simulated=run.simulated, state=run.state, raw_output=raw,
        ))
    return GateSection(
        gate_code=gate.code, gate_name=gate.name, decision_outcome=decision.outcome,
        decision_sentence=decision.sentence, decided_at=decision.decided_at,
        decided_by=decision.decided_by, criteria=criteria, charts=_charts(gate_run), runs=runs)


def _soak_section(decisions: list[Decision]):
    """The G4 soak section (charts, per-fault table, gaps) of the first of ``decisions`` made
    on a soak, in the active language; None when none was. Raises what the soak queries raise:
    a G4 report without its fault table would be misleading, so it is not issued then."""
    for decision in decisions:
        section = soak_report_section(decision)
        if section is not None:
            return section
    return None


def _latest_decision(gate: Gate) -> Decision | None:
    return gate.decisions.order_by("-decided_at", "-id").first()


def _engagement_parts(engagement: Engagement) -> dict:
    schedule = []
    for gate in engagement.gates.order_by("order"):
        latest = _latest_decision(gate)
        schedule.append(ScheduleRow(
            gate_title=f"{gate.code} {_(gate.name)}", due_date=gate.due_date, state=gate.state,
            decided_at=latest.decided_at if latest else None,
            outcome=latest.outcome if latest else ""))
    return {
        "engagement_name": engagement.name, "customer": engagement.customer.name,
        "engagement_start": engagement.start_date,
        "bom": [BomRow(f"{i.quantity} × {i.description}", i.ticked_by, i.ticked_at)
                for i in engagement.bom_items.all()],
        "nodes": [NodeRow(n.name, f"{n.address}:{n.port}", n.get_role_display(),
                          n.host_key_fingerprint) for n in engagement.nodes.order_by("name")],
        "schedule": schedule,
        "audit": [AuditRow(a.at, a.actor, a.action, a.reason) for a in engagement.audit.all()],
        "language": engagement.report_language,
    }


def _signoff_rows(signoffs) -> list[SignOffRow]:
    return [SignOffRow(s.party, s.name, s.role, s.at, s.comment) for s in signoffs]


def report_context(decision: Decision, *, signoffs=(), version: int = 1, replaces: str = "",
                   reason: str = "") -> GateReportContext:
    """The gate report of ``decision`` in the engagement's language."""
    engagement = decision.gate.engagement
    with translation.override(django_language(engagement.report_language)):
        section = _section(decision)
        return GateReportContext(
            **_engagement_parts(engagement),
            gate_code=section.gate_code, gate_name=section.gate_name,
            due_date=decision.gate.due_date, decision_outcome=section.decision_outcome,
            decision_sentence=section.decision_sentence, decided_at=section.decided_at,
            decided_by=section.decided_by, criteria=section.criteria, runs=section.runs,
            charts=section.charts,
            simulated=engagement.is_lab or any(r.simulated for r in section.runs),
            imported=decision.gate_run.origin == GateRun.Origin.IMPORTED,
            signoffs=_signoff_rows(signoffs), version=version, replaces=replaces, reason=reason,
            soak_section=_soak_section([decision]),
        )


def final_report_decisions(engagement: Engagement) -> list[Decision]:
    """The latest decision of every decided gate, in gate order, when the engagement may have
    its final report: every gate decided, or the engagement stopped at a gate. Raises
    ReportRefused naming the undecided gates otherwise."""
    decisions, undecided = [], []
    for gate in engagement.gates.order_by("order"):
        latest = _latest_decision(gate)
        if latest is None:
            undecided.append(gate.code)
        else:
            decisions.append(latest)
    stopped = any(d.outcome == Decision.Outcome.STOPPED for d in decisions)
    if undecided and not stopped:
        raise ReportRefused(
            f"the final report needs a decision on every gate (or a stopped gate); "
            f"{', '.join(undecided)} {'has' if len(undecided) == 1 else 'have'} none yet")
    return decisions


def final_report_context(engagement: Engagement, *, signoffs=(), version: int = 1,
                         replaces: str = "", reason: str = "") -> GateReportContext:
    """The final acceptance report: every decided gate's section. Raises ReportRefused."""
    decisions = final_report_decisions(engagement)
    with translation.override(django_language(engagement.report_language)):
        sections = [_section(d) for d in decisions]
        stopped = [s for s in sections if s.decision_outcome == "stopped"]
        review = [s for s in sections if s.decision_outcome == "review"]
        if stopped:
            outcome = "stopped"
            gate = f"{stopped[0].gate_code} {_(stopped[0].gate_name)}"
            sentence = _("Not accepted: the engagement stopped at %(gate)s; the array is not "
                         "accepted.") % {"gate": gate}
        elif review:
            outcome = "review"
            sentence = _("Not yet accepted: %(gates)s await review.") % {
                "gates": ", ".join(s.gate_code for s in review)}
        else:
            outcome = "passed"
            sentence = _("Accepted: all %(n)d gates passed; the array is accepted as the KV-cache "
                         "tier.") % {"n": len(sections)}
        last = max(decisions, key=lambda d: d.decided_at)
        runs = [r for s in sections for r in s.runs]
        return GateReportContext(
            **_engagement_parts(engagement), kind="final", sections=sections,
            gate_code="", gate_name="", due_date=engagement.end_date, decision_outcome=outcome,
            decision_sentence=sentence, decided_at=last.decided_at, decided_by=last.decided_by,
            simulated=engagement.is_lab or any(r.simulated for r in runs),
            imported=any(d.gate_run.origin == GateRun.Origin.IMPORTED for d in decisions),
            signoffs=_signoff_rows(signoffs), version=version, replaces=replaces, reason=reason,
            soak_section=_soak_section(decisions),
            business_section=business_page(engagement),
        )


# --- storing signed versions ------------------------------------------------------------------


def _file_name(engagement: Engagement, kind: str, about: Decision | None, version: int) -> str:
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S%fZ")
    if kind == Report.Kind.FINAL:
        return f"{engagement.name}-final-v{version}-{stamp}.pdf"
    return (f"{engagement.name}-{about.gate.code}-run{about.gate_run.attempt}-v{version}-"
            f"{stamp}.pdf")


def _write_new(engagement: Engagement, name: str, data: bytes) -> Path:
    directory = Path(settings.REPORTS_DIR) / engagement.name
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / name
    # 0600 from the start (a customer's report is not for other local users); O_EXCL: never
    # overwrite a signed report.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _sign_and_store(context: GateReportContext, *, engagement: Engagement, kind: str,
                    about: Decision | None, decision: Decision | None, version: int,
                    replaces: Report | None, reason: str, issued_by: str,
                    signoff_complete: bool) -> Report:
    label = (f"{context.gate_code} decision: {context.decision_outcome}" if kind == "gate"
             else f"final acceptance report: {context.decision_outcome}")
    pdf = render_gate_report_pdf(context)
    signing_started = time.monotonic()
    signed = sign_pdf(pdf, reason=f"{label} (v{version})")
    signing_seconds = time.monotonic() - signing_started
    check = verify_pdf(signed)
    if not check.valid:
        raise RuntimeError(f"the freshly signed report does not verify: {check.summary}")
    path = _write_new(engagement, _file_name(engagement, kind, about, version), signed)
    report = Report.objects.create(
        engagement=engagement, decision=decision, about=about, kind=kind, version=version,
        replaces=replaces, reason=reason, issued_by=issued_by, signoff_complete=signoff_complete,
        path=str(path), sha256=hashlib.sha256(signed).hexdigest(), size_bytes=len(signed),
        signer=check.signer, signed_at=check.signed_at or timezone.now(),
        simulated=context.simulated, signing_seconds=signing_seconds,
    )
    events.announce(events.report_issued, report_id=report.id)  # notifications
    return report


def report_issue(*, decision: Decision) -> Report:
    """Render, sign and store version 1 of the gate report of ``decision`` (its sign-off page
    "awaiting sign-off"); returns the Report row."""
    context = report_context(decision)
    report = _sign_and_store(context, engagement=decision.gate.engagement,
                             kind=Report.Kind.GATE, about=decision, decision=decision, version=1,
                             replaces=None, reason="issued when the decision was recorded",
                             issued_by="service", signoff_complete=False)
    events.announce(events.signoff_waiting, report_id=report.id,  # notifications
                    parties=[SignOff.Party.VENDOR.value, SignOff.Party.CUSTOMER.value])
    return report


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
    with transaction.atomic():
        latest = Report.objects.select_for_update().get(pk=latest_version(report).pk)
        signoffs = list(SignOff.objects.filter(report__in=latest.series()).order_by("at", "id"))
        engagement = latest.engagement
        version = latest.version + 1
        kwargs = {"signoffs": signoffs, "version": version, "replaces": _version_text(latest),
                  "reason": reason}
        if latest.kind == Report.Kind.FINAL:
            context = final_report_context(engagement, **kwargs)
        else:
            context = report_context(latest.about, **kwargs)
        new = _sign_and_store(
            context, engagement=engagement, kind=latest.kind, about=latest.about, decision=None,
            version=version, replaces=latest, reason=reason, issued_by=issued_by,
            signoff_complete=context.signoff_complete)
        AuditEntry.objects.create(
            engagement=engagement, actor=issued_by, action="report_reissue", reason=reason,
            details={"report": new.pk, "version": version, "replaces": latest.pk})
    return new


def final_report_issue(*, engagement: Engagement, issued_by: str) -> Report:
    """Issue the final acceptance report (version 1), or a new version of it when one exists.
    Raises ReportRefused while a gate lacks a decision and none has stopped."""
    final_report_decisions(engagement)  # refuses early, before rendering
    existing = (Report.objects.filter(engagement=engagement, kind=Report.Kind.FINAL)
                .order_by("-version").first())
    if existing is not None:
        return report_reissue(report=existing, issued_by=issued_by,
                              reason="final report re-issued on request with the latest "
                                     "decisions")
    context = final_report_context(engagement)
    report = _sign_and_store(context, engagement=engagement, kind=Report.Kind.FINAL, about=None,
                             decision=None, version=1, replaces=None,
                             reason="issued on request", issued_by=issued_by,
                             signoff_complete=False)
    AuditEntry.objects.create(engagement=engagement, actor=issued_by, action="final_report",
                              reason="final acceptance report issued",
                              details={"report": report.pk})
    return report


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
    with transaction.atomic():
        latest = Report.objects.select_for_update().get(pk=latest_version(report).pk)
        done = SignOff.objects.filter(report__in=latest.series())
        if done.filter(party=party).exists():
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
    if both >= {SignOff.Party.VENDOR, SignOff.Party.CUSTOMER}:
        new = report_reissue(report=latest, issued_by="service",
                             reason="signed off by the vendor's project manager and the "
                                    "customer's representative")
        return signoff, new
    waiting = sorted({SignOff.Party.VENDOR.value, SignOff.Party.CUSTOMER.value} - both)
    events.announce(events.signoff_waiting, report_id=latest.id, parties=waiting)  # notifications
    return signoff, None


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
        summary = json.loads(embedded_files(vendor_revision).get(SUMMARY_NAME, b"{}"))
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
    with transaction.atomic():
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
