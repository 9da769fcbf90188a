"""The "Re-decide from the evidence" check of the portal and the verify page: the signatures as
the service checks them (``reports.services.report_verify``), then the auditor's re-decision
(``acceptance_core.redecide``) of every criterion from the report's embedded evidence — the same
as ``manage.py redecide`` and the stand-alone ``python -m acceptance_core redecide``."""

from __future__ import annotations

from dataclasses import dataclass, field

from acceptance_core.pdf import ReportUnreadable, embedded
from acceptance_core.redecide import CannotCheck, CriterionRow, redecide
from reports.services import report_verify


@dataclass(frozen=True)
class RedecisionView:
    """``status`` 0 all match, 1 something differs, 2 cannot check (``reason``)."""

    status: int
    reason: str = ""
    rows: list[CriterionRow] = field(default_factory=list)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    simulated: bool = False


def report_redecide(*, data: bytes) -> RedecisionView:
    """Re-decide a signed report (bytes). Never raises: a report that cannot be checked is
    status 2 with the reason."""
    signature = report_verify(data=data)
    if not signature.valid:
        return RedecisionView(2, f"signature: {signature.summary}")
    try:
        summary, files = embedded(data)
        result = redecide(summary, files)
    except (ReportUnreadable, CannotCheck) as e:
        return RedecisionView(2, str(e))
    return RedecisionView(result.exit_code, "", result.rows, result.outcomes,
                          result.differences, result.notes, bool(summary.get("simulated")))
