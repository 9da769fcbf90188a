"""Turn a GateReportContext into the report's HTML, its summary JSON and its PDF/A-3b
(WeasyPrint) with the evidence embedded.

The template only loops and branches on booleans: every word, date and count it shows is
prepared here, from the frozen context alone, in the report's language (English or Simplified
Chinese, ``translation.override``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from gates.plain import reports_named, source_words
from gates.presentation import VerdictRow
from reports.context import EvidenceRow, GateReportContext, GateSection
from reports.evidence import (
    SUMMARY_FORMAT,
    SUMMARY_NAME,
    SUMMARY_SCHEMA_VERSION,
    attachment_name,
    bundle_name,
)
from reports.summary_file import summary_file

TEMPLATE = "reports/gate_report.html"
SOAK_TEMPLATE = "reports/_soak_section.html"
PDF_VARIANT = "pdf/a-3b"

# English marks stay as they are in every language (tests and readers search for them); the
# translated mark follows them in a Chinese report.
SIMULATED_MARK = "SIMULATED EVIDENCE — lab stand-in tools, not customer hardware"
IMPORTED_MARK = "IMPORTED EVIDENCE — collected by the customer's script, not by the service"


def _outcome_words() -> dict[str, str]:
    return {"passed": _("PASSED"), "stopped": _("STOPPED"), "error": _("ERROR"),
            "review": _("REVIEW")}


def _verdict_words() -> dict[str, str]:
    return {"pass": _("PASS"), "fail": _("FAIL"), "insufficient": _("INSUFFICIENT DATA"),
            "review": _("REVIEW")}


# Kept for callers that import them (English words).
OUTCOME_WORDS = {"passed": "PASSED", "stopped": "STOPPED", "error": "ERROR", "review": "REVIEW"}
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "insufficient": "INSUFFICIENT DATA",
                 "review": "REVIEW"}


def django_language(language: str) -> str:
    """The Django language code of a report language (``zh-hans`` or ``en``)."""
    return "zh-hans" if language.lower() in ("zh-hans", "zh-cn", "zh") else "en"


@dataclass(frozen=True)
class _RunView:
    number: int
    gate: str
    node: str
    probe: str
    command: str
    tool_version: str
    started: str
    finished: str
    exit_code: str
    exit_ok: bool
    sha256: str
    simulated: bool
    state: str
    attachment: str


def _day(value: date | None) -> str:
    return value.isoformat() if value else "—"


def _minute(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _table_minute(value: datetime | None) -> str:
    # table cells name UTC once, in the column header
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _second(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _iso(value: datetime | date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="seconds")
    return value.isoformat()


def _finish(started: datetime | None, finished: datetime | None) -> str:
    """The finish time, without the date when the run ended on the day it started."""
    if finished is None:
        return "—"
    if started is None:
        return _second(finished)
    a, b = started.astimezone(UTC), finished.astimezone(UTC)
    text = b.strftime("%H:%M:%S") if a.date() == b.date() else _second(b)
    return f"{text} ({round((b - a).total_seconds())} s)"


def _criterion(row: VerdictRow) -> VerdictRow:
    """The row with its verdict in the report's words (PASS, FAIL …, translated) and its
    source as a reader sees it (the published reports named, no internal documents)."""
    return dataclasses.replace(row, verdict_word=_verdict_words()[row.verdict],
                               measured_text=_unit_kept(row.measured_text),
                               requirement=_unit_kept(row.requirement),
                               explanation=_unit_kept(row.explanation),
                               reference_source=source_words(row.reference_source))


_FIGURE_UNIT = re.compile(r"(\d)[ \u00a0](GB/s|GB|Gb/s|MB/s|Mb/s|tok/s|s|h|%|K)(?![\w/])")
_PER_SECOND = re.compile(r"\b(GB|Gb|MB|Mb|tok)/s\b")
WORD_JOINER = "\u2060"  # invisible; pdftotext and copy-paste drop it


def _unit_kept(text: str) -> str:
    """``text`` with a non-breaking space between each figure and its unit ("12.50 GB/s") and
    a word joiner after the slash of a rate, so a line never ends inside "12.50 GB/s"."""
    text = _FIGURE_UNIT.sub("\\1\u00a0\\2", text)
    return _PER_SECOND.sub(lambda found: f"{found[1]}/{WORD_JOINER}s", text)


def _plain_lines(section: GateSection, *, only_headlines: bool) -> dict:
    """Page 1's "what was measured against what" of one gate: every criterion's plain
    sentence (a gate report), or only the comparisons and the checks not met (the final
    report, one block per gate) with the count of the other checks met."""
    words = _verdict_words()
    shown = [c for c in section.criteria if c.plain and (c.headline or not only_headlines)]
    return {
        "title": _gate_title(section.gate_code, section.gate_name),
        "outcome": section.decision_outcome,
        "outcome_word": _outcome_words()[section.decision_outcome],
        "lines": [{"text": _unit_kept(c.plain), "verdict": c.verdict,
                   "verdict_word": words[c.verdict]}
                  for c in shown],
        "others_met": sum(1 for c in section.criteria
                          if c not in shown and c.verdict == "pass"),
    }


@dataclass(frozen=True)
class _NumberedRun:
    number: int
    gate: str
    row: EvidenceRow
    start: int = 0  # where its raw output begins in its bundle's attachment (row.bundle)

    @property
    def attachment(self) -> str:
        if self.row.bundle:
            return bundle_name(self.row.bundle)
        return attachment_name(self.number, self.row.node, self.row.probe)

    @property
    def range(self) -> list[int] | None:
        """[start, length] of its raw output in a bundle's attachment; None for its own."""
        if not self.row.bundle or self.row.raw_output is None:
            return None
        return [self.start, len(self.row.raw_output)]


