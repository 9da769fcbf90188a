"""What the report pages show, as plain data: every report series of an engagement with its
versions, sign-offs and what the visitor may do; the download log for project managers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.urls import reverse
from django.utils.translation import gettext as _

from acceptance.models import Engagement
from acceptance.permissions import Role, has_role
from reports.models import Report, ReportDownload, SignOff
from reports.services import ReportRefused, final_report_decisions, signoff_party


def _minute(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if value else "—"


@dataclass
class VersionRow:
    id: int
    version: int
    file_name: str
    url: str
    signed_at: str
    signer: str
    origin: str
    reason: str
    sha256: str
    latest: bool
    signoff_complete: bool
    simulated: bool
    replaces: int | None


@dataclass
class SignOffLine:
    party: str
    name: str
    role: str
    at: str
    comment: str


@dataclass
class Series:
    key: str
    title: str
    outcome: str
    outcome_word: str
    versions: list[VersionRow] = field(default_factory=list)
    signoffs: list[SignOffLine] = field(default_factory=list)
    awaiting: list[str] = field(default_factory=list)  # parties that have not signed off
    signoff_url: str = ""  # set when the visitor may sign off now
    countersign_url: str = ""  # set when the visitor may upload a countersigned copy


@dataclass
class DownloadLine:
    at: str
    who: str
    via: str
    report: str


def report_page(engagement: Engagement, user) -> dict:
    """The context of the engagement's report page for ``user`` (who may see the engagement)."""
    reports = list(Report.objects.filter(engagement=engagement)
                   .select_related("about__gate").order_by("kind", "about__gate__order",
                                                           "about_id", "version"))
    signoffs = list(SignOff.objects.filter(report__engagement=engagement).order_by("at", "id"))
    party = signoff_party(user, engagement)
    is_pm = has_role(user, Role.PROJECT_MANAGER)
    may_countersign = party == SignOff.Party.CUSTOMER  # the customer alone countersigns
    series: dict[str, Series] = {}
    for report in reports:
        key = "final" if report.kind == Report.Kind.FINAL else f"decision-{report.about_id}"
        if key not in series:
            if report.kind == Report.Kind.FINAL:
                title = _("Final acceptance report")
                outcome = ""
            else:
                gate = report.about.gate
                title = _("%(gate)s report, decision of %(date)s") % {
                    "gate": f"{gate.code} {_(gate.name)}",
                    "date": report.about.decided_at.astimezone(UTC).strftime("%Y-%m-%d")}
                outcome = report.about.outcome
            series[key] = Series(key=key, title=title, outcome=outcome,
                                 outcome_word=_(outcome) if outcome else "")
        series[key].versions.append(VersionRow(
            id=report.id, version=report.version, file_name=Path(report.path).name,
            url=reverse("report-download", args=[report.id]), signed_at=_minute(report.signed_at),
            signer=report.signer, origin=report.get_origin_display(), reason=report.reason,
            sha256=report.sha256, latest=False, signoff_complete=report.signoff_complete,
            simulated=report.simulated, replaces=report.replaces_id))
    by_report = {r.id: k for k, s in series.items() for r in s.versions}
    for s in signoffs:
        key = by_report.get(s.report_id)
        if key:
            series[key].signoffs.append(SignOffLine(
                s.get_party_display(), s.name, s.role, _minute(s.at), s.comment))
    for s in series.values():
        s.versions[-1].latest = True
        latest = s.versions[-1]
        done = {line.party for line in s.signoffs}
        parties = {SignOff.Party.VENDOR: SignOff.Party.VENDOR.label,
                   SignOff.Party.CUSTOMER: SignOff.Party.CUSTOMER.label}
        s.awaiting = [label for p, label in parties.items() if label not in done]
        if party is not None and parties[party] not in done:
            s.signoff_url = reverse("report-signoff", args=[latest.id])
        if may_countersign:
            s.countersign_url = reverse("report-countersigned", args=[latest.id])
    final_refusal = ""
    try:
        final_report_decisions(engagement)
    except ReportRefused as refusal:
        final_refusal = str(refusal)
    downloads = []
    if is_pm:
        downloads = [DownloadLine(_minute(d.at), d.username, d.via,
                                  f"{Path(d.report.path).name} (v{d.report.version})")
                     for d in ReportDownload.objects.filter(report__engagement=engagement)
                     .select_related("report")[:100]]
    return {
        "engagement": engagement,
        "series": list(series.values()),
        "party": party,
        "is_pm": is_pm,
        "final_url": reverse("report-final", args=[engagement.name]) if is_pm else "",
        "final_refusal": final_refusal,
        "certificate_url": (reverse("report-certificate", args=[engagement.name])
                            if may_countersign else ""),
        "certificates": list(engagement.customer_certificates.all()),
        "downloads": downloads,
    }
