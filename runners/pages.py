"""What the run pages show, as plain data built from the ledger (the templates only loop).

``run_status`` — the gate run, each node job and its probe runs with state, progress and errors;
``log_advance`` — the run's output from the byte offsets a browser holds, probe run after probe
run, so a page can keep appending to its log without reloading (the same reading as
``manage.py tail_run --gate-run``); ``run_results`` — the decision (``gates.presentation``
verdict rows), every measurement (``runners.presentation`` rows) and the charts
(``runners.charts.gate_run_charts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from acceptance.data_texts import decision_sentence_text
from acceptance.pages.words import ORIGIN_WORDS
from gates.presentation import verdict_row
from runners import charts, measurement_pages
from runners.forms import ROLE_CHOICES
from runners.live import output_read
from runners.models import GateRun, Measurement, NodeJob, ProbeRun
from runners.plans import PlanError, planned_probe_count
from runners.presentation import measurement_row

OVER = (GateRun.State.DONE, GateRun.State.FAILED, GateRun.State.CANCELLED)
LOG_BUDGET_PAGE = 256 << 10  # bytes of log the first page load carries
LOG_BUDGET_POLL = 128 << 10  # bytes of log one poll carries at most
LOG_PROBES_PER_READ = 60  # probe runs one read may step through

STATE_LABELS = {
    "queued": gettext_lazy("queued"),
    "connecting": gettext_lazy("connecting"),
    "running": gettext_lazy("running"),
    "evaluating": gettext_lazy("evaluating"),
    "parsing": gettext_lazy("parsing"),
    "parsed": gettext_lazy("parsed"),
    "done": gettext_lazy("done"),
    "failed": gettext_lazy("failed"),
    "cancelled": gettext_lazy("cancelled"),
    "timed_out": gettext_lazy("timed out"),
    "passed": gettext_lazy("passed"),
    "stopped": gettext_lazy("stopped"),
    "review": gettext_lazy("review"),
    "pending": gettext_lazy("pending"),
    "active": gettext_lazy("active"),
    "accepted": gettext_lazy("accepted"),
    "pass": gettext_lazy("pass"),
    "fail": gettext_lazy("fail"),
    "insufficient": gettext_lazy("insufficient data"),
}


def state_label(state: str) -> str:
    return str(STATE_LABELS.get(state, state))


def is_over(gate_run: GateRun) -> bool:
    return gate_run.state in OVER


# --- status: the run, its node jobs and probe runs ------------------------------------------


@dataclass
class ProbeRow:
    id: int
    probe: str
    detail: str  # arm / phase / round / device: what tells two runs of a probe apart
    state: str
    state_text: str
    progress: float | None
    progress_text: str
    progress_width: str  # CSS width of the bar, "45%"
    exit_code: int | None
    size_text: str
    error_kind: str
    error: str
    simulated: bool
    log_url: str
    size_bytes: int = 0  # stdout + stderr, for sorting by size
    pruned_text: str = ""  # "stdout pruned on 2027-01-05" (retention), else empty


@dataclass
class NodeRow:
    name: str
    role: str
    state: str
    state_text: str
    error_kind: str
    error: str
    failed: bool
    probes: list[ProbeRow] = field(default_factory=list)
    open: bool = True  # shown unfolded: while the run goes on, or when something failed
    summary: str = ""  # "50 probe runs: 49 parsed, 1 failed"
    carried_text: str = ""  # "evidence carried from attempt #1" (a per-node re-run)
    rerun_url: str = ""  # re-run this node alone (engineers, once the run is over)
    planned: int = 0  # probe runs the plan has for this node (runners.plans), known at start
    finished: int = 0  # of them: parsed, failed or cancelled


def _size_text(size: int) -> str:
    if size < 1024:
        return _("%(n)s B") % {"n": size}
    if size < 1 << 20:
        return _("%(n).1f KiB") % {"n": size / 1024}
    return _("%(n).1f MiB") % {"n": size / (1 << 20)}


def _detail(run: ProbeRun) -> str:
    parts = [f"{k} {v}" for k, v in run.labels.items() if v not in ("", None)]
    if run.arm and "arm" not in run.labels:
        parts.insert(0, f"arm {run.arm}")
    for key in ("device", "controller"):
        if key in run.parameters and run.parameters[key]:
            parts.append(str(run.parameters[key]))
    return " · ".join(parts)


def probe_row(run: ProbeRun, gate_run_id: int) -> ProbeRow:
    progress = run.progress
    return ProbeRow(
        id=run.id, probe=run.probe, detail=_detail(run), state=run.state,
        state_text=state_label(run.state), progress=progress,
        progress_text="" if progress is None else f"{progress:.0f} %",
        progress_width="" if progress is None else f"{max(0.0, min(progress, 100.0)):.0f}%",
        exit_code=run.exit_code, size_text=_size_text(run.stdout_size + run.stderr_size),
        error_kind=run.error_kind, error=run.error, simulated=run.simulated,
        log_url=reverse("run-detail", args=[gate_run_id]) + f"?probe={run.id}#log",
        size_bytes=run.stdout_size + run.stderr_size, pruned_text=pruned_text(run.stdout_pruned_at),
    )


def pruned_text(pruned_at) -> str:
    """What a pruned stdout says in place of its bytes (retention: ``runners.retention``)."""
    if pruned_at is None:
        return ""
    return _("stdout pruned on %(date)s (retention): its sha256 and size are kept and the signed "
             "report embeds it") % {"date": f"{pruned_at:%Y-%m-%d}"}


def node_rows(gate_run: GateRun) -> list[NodeRow]:
    """One row per node job (and one for evidence the service holds, such as the BOM), each
    with its probe runs in the order they started. In a per-node re-run, the nodes whose
    evidence is carried show the probe runs of the attempt that ran them, and say so."""
    roles = dict(ROLE_CHOICES)
    rows: dict[int | None, NodeRow] = {}
    service = ProbeRun.objects.filter(gate_run=gate_run, node__isnull=True).order_by("id")
    runs = (gate_run.evidence_probe_runs().filter(node__isnull=False)
            .defer("stdout", "stderr").order_by("id"))
    if service.exists():
        rows[None] = NodeRow(name=_("service"), role=_("evidence the service holds"),
                             state="done", state_text=state_label("done"), error_kind="",
                             error="", failed=False)
    over = is_over(gate_run)
    # One node is re-run from the latest attempt only (a later one supersedes this one).
    latest = over and not GateRun.objects.filter(gate_id=gate_run.gate_id,
                                                 attempt__gt=gate_run.attempt).exists()
    planned: dict[int | None, int] = {}
    for job in NodeJob.objects.filter(gate_run=gate_run).select_related(
            "node__array", "carried_from__gate_run").order_by("node__name"):
        # A job that is done shows what it ran (below): its plan is not worked out again.
        if not job.carried_from_id and job.state != NodeJob.State.DONE:
            try:
                planned[job.node_id] = planned_probe_count(gate_run.gate, job.node)
            except PlanError:
                planned[job.node_id] = 0
        failed = job.state in (NodeJob.State.FAILED, NodeJob.State.CANCELLED,
                               NodeJob.State.TIMED_OUT)
        rows[job.node_id] = NodeRow(
            name=job.node.name, role=str(roles.get(job.node.role, job.node.role)),
            state=job.state,
            state_text=state_label(job.state), error_kind=job.error_kind, error=job.error,
            failed=failed,
            carried_text=_("evidence carried from attempt #%(n)s (not run again)") % {
                "n": job.carried_from.gate_run.attempt} if job.carried_from_id else "")
    for run in service.defer("stdout", "stderr"):
        rows[None].probes.append(probe_row(run, gate_run.id))
    for run in runs:
        if run.node_id in rows:
            rows[run.node_id].probes.append(probe_row(run, run.gate_run_id))
    for node_id, row in rows.items():
        states: dict[str, int] = {}
        for probe in row.probes:
            states[probe.state] = states.get(probe.state, 0) + 1
        trouble = row.failed or any(s in states for s in ("failed", "cancelled"))
        row.open = (not over or trouble) and not row.carried_text
        if latest and trouble and node_id is not None:
            name = row.name
            row.rerun_url = reverse("run-rerun", args=[gate_run.id]) + "?" + urlencode(
                {"node": name})
        row.finished = sum(n for s, n in states.items() if s in FINISHED_PROBE_STATES)
        # A node that is done ran exactly what it found (23 drives, not the 24 expected).
        row.planned = len(row.probes) if row.state == NodeJob.State.DONE or node_id is None \
            else max(planned.get(node_id, 0), len(row.probes))
        counted = ", ".join(f"{n} {state_label(s)}" for s, n in sorted(states.items()))
        row.summary = (ngettext("%(n)s probe run", "%(n)s probe runs", len(row.probes))
                       % {"n": len(row.probes)}) + (f": {counted}" if counted else "")
    return list(rows.values())


def run_simulated(gate_run: GateRun) -> bool:
    """Simulated evidence: a lab engagement, or any output a lab stand-in produced."""
    return gate_run.gate.engagement.is_lab or gate_run.probe_runs.filter(simulated=True).exists()


FINISHED_PROBE_STATES = ("parsed", "failed", "cancelled")


def run_progress(rows: list[NodeRow], gate_run: GateRun, now: datetime) -> dict:
    """The run's progress bar: probe runs finished of those planned (known from the start:
    probes per node from the plan), as a percent and a CSS width, and the time elapsed since
    the run was created (until it finished)."""
    planned = sum(r.planned for r in rows)
    finished = sum(r.finished for r in rows)
    percent = 100.0 if is_over(gate_run) and gate_run.state == GateRun.State.DONE else (
        100.0 * finished / planned if planned else 0.0)
    end = gate_run.finished_at or now
    return {"planned": planned, "finished": finished, "percent_text": f"{percent:.0f} %",
            "width": f"{min(percent, 100.0):.0f}%",
            "elapsed_s": max(0, int((end - gate_run.created_at).total_seconds())),
            "elapsed_text": elapsed_text((end - gate_run.created_at).total_seconds())}


def elapsed_text(seconds: float) -> str:
    """``4 s``, ``2 min 05 s``, ``1 h 02 min``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return _("%(s)d s") % {"s": seconds}
    if seconds < 3600:
        return _("%(m)d min %(s)02d s") % {"m": seconds // 60, "s": seconds % 60}
    return _("%(h)d h %(m)02d min") % {"h": seconds // 3600, "m": seconds % 3600 // 60}


def run_counts(rows: list[NodeRow]) -> dict[str, int]:
    probes = [p for r in rows for p in r.probes]
    return {"nodes": sum(1 for r in rows if r.name != _("service")),
            "probes": len(probes),
            "finished": sum(1 for p in probes if p.state in FINISHED_PROBE_STATES),
            "failed": sum(1 for p in probes if p.state == "failed")}


# --- the log: every probe run's output in turn, from the offsets the browser holds -----------


@dataclass(frozen=True)
class LogCursor:
    """Where a browser's log is: probe run followed (None: not started), byte offsets of its
    stdout and stderr, whether the person pinned one probe run, and whether the page already
    shows the results (so a poll need not send them again)."""

    probe: int | None = None
    out: int = 0
    err: int = 0
    pinned: bool = False
    results_shown: bool = False

    def query(self) -> str:
        values = {"probe": "" if self.probe is None else self.probe, "out": self.out,
                  "err": self.err, "pin": int(self.pinned), "res": int(self.results_shown)}
        return urlencode(values)


class BadCursor(ValueError):
    """The query string does not name a position in this run's log."""


def cursor_from(query, gate_run: GateRun) -> LogCursor:
    """Parse ``probe``, ``out``, ``err``, ``pin``, ``res`` from a query dict (BadCursor)."""
    try:
        probe_text = query.get("probe", "")
        probe = int(probe_text) if probe_text not in ("", None) else None
        out, err = int(query.get("out", 0)), int(query.get("err", 0))
        pinned, shown = query.get("pin", "0") == "1", query.get("res", "0") == "1"
    except (TypeError, ValueError):
        raise BadCursor("probe, out and err must be whole numbers") from None
    if out < 0 or err < 0:
        raise BadCursor("offsets must be >= 0")
    if probe is not None and not gate_run.probe_runs.filter(id=probe).exists():
        raise BadCursor("no such probe run in this gate run")
    if pinned and probe is None:
        raise BadCursor("pin needs a probe run")
    return LogCursor(probe, out, err, pinned, shown)


@dataclass(frozen=True)
class LogPiece:
    kind: str  # "head" (which probe run follows), "out" (stdout), "err" (stderr)
    text: str


def _complete_utf8(data: bytes) -> bytes:
    """``data`` without an incomplete UTF-8 sequence at its end (it completes next read)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue
        if byte < 0x80:
            return data
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return data if back >= need else data[:-back]
    return data


def _head(run: ProbeRun) -> LogPiece:
    where = run.node.name if run.node else _("service")
    detail = _detail(run)
    return LogPiece("head", f"── {where} · {run.probe}{' · ' + detail if detail else ''} ──\n")


def log_advance(gate_run: GateRun, cursor: LogCursor,
                budget: int = LOG_BUDGET_POLL) -> tuple[list[LogPiece], LogCursor, bool]:
    """New log text from ``cursor`` on, at most ``budget`` bytes: the followed probe run's new
    stdout and stderr, then (unless pinned) the next probe runs in the order they started.

    Returns the pieces, the cursor to ask from next time and whether the log is complete
    (the run is over and every byte of it has been handed out).
    """
    ids = list(gate_run.probe_runs.order_by("id").values_list("id", flat=True))
    pieces: list[LogPiece] = []
    used = 0
    over = is_over(gate_run)  # read before the output: a run that ends meanwhile is read again
    if cursor.probe is None:
        if not ids:
            return pieces, cursor, over
        cursor = LogCursor(ids[0], 0, 0, False, cursor.results_shown)
        pieces.append(_head(ProbeRun.objects.select_related("node").defer(
            "stdout", "stderr").get(id=ids[0])))
    for _step in range(LOG_PROBES_PER_READ):
        offsets = {"stdout": cursor.out, "stderr": cursor.err}
        finished = True
        for stream, kind in (("stdout", "out"), ("stderr", "err")):
            room = budget - used
            if room <= 0:
                finished = False
                break
            piece = output_read(cursor.probe, stream=stream, offset=offsets[stream], limit=room)
            if piece.pruned_at is not None and offsets[stream] == 0:
                pieces.append(LogPiece("head", f"[{pruned_text(piece.pruned_at)}]\n"))
            data = piece.data if piece.finished else _complete_utf8(piece.data)
            if data:
                pieces.append(LogPiece(kind, data.decode("utf-8", errors="replace")))
                used += len(data)
            offsets[stream] += len(data)
            finished = finished and piece.finished and len(data) == len(piece.data)
        cursor = LogCursor(cursor.probe, offsets["stdout"], offsets["stderr"], cursor.pinned,
                           cursor.results_shown)
        if not finished:
            return pieces, cursor, False
        if cursor.pinned:
            return pieces, cursor, over
        later = [i for i in ids if i > cursor.probe]
        if not later:
            return pieces, cursor, over
        cursor = LogCursor(later[0], 0, 0, False, cursor.results_shown)
        pieces.append(_head(ProbeRun.objects.select_related("node").defer(
            "stdout", "stderr").get(id=later[0])))
    return pieces, cursor, False


# --- results: decision, measurements, charts -------------------------------------------------


MEASUREMENTS_PER_PAGE = measurement_pages.PER_PAGE


def run_results(gate_run: GateRun, measurements_cursor: str | None = None) -> dict:
    """The decision with every criterion's verdict, one page of the measurements (metric,
    node as registered, id; the page ``measurements_cursor`` names, by keyset:
    ``runners.measurement_pages``, ``BadCursor`` when it is not one) and the charts."""
    decision = getattr(gate_run, "decision", None) if gate_run.state == "done" else None
    verdicts = [verdict_row(v, words=STATE_LABELS) for v in decision.verdicts.all()] \
        if decision is not None else []
    simulated_runs = set(gate_run.evidence_probe_runs().filter(simulated=True).values_list(
        "id", flat=True))
    lab = gate_run.gate.engagement.is_lab
    attempts = dict(gate_run.gate.runs.values_list("id", "attempt"))
    # The index ``measurement_run_page`` walked from the link's row to the page's ids (the
    # same cost on every page), then only those rows are read whole.
    page = measurement_pages.measurement_page(
        gate_run, measurement_pages.cursor_from(measurements_cursor))
    ids = page.ids
    by_id = Measurement.objects.select_related("node").in_bulk(ids)
    rows = [
        measurement_row(m, simulated=lab or m.probe_run_id in simulated_runs,
                        carried="" if m.gate_run_id == gate_run.id else
                        _("carried from attempt #%(n)s") % {
                            "n": attempts.get(m.gate_run_id, "?")})
        for m in (by_id[i] for i in ids)
    ]
    report = getattr(decision, "report", None) if decision is not None else None
    report_url = ""
    if report is not None:
        try:
            report_url = reverse("report-download", args=[report.id])
        except NoReverseMatch:  # the report pages are not installed
            report_url = ""
    return {
        "decision": decision,
        "decision_outcome_text": state_label(decision.outcome) if decision else "",
        "decision_sentence": decision_sentence_text(decision.sentence) if decision else "",
        "verdicts": verdicts,
        "measurements": rows,
        "measurements_page": page,
        "measurement_links": _measurement_links(gate_run, page),
        "charts": charts.gate_run_charts(gate_run),
        "report_name": report.path.rsplit("/", 1)[-1] if report else "",
        "report_sha256": report.sha256 if report else "",
        "report_url": report_url,
    }


def _measurement_links(gate_run: GateRun, page: measurement_pages.MeasurementPage) -> dict:
    """The First / Previous / Next / Last links of the measurements ("" when none)."""
    url = reverse("run-detail", args=[gate_run.id])

    def link(cursor: measurement_pages.Cursor | None) -> str:
        if cursor is None:
            return ""
        token = cursor.token()
        query = "?" + urlencode({measurement_pages.PARAMETER: token}) if token else ""
        return f"{url}{query}#measurements"

    return {"first": link(page.first), "previous": link(page.previous),
            "next": link(page.next), "last": link(page.last)}


# --- the "Runs" list of an engagement -------------------------------------------------------


@dataclass
class RunListRow:
    id: int
    url: str
    gate: str
    attempt: int
    state: str
    state_text: str
    origin: str
    started_by: str
    created_at: str
    finished_at: str
    elapsed_s: int
    elapsed_text: str
    outcome: str
    outcome_text: str
    error: str


def run_list_rows(runs, now: datetime) -> list[RunListRow]:
    """``runs`` (gate and decision read through ``select_related``) as list rows."""
    rows = []
    for run in runs:
        decision = getattr(run, "decision", None)  # None: no decision (reverse one-to-one)
        seconds = max(0, int(((run.finished_at or now) - run.created_at).total_seconds()))
        outcome = decision.outcome if decision else ""
        rows.append(RunListRow(
            id=run.id, url=reverse("run-detail", args=[run.id]), gate=run.gate.code,
            attempt=run.attempt, state=run.state, state_text=state_label(run.state),
            origin=str(ORIGIN_WORDS.get(run.origin, run.origin)), started_by=run.started_by,
            created_at=run.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            finished_at=run.finished_at.strftime("%Y-%m-%d %H:%M UTC") if run.finished_at
            else "", elapsed_s=seconds, elapsed_text=elapsed_text(seconds),
            outcome=outcome, outcome_text=state_label(outcome) if outcome else "",
            error=run.error.splitlines()[0] if run.error else ""))
    return rows