def numbered_runs(ctx: GateReportContext) -> list[_NumberedRun]:
    """Every run of the report, numbered 1… in appendix order (gate by gate); a bundled run's
    raw output follows the previous one of its bundle."""
    out, number = [], 0
    ends: dict[str, int] = {}
    for section in ctx.gate_sections():
        for row in section.runs:
            number += 1
            start = 0
            if row.bundle and row.raw_output is not None:
                start = ends.get(row.bundle, 0)
                ends[row.bundle] = start + len(row.raw_output)
            out.append(_NumberedRun(number, section.gate_code, row, start))
    return out


def _run(item: _NumberedRun) -> _RunView:
    row = item.row
    return _RunView(
        number=item.number, gate=item.gate, node=row.node, probe=row.probe, command=row.command,
        tool_version=row.tool_version or "—", started=_second(row.started_at),
        finished=_finish(row.started_at, row.finished_at),
        exit_code="—" if row.exit_code is None else str(row.exit_code),
        exit_ok=row.exit_code == 0, sha256=row.sha256 or "—", simulated=row.simulated,
        state=row.state, attachment=item.attachment if row.raw_output is not None else "",
    )


def _count_words(counter: dict[str, int]) -> str:
    """ "128 parsed, 2 failed" (most frequent first)."""
    return ", ".join(f"{n} {word}" for word, n in sorted(counter.items(), key=lambda i: -i[1]))


def _exit_text(codes: list[int | None]) -> tuple[str, bool]:
    """ "exit 0", or the statuses other than 0 with their counts; and whether all were 0."""
    bad: dict[str, int] = {}
    for code in codes:
        if code != 0:
            key = "—" if code is None else str(code)
            bad[key] = bad.get(key, 0) + 1
    if not bad:
        return "exit 0", True
    return "exit " + ", ".join(f"{c} ×{n}" for c, n in bad.items()), False


def probe_rows(items: list[_NumberedRun]) -> list[dict]:
    """One row per gate and probe of the appendix: how many runs on how many nodes, the
    command (of the first run; how many other parameter sets), the tool version(s), the states
    and exit statuses. Its length follows the probes, never the nodes."""
    groups: dict[tuple[str, str], list[_NumberedRun]] = {}
    for item in items:
        groups.setdefault((item.gate, item.row.probe), []).append(item)
    rows = []
    for (gate, probe), members in groups.items():
        commands = list(dict.fromkeys(m.row.command for m in members))
        versions = list(dict.fromkeys(m.row.tool_version or "—" for m in members))
        states: dict[str, int] = {}
        for m in members:
            states[m.row.state] = states.get(m.row.state, 0) + 1
        exits, exit_ok = _exit_text([m.row.exit_code for m in members])
        rows.append({
            "gate": gate, "probe": probe, "runs": len(members),
            "nodes": len({m.row.node for m in members}), "command": commands[0],
            "other_commands": len(commands) - 1, "tool_version": " · ".join(versions[:3]),
            "other_versions": max(0, len(versions) - 3), "states": _count_words(states),
            "exits": exits, "exit_ok": exit_ok,
            "simulated": any(m.row.simulated for m in members)})
    return rows


