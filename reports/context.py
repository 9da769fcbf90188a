"""What one gate report says, as plain frozen data.

The report-context builder (reports/services.py) does the queries and the arithmetic and fills
these dataclasses; the template and the PDF renderer only read them. Nothing here touches the ORM,
so rendering and signing can be tested without a database. A criterion's row is the
``gates.presentation.VerdictRow`` the pages show too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

from gates.presentation import VerdictRow

Outcome = Literal["passed", "stopped", "error", "review"]

OUTCOMES: tuple[str, ...] = ("passed", "stopped", "error", "review")
#: The verdicts a report shows (a decision is recorded only when none is "unstable").
VERDICTS: tuple[str, ...] = ("pass", "fail", "insufficient", "review")


def _check_verdicts(criteria: list[VerdictRow]) -> None:
    for row in criteria:
        if row.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {row.verdict!r}")


@dataclass(frozen=True)
class EvidenceRow:
    """One probe run whose raw output backs the decision."""

    node: str
    probe: str
    command: str
    tool_version: str
    started_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    sha256: str
    simulated: bool
    state: str
    raw_output: bytes | None = None  # embedded as an attachment when given
    # "": its own attachment; else the attachment it is one range of, in run order (a soak's
    # collected ranges of one node's file: reports.evidence.bundle_name)
    bundle: str = ""


@dataclass(frozen=True)
class BomRow:
    """One bill-of-materials item and who ticked it off."""

    item: str
    ticked_by: str
    ticked_at: datetime | None


@dataclass(frozen=True)
class NodeRow:
    """One machine of the engagement's inventory."""

    name: str
    address: str
    role: str
    host_key_fingerprint: str


@dataclass(frozen=True)
class ScheduleRow:
    """One gate on the engagement's schedule and what happened to it."""

    gate_title: str
    due_date: date
    state: str  # pending, passed, stopped, review
    decided_at: datetime | None
    outcome: str  # "" when no decision


@dataclass(frozen=True)
class AuditRow:
    """One entry of the engagement's audit trail (threshold edits, re-openings, sign-offs)."""

    at: datetime
    actor: str
    action: str
    reason: str


@dataclass(frozen=True)
class SignOffRow:
    """One party's approval of the decision."""

    party: str  # "vendor" | "customer"
    name: str
    role: str
    at: datetime
    comment: str


@dataclass(frozen=True, kw_only=True)
class GateSection:
    """One gate's decision with its criteria, charts and runs (the final report has several)."""

    gate_code: str
    gate_name: str
    decision_outcome: Outcome
    decision_sentence: str
    decided_at: datetime
    decided_by: str
    criteria: list[VerdictRow] = field(default_factory=list)
    charts: list = field(default_factory=list)  # runners.charts.Chart (plain geometry)
    runs: list[EvidenceRow] = field(default_factory=list)
    # what the decision rests on, for re-deciding it from the PDF (reports.basis); None: unknown
    basis: dict | None = None
    # node name -> its charted figures in one line (runners.charts.node_figure_texts)
    node_figures: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_verdicts(self.criteria)


@dataclass(frozen=True, kw_only=True)
class GateReportContext:
    """Everything a gate report shows; the template adds no facts of its own."""

    engagement_name: str
    customer: str
    vendor: str = "FX storage vendor"
    gate_code: str
    gate_name: str
    due_date: date
    engagement_start: date
    decision_outcome: Outcome
    decision_sentence: str
    decided_at: datetime
    decided_by: str
    criteria: list[VerdictRow] = field(default_factory=list)
    runs: list[EvidenceRow] = field(default_factory=list)
    bom: list[BomRow] = field(default_factory=list)
    nodes: list[NodeRow] = field(default_factory=list)
    simulated: bool = False  # any evidence came from lab stand-in tools
    imported: bool = False  # evidence was imported rather than run by the service
    language: str = "en"
    kind: Literal["gate", "final"] = "gate"
    sections: list[GateSection] = field(default_factory=list)  # empty: one built from the above
    charts: list = field(default_factory=list)  # of the gate report's single gate
    schedule: list[ScheduleRow] = field(default_factory=list)
    audit: list[AuditRow] = field(default_factory=list)
    signoffs: list[SignOffRow] = field(default_factory=list)
    version: int = 1
    replaces: str = ""  # "G1 report v1, sha256 …" when this version replaces another
    reason: str = ""  # why this version was issued
    # G4 soak results (time series, fault windows), filled when the soak exists; None: no soak.
    soak_section: object | None = None
    basis: dict | None = None  # of the gate report's single gate (reports.basis)
    node_figures: dict[str, str] = field(default_factory=dict)  # of the single gate
    # the final report's business case (business.presentation); None: not shown
    business_section: dict | None = None

    def __post_init__(self) -> None:
        if self.decision_outcome not in OUTCOMES:
            raise ValueError(
                f"decision_outcome must be one of {OUTCOMES}, not {self.decision_outcome!r}"
            )
        if self.decided_at.tzinfo is None:
            raise ValueError("decided_at must be an aware datetime")
        _check_verdicts(self.criteria)

    @property
    def signoff_complete(self) -> bool:
        parties = {s.party for s in self.signoffs}
        return {"vendor", "customer"} <= parties

    def gate_sections(self) -> list[GateSection]:
        """The sections shown: ``sections``, or the single gate of the top-level fields."""
        if self.sections:
            return list(self.sections)
        return [GateSection(
            gate_code=self.gate_code, gate_name=self.gate_name,
            decision_outcome=self.decision_outcome, decision_sentence=self.decision_sentence,
            decided_at=self.decided_at, decided_by=self.decided_by, criteria=self.criteria,
            charts=self.charts, runs=self.runs, basis=self.basis,
            node_figures=self.node_figures)]

    def all_runs(self) -> list[EvidenceRow]:
        return [run for section in self.gate_sections() for run in section.runs]

    @property
    def html_lang(self) -> str:
        """The `lang` attribute; WeasyPrint picks Simplified Chinese glyphs only for zh-CN."""
        if self.language.lower() in ("zh-hans", "zh-cn", "zh"):
            return "zh-CN"
        return self.language or "en"