def node_rows(items: list[_NumberedRun], figures: dict[str, dict[str, str]]) -> list[dict]:
    """One row per gate and node of the appendix: its runs, their states and exit statuses,
    and its charted figures (``figures``: gate → node → text), in node order."""
    groups: dict[tuple[str, str], list[_NumberedRun]] = {}
    for item in items:
        groups.setdefault((item.gate, item.row.node), []).append(item)
    rows = []
    for (gate, node), members in groups.items():
        states: dict[str, int] = {}
        for m in members:
            states[m.row.state] = states.get(m.row.state, 0) + 1
        exits, exit_ok = _exit_text([m.row.exit_code for m in members])
        rows.append({
            "gate": gate, "node": node, "runs": len(members), "states": _count_words(states),
            "exits": exits, "exit_ok": exit_ok,
            "figures": figures.get(gate, {}).get(node, "") or "—",
            "simulated": any(m.row.simulated for m in members)})
    return sorted(rows, key=lambda r: (r["gate"], _natural(r["node"])))


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospace font (East Asian wide characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _fit(text: str, width: int) -> str:
    """``text`` padded to ``width`` columns, or cut with "…" to fit them."""
    if _width(text) > width:
        while text and _width(text) > width - 1:
            text = text[:-1]
        text += "…"
    return text + " " * (width - _width(text))


def text_lines(rows: list[list[str]], caps: list[int]) -> list[str]:
    """``rows`` as lines of aligned columns (each as wide as its widest cell, at most its cap;
    the last column as it is). A row is one line of text: WeasyPrint lays it out as one box,
    where a table row of cells costs about five times as much (256 rows: 0.3 s vs 1.6 s)."""
    widths = [min(cap, max(_width(r[i]) for r in rows)) for i, cap in enumerate(caps)]
    return ["  ".join([_fit(cell, w) for cell, w in zip(row, widths, strict=False)]
                      + row[len(caps):]).rstrip() for row in rows]


def node_lines(rows: list[dict], final: bool) -> list[dict]:
    """The node table's rows as one aligned line each: ``{"text", "bad", "simulated"}``."""
    cells = []
    for r in rows:
        runs = ngettext("%(n)d run", "%(n)d runs", r["runs"]) % {"n": r["runs"]}
        cells.append(([r["gate"]] if final else []) + [
            r["node"], "SIM" if r["simulated"] else "", runs, f"{r['states']} · {r['exits']}",
            r["figures"]])
    caps = ([3] if final else []) + [28, 3, 9, 34]
    return [{"text": text, "bad": not r["exit_ok"], "simulated": r["simulated"]}
            for text, r in zip(text_lines(cells, caps), rows, strict=True)] if cells else []


def inventory_lines(nodes: list) -> list[str]:
    """The inventory (name, role, address, pinned host key) as one aligned line per node, in
    natural order (lab-inference-2 before lab-inference-10)."""
    cells = [[n.name, n.role, n.address, n.host_key_fingerprint]
             for n in sorted(nodes, key=lambda n: _natural(n.name))]
    return text_lines(cells, [28, 18, 21]) if cells else []


def _natural(name: str) -> tuple:
    """lab-inference-2 before lab-inference-10 (numbers compared as numbers)."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                 for p in re.split(r"(\d+)", name))


def _verdict_summary(criteria: list[VerdictRow]) -> str:
    """ "5 criteria: 4 pass, 1 fail" in the fixed verdict order, zero counts left out."""
    words = _verdict_words()
    counts = {verdict: 0 for verdict in words}
    for row in criteria:
        counts[row.verdict] += 1
    parts = [f"{n} {words[v].lower()}" for v, n in counts.items() if n]
    if not parts:
        return _("No criteria recorded.")
    head = ngettext("%(n)d criterion", "%(n)d criteria", len(criteria)) % {"n": len(criteria)}
    return f"{head}: " + ", ".join(parts)


def _gate_title(code: str, name: str) -> str:
    return f"{code} {_(name)}".strip()


def _localized_sentence(section: GateSection) -> str:
    """The decision in one sentence in the report's language, from the verdicts."""
    met = sum(1 for c in section.criteria if c.verdict == "pass")
    return _("%(gate)s: %(outcome)s — %(met)d of %(total)d criteria met.") % {
        "gate": _gate_title(section.gate_code, section.gate_name),
        "outcome": _outcome_words()[section.decision_outcome], "met": met,
        "total": len(section.criteria)}


def _section_view(section: GateSection, runs: list[_RunView], english: bool) -> dict:
    return {
        "code": section.gate_code,
        "title": _gate_title(section.gate_code, section.gate_name),
        "outcome": section.decision_outcome,
        "outcome_word": _outcome_words()[section.decision_outcome],
        "sentence": section.decision_sentence if english else _localized_sentence(section),
        "recorded_sentence": "" if english else section.decision_sentence,
        "decided_at": _minute(section.decided_at),
        "decided_by": section.decided_by,
        "criteria": [_criterion(row) for row in section.criteria],
        "verdict_summary": _verdict_summary(section.criteria),
        "reference_profile": (section.basis or {}).get("reference_profile"),
        "charts": section.charts,
        "runs": [r for r in runs if r.gate == section.gate_code],
    }


def _party_word(party: str) -> str:
    return {"vendor": _("Vendor"), "customer": _("Customer")}.get(party, party)


def report_template_context(ctx: GateReportContext) -> dict[str, object]:
    """The plain values the template shows, in the active language; public so views can render
    the same page."""
    english = translation.get_language() in (None, "en", "en-us")
    sections = ctx.gate_sections()
    items = numbered_runs(ctx)
    runs = [_run(item) for item in items]
    section_views = [_section_view(s, runs, english) for s in sections]
    first = section_views[0]
    if ctx.kind == "final":
        title = _("Final acceptance report")
        gate_title = (first["title"] if len(sections) == 1 else
                      _("Gates %(first)s–%(last)s") % {"first": sections[0].gate_code,
                                                       "last": sections[-1].gate_code})
        headline = ctx.decision_sentence
    else:
        title = _("Gate report")
        gate_title = first["title"]
        headline = first["sentence"]
    signoff_by_party = {s.party: s for s in ctx.signoffs}
    signoff_rows = []
    for party, role in (("vendor", _("project manager")),
                        ("customer", _("customer representative"))):
        s = signoff_by_party.get(party)
        # the role in the report's language (the stored text is in the signer's language)
        role_text = (_("project manager (vendor)") if party == "vendor"
                     else _("customer representative (%(org)s)") % {"org": ctx.customer})
        signoff_rows.append({
            "party": _party_word(party), "expected_role": role, "signed": s is not None,
            "name": s.name if s else "", "role": role_text if s else "",
            "at": _minute(s.at) if s else "", "comment": s.comment if s else ""})
    marks = [m for m, present in ((SIMULATED_MARK, ctx.simulated), (IMPORTED_MARK, ctx.imported))
             if present]
    translated_marks = [t for t, present in ((_("SIMULATED EVIDENCE"), ctx.simulated),
                                             (_("IMPORTED EVIDENCE"), ctx.imported))
                        if present and not english]
    return {
        "r": ctx,
        "lang": ctx.html_lang,
        "title": title,
        "gate_title": gate_title,
        "document_title": f"{ctx.engagement_name} — {gate_title} — {title} v{ctx.version}",
        "outcome": ctx.decision_outcome,
        "outcome_word": _outcome_words()[ctx.decision_outcome],
        "headline": headline,
        "recorded_sentence": "" if english or ctx.kind == "final" else ctx.decision_sentence,
        "due_date": _day(ctx.due_date),
        "engagement_start": _day(ctx.engagement_start),
        "engagement_end": _day(ctx.engagement_start and _end(ctx.engagement_start)),
        "decided_at": _minute(ctx.decided_at),
        "decided_at_iso": ctx.decided_at.astimezone(UTC).isoformat(timespec="seconds"),
        "sections": section_views,
        "criteria": first["criteria"],
        "verdict_summary": first["verdict_summary"],
        "schedule": [{"gate": row.gate_title, "due": _day(row.due_date),
                      "state": row.state, "state_word": _(row.state),
                      "decided_at": _table_minute(row.decided_at),
                      "outcome_word": _outcome_words().get(row.outcome, "—")}
                     for row in ctx.schedule],
        "audit": [{"at": _table_minute(a.at), "actor": a.actor, "action": a.action,
                   "reason": a.reason} for a in ctx.audit],
        "bom": [{"item": b.item, "ticked_by": b.ticked_by or "—",
                 "ticked_at": _table_minute(b.ticked_at)} for b in ctx.bom],
        "nodes": ctx.nodes,
        "runs": runs,
        "probe_rows": probe_rows(items),
        "node_lines": node_lines(node_rows(items, {s.gate_code: s.node_figures
                                                   for s in sections}), ctx.kind == "final"),
        "inventory_lines": inventory_lines(ctx.nodes),
        "attached_runs": sum(1 for r in runs if r.attachment),
        "bundled_runs": sum(1 for item in items if item.range is not None),
        "simulated_runs": sum(1 for r in runs if r.simulated),
        "simulated_mark": SIMULATED_MARK,
        "page_mark": " · ".join(marks + translated_marks),
        "signoffs": signoff_rows,
        "signoff_complete": ctx.signoff_complete,
        "version": ctx.version,
        "replaces": ctx.replaces,
        "reason": ctx.reason,
        "summary_name": SUMMARY_NAME,
        "soak_section": ctx.soak_section,
        "soak_template": SOAK_TEMPLATE,
        "business_section": ctx.business_section,
        "plain": [_plain_lines(s, only_headlines=ctx.kind == "final") for s in sections],
        "references": _("; ").join(reports_named([c.reference_source for s in sections
                                                  for c in s.criteria])),
    }


def _end(start: date) -> date:
    return start + timedelta(weeks=10)


def render_gate_report_html(ctx: GateReportContext) -> str:
    """The report as one self-contained HTML document (print CSS inline, no URLs)."""
    with translation.override(django_language(ctx.language)):
        return render_to_string(TEMPLATE, report_template_context(ctx))


def report_summary(ctx: GateReportContext) -> dict:
    """The machine-readable report embedded as ``summary.json``: the decision(s), every
    criterion (measured value with unit, threshold, reference source, verdict) and every run
    (node, command, tool version, times, sha256 of raw output, attachment name)."""
    runs = numbered_runs(ctx)
    return {
        "format": SUMMARY_FORMAT,
        # 2: every gate carries "redecide", what its decision rests on (reports.basis)
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "kind": ctx.kind,
        "engagement": ctx.engagement_name,
        "customer": ctx.customer,
        "vendor": ctx.vendor,
        "version": ctx.version,
        "replaces": ctx.replaces or None,
        "reason": ctx.reason or None,
        "language": ctx.language,
        "simulated": ctx.simulated,
        "imported": ctx.imported,
        "decision": {"outcome": ctx.decision_outcome, "sentence": ctx.decision_sentence,
                     "decided_at": _iso(ctx.decided_at), "decided_by": ctx.decided_by},
        "gates": [{
            "gate": s.gate_code, "name": s.gate_name, "outcome": s.decision_outcome,
            "sentence": s.decision_sentence, "decided_at": _iso(s.decided_at),
            "decided_by": s.decided_by,
            "criteria": [{"metric": c.metric, "description": c.description,
                          "threshold": c.requirement, "measured": c.measured_text,
                          # "measured" carries its display unit (12.50 GB/s); this field
                          # stays empty, as format acceptance-report/1 has always written it
                          "unit": "", "reference_source": c.reference_source,
                          "verdict": c.verdict, "explanation": c.explanation}
                         for c in s.criteria],
            "redecide": s.basis,
        } for s in ctx.gate_sections()],
        "schedule": [{"gate": r.gate_title, "due": _iso(r.due_date), "state": r.state,
                      "decided_at": _iso(r.decided_at), "outcome": r.outcome or None}
                     for r in ctx.schedule],
        "signoffs": [{"party": s.party, "name": s.name, "role": s.role, "at": _iso(s.at),
                      "comment": s.comment} for s in ctx.signoffs],
        "runs": [{
            "number": item.number, "gate": item.gate, "node": item.row.node,
            "probe": item.row.probe, "command": item.row.command,
            "tool_version": item.row.tool_version, "started_at": _iso(item.row.started_at),
            "finished_at": _iso(item.row.finished_at), "exit_code": item.row.exit_code,
            "state": item.row.state, "simulated": item.row.simulated,
            "sha256": item.row.sha256,
            "attachment": item.attachment if item.row.raw_output is not None else None,
            **({"range": item.range} if item.range is not None else {}),
        } for item in runs],
    }


def _attachments(ctx: GateReportContext) -> list:
    # Imported here: WeasyPrint loads Pango and fontconfig, which web requests never need.
    from weasyprint import Attachment
    from weasyprint.urls import URLFetcher

    # One fetcher for every file (WeasyPrint builds a urllib opener per attachment otherwise:
    # 1 ms each, 74 k collection records at site scale); the files are in memory, none fetched.
    fetcher = URLFetcher(allowed_protocols={"data"})
    # Compact JSON: an indent makes json use its pure-Python encoder (10× slower; a G4
    # summary at 128 nodes × 72 h lists 0.6 M recorded figures). `python -m json.tool` shows
    # it indented. ASCII (other characters as \u escapes, the same JSON values): one byte a
    # character in the text a verifier parses (a summary with one "÷" is a 2-byte-a-character
    # Python string: at site scale 116 MB of JSON, 232 MB). Written piece by piece to a
    # temporary file the PDF writer reads once (reports.summary_file).
    files = [Attachment(file_obj=summary_file(report_summary(ctx)), name=SUMMARY_NAME,
                        description="Machine-readable summary of this report",
                        relationship="Data", url_fetcher=fetcher)]
    bundles: dict[str, list[bytes]] = {}
    for item in numbered_runs(ctx):
        raw = item.row.raw_output
        if raw is None:
            continue
        if item.row.sha256 and hashlib.sha256(raw).hexdigest() != item.row.sha256:
            raise ValueError(f"run {item.number} ({item.row.node} {item.row.probe}): the raw "
                             f"output does not hash to its recorded sha256 {item.row.sha256}")
        if item.row.bundle:
            bundles.setdefault(item.attachment, []).append(raw)
            continue
        files.append(Attachment(file_obj=io.BytesIO(raw), name=item.attachment,
                                description=f"Raw output of run {item.number}: {item.row.probe}"
                                            f" on {item.row.node}", relationship="Source",
                                url_fetcher=fetcher))
    for name, parts in bundles.items():
        files.append(Attachment(file_obj=io.BytesIO(b"".join(parts)), name=name,
                                description=f"Raw outputs of {len(parts)} runs, one after "
                                            f"another (each run's range in {SUMMARY_NAME})",
                                relationship="Source", url_fetcher=fetcher))
    return files


def render_html_pdf(html: str, *, attachments: list | None = None) -> bytes:
    """Render report HTML to PDF/A-3b, with ``attachments`` (weasyprint.Attachment) embedded."""
    # Imported here: WeasyPrint loads Pango and fontconfig, which web requests never need.
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher

    # The report must never reach the network: only inline data: URIs may be fetched.
    fetcher = URLFetcher(allowed_protocols={"data"})
    return HTML(string=html, url_fetcher=fetcher).write_pdf(
        pdf_variant=PDF_VARIANT, attachments=attachments or [])


def render_gate_report_pdf(ctx: GateReportContext) -> bytes:
    """The report as an A4 PDF/A-3b, unsigned, with summary.json and every run's raw output
    embedded. Raises ValueError when a raw output does not hash to its recorded sha256."""
    return render_html_pdf(render_gate_report_html(ctx), attachments=_attachments(ctx))
