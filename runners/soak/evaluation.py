"""Judging the soak: the span figures from the stored samples (``runners.soak.steady``), the
live check states while it runs, and the decision at the end (``gates.evaluation`` on G4's
criteria, recorded with ``gates.services.decision_record``). A stop names the fault window and
the check that failed.

The signed report is not issued here: ``soak_decide`` returns the decision and the door
(``runners.soak.tasks``) issues the report, then calls ``soak_finish`` or, when the report
failed, ``soak_report_failed``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from django.db import connection, transaction
from django.db.models import Case, F, FloatField, Func, JSONField, QuerySet, Value, When
from django.utils import timezone

from acceptance import events
from gates import evaluation
from gates.models import Decision
from gates.services import criterion_spec, decision_record
from runners.decision import simulated_evidence_error
from runners.models import GateRun, Measurement
from runners.soak import steady
from runners.soak.digest import digest_rebuild
from runners.soak.events import event_record
from runners.soak.models import Soak, SoakWindow
from runners.soak.plan import real_s

logger = logging.getLogger(__name__)


WINDOW_METRICS = steady.WINDOW_METRICS


def windows_fold(rows: Iterable[tuple[int, str, float, dict, float, str]]
                 ) -> list[steady.Window]:
    """Fold window rows ``(id, metric, value, labels, sampled_at epoch, node)`` into windows
    with the pure core's ``steady.windows_of``: the collection folds each window once with
    it, the from-scratch path folds every row."""
    return steady.windows_of(steady.Row(i, node, metric, value, labels, at)
                             for i, metric, value, labels, at, node in rows)


def soak_windows_scratch(soak: Soak) -> list[steady.Window]:
    """Every window of the soak re-grouped from all its measurement rows (the from-scratch
    computation the stored ``SoakWindow`` aggregates must equal; also the path for a soak
    collected before the aggregates existed)."""
    rows = Measurement.objects.filter(
        gate_run_id=soak.gate_run_id, derived=False, metric__in=WINDOW_METRICS).order_by(
        "id").values_list("id", "metric", "value", "labels", "sampled_at", "node__name")
    return windows_fold((i, m, v, lab, at.timestamp(), n) for i, m, v, lab, at, n
                        in rows.iterator(chunk_size=5000))


def soak_windows_stored(soak: Soak, *, ids: bool = True) -> list[steady.Window]:
    """The soak's windows from its ``SoakWindow`` aggregates: one row per window, one query;
    ``ids=False``: without the measurement ids they were folded from (the live figures link
    no inputs)."""
    columns = ("node__name", "index", "start", "end", "completed", "failed", "ttft_p99",
               "output_throughput", "completion_gap_max", "first_completion", "last_completion")
    rows = SoakWindow.objects.filter(soak=soak).order_by("node__name", "index")
    if not ids:
        return [steady.Window(*row) for row in rows.values_list(*columns).iterator(
            chunk_size=5000)]
    # A window with its rows per metric: its ids are those, in row order (one JSON column
    # decoded a window, not two: 37 k windows at 128 nodes × 72 h); one folded before they
    # were kept: every row it came from.
    older = Case(When(metric_ids=[], then=F("measurement_ids")), default=Value(None),
                 output_field=JSONField())
    windows = []
    for row in _plain_rows(rows.values_list(*columns, older, "metric_ids")):
        metric_ids = tuple(json.loads(row[-1]))
        windows.append(steady.Window(
            *row[:-2], tuple(sorted(i for i in metric_ids if i)) if metric_ids
            else tuple(json.loads(row[-2] or "[]")), metric_ids))
    return windows


def _plain_rows(rows: QuerySet) -> Iterator[tuple]:
    """The rows of a ``values_list`` query as the database driver gives them, JSON as text:
    without Django's converters, called per row per column (the evaluation reads 0.15 M rows
    at 128 nodes × 72 h). Only for columns the driver gives as Python wants them (numbers,
    text; not times on SQLite)."""
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while chunk := cursor.fetchmany(5000):
            yield from chunk


def soak_windows_rebuild(soak: Soak) -> int:
    """Store the ``SoakWindow`` aggregates of a soak collected before they existed (from
    :func:`soak_windows_scratch`); the number of windows stored (0 when it has them)."""
    if SoakWindow.objects.filter(soak=soak).exists():
        return 0
    nodes = dict(soak.gate_run.gate.engagement.nodes.values_list("name", "id"))
    windows = soak_windows_scratch(soak)
    SoakWindow.objects.bulk_create([SoakWindow(
        soak=soak, node_id=nodes[w.node], index=w.index, start=w.start, end=w.end,
        completed=w.completed, failed=w.failed, ttft_p99=w.ttft_p99,
        output_throughput=w.output_throughput, completion_gap_max=w.gap_max,
        first_completion=w.first_completion, last_completion=w.last_completion,
        measurement_ids=list(w.ids), metric_ids=list(w.metric_ids)) for w in windows],
        batch_size=2000)
    digest_rebuild(soak)
    return len(windows)


def soak_inputs(soak: Soak, *, ids: bool = True) -> tuple[
        list[steady.Window], list[steady.Answer], list[steady.Fault]]:
    """The soak's windows (its stored aggregates; re-grouped from the samples for a soak that
    has none), correctness answers and injected fault windows: the inputs of
    ``steady.derive``; ``ids=False``: the windows without their measurement ids."""
    windows = soak_windows_stored(soak, ids=ids) or soak_windows_scratch(soak)
    rows = Measurement.objects.filter(gate_run_id=soak.gate_run_id, metric="probe_mismatches",
                                      derived=False).order_by("id")
    if connection.vendor == "postgresql":
        # The time as epoch seconds from the database, not a datetime parsed per row (0.11 M
        # answers at 128 nodes × 72 h): microseconds ÷ 10⁶ rounded once to a double, the
        # same float as ``datetime.timestamp()``.
        rows = rows.annotate(at_s=Func(F("sampled_at"), output_field=FloatField(),
                                       template="EXTRACT(EPOCH FROM %(expressions)s)::float8"))
        answers = [steady.Answer(node, at, value, id_) for id_, value, node, at in
                   _plain_rows(rows.values_list("id", "value", "node__name", "at_s"))]
    else:
        answers = [steady.Answer(node, at.timestamp(), value, id_) for id_, value, node, at in
                   rows.values_list("id", "value", "node__name", "sampled_at").iterator(
                       chunk_size=5000)]
    faults = [steady.Fault(f.name, f.injected_at.timestamp(),
                           f.healed_at.timestamp() if f.healed_at else None)
              for f in soak.faults.filter(injected_at__isnull=False)]
    return windows, answers, faults


def soak_spans(soak: Soak) -> dict:
    """The plan's steady-state numbers the figures are derived with (real seconds)."""
    plan = soak.plan
    return {"baseline_windows": int(plan["steady_state"]["baseline_windows"]),
            "before_s": real_s(plan, plan["steady_state"]["before_s"]),
            "after_s": real_s(plan, plan["steady_state"]["after_s"])}


def soak_figures(soak: Soak, inputs: tuple[list[steady.Window], list[steady.Answer],
                                           list[steady.Fault]] | None = None
                 ) -> list[steady.SpanFigure]:
    """Every span figure of the soak so far: ``steady.derive`` on ``inputs`` (by default
    :func:`soak_inputs`), a pure function of the windows, answers and faults."""
    windows, answers, faults = inputs if inputs is not None else soak_inputs(soak)
    return steady.derive(windows, answers, faults, **soak_spans(soak), now=time.time())


def fault_outcomes(soak: Soak) -> list[steady.FaultOutcome]:
    """Every fault window of the plan as it ended (for ``fault_windows_missed``)."""
    return [steady.FaultOutcome(f.name, f.node.name, f.state, f.error)
            for f in soak.faults.select_related("node")]


#: The steady-state checks (criterion keys, in the page's order) and a fault's phases.
CHECK_KEYS = ("error-rate", "no-interruption", "ttft-p99", "throughput", "correctness")
PHASES = ("before", "during", "after")


def fault_checks_judge(soak: Soak, samples: list[evaluation.Sample]) -> dict:
    """Each fault's checks per phase, judged on ``samples`` (span figures) against the
    engagement's criterion of each check: ``{fault: {phase: [{"check", "metric", "value",
    "unit", "verdict", "explanation"}]}}`` (the page's fault table, stored by the tick and the
    decision so the page does not judge every figure again)."""
    specs = {c.key: criterion_spec(c) for c in soak.gate_run.gate.criteria.all()
             if c.key in CHECK_KEYS}
    by_span: dict[tuple[str, str], list[evaluation.Sample]] = {}
    for sample in samples:
        if sample.labels.get("fault"):
            by_span.setdefault((sample.labels["fault"], sample.labels.get("phase", "")),
                               []).append(sample)
    judged: dict[str, dict[str, list[dict]]] = {}
    for name in soak.faults.order_by("position").values_list("name", flat=True):
        checks: dict[str, list[dict]] = {phase: [] for phase in PHASES}
        for phase in PHASES:
            mine = by_span.get((name, phase), [])
            for key, spec in specs.items():
                chosen = evaluation.select(spec, mine)
                if not chosen:
                    continue
                verdict = evaluation.evaluate_criterion(spec, chosen)
                checks[phase].append({"check": key, "metric": spec.metric,
                                      "value": verdict.measured, "unit": spec.unit,
                                      "verdict": verdict.verdict,
                                      "explanation": verdict.explanation})
        judged[name] = checks
    return judged


def soak_checks_update(*, soak: Soak) -> dict:
    """Judge every criterion on the span figures so far, derived from scratch (every window
    and answer of the soak read again), and store the result (:func:`checks_store`). The
    driver's tick folds only what is new instead (:func:`soak_checks_refresh`)."""
    return checks_store(soak, soak_figures(soak, soak_inputs(soak, ids=False)))


def checks_store(soak: Soak, figures: list[steady.SpanFigure]) -> dict:
    """Judge every criterion on the span ``figures`` and store the result in ``soak.checks``
    ({criterion key: {state, value, explanation, at}}: the live check states),
    ``soak.fault_checks`` and ``soak.figures`` (what the soak page reads)."""
    samples = [evaluation.Sample(i, f.metric, f.value, f.unit, f.labels, f.node)
               for i, f in enumerate(figures)]
    checks = {}
    for spec in [criterion_spec(c) for c in soak.gate_run.gate.criteria.all()]:
        if spec.metric in ("soak_duration", "fault_windows_missed"):
            continue
        verdict = evaluation.evaluate_criterion(spec, samples)
        checks[spec.key] = {"state": verdict.verdict, "value": verdict.measured,
                            "unit": spec.unit, "explanation": verdict.explanation,
                            "at": timezone.now().isoformat()}
    Soak.objects.filter(id=soak.id).update(
        checks=checks, fault_checks=fault_checks_judge(soak, samples), figures=[
        {"metric": f.metric, "value": f.value, "unit": f.unit, "labels": f.labels,
         "node": f.node} for f in figures])
    return checks


@dataclass
class SoakTick:
    """What the driver keeps from tick to tick: the live span figures
    (``gates.soak_live.LiveSpans``), the faults' ``(injected_at, healed_at)`` they were built
    for, and the last ``SoakWindow`` id and ``probe_mismatches`` measurement id folded in.
    Only the soak's driver writes its windows and answers (collection runs in its thread), so
    rows newer than those ids are the ones not yet folded."""

    faults: tuple
    spans: steady.LiveSpans
    window_id: int = 0
    answer_id: int = 0


WINDOW_COLUMNS = ("node__name", "index", "start", "end", "completed", "failed", "ttft_p99",
                  "output_throughput", "completion_gap_max", "first_completion",
                  "last_completion")


def _faults_now(soak: Soak) -> tuple[tuple, list[steady.Fault]]:
    """Each fault's ``(injected_at, healed_at)`` in plan order, and the injected ones as the
    derivation takes them (one query)."""
    rows = list(soak.faults.order_by("position").values_list("name", "injected_at",
                                                               "healed_at"))
    return (tuple((injected, healed) for _n, injected, healed in rows),
            [steady.Fault(name, injected.timestamp(), healed.timestamp() if healed else None)
             for name, injected, healed in rows if injected is not None])


def soak_tick_fold(soak: Soak, tick: SoakTick) -> int:
    """Fold into ``tick`` the windows and answers stored since it last folded (rows with a
    higher id: two queries over the new rows only); the number folded."""
    windows = list(SoakWindow.objects.filter(soak=soak, id__gt=tick.window_id).order_by(
        "id").values_list("id", *WINDOW_COLUMNS))
    answers = list(Measurement.objects.filter(
        gate_run_id=soak.gate_run_id, metric="probe_mismatches", derived=False,
        id__gt=tick.answer_id).order_by("id").values_list("id", "value", "node__name",
                                                          "sampled_at"))
    tick.spans.windows_fold(steady.Window(*row[1:]) for row in windows)
    tick.spans.answers_fold(steady.Answer(node, at.timestamp(), value, id_)
                            for id_, value, node, at in answers)
    tick.window_id = windows[-1][0] if windows else tick.window_id
    tick.answer_id = answers[-1][0] if answers else tick.answer_id
    return len(windows) + len(answers)


def soak_tick_start(soak: Soak) -> SoakTick:
    """A new tick state with every window and answer of the soak folded in (one full pass: at
    driver start, resume and recovery, and when a fault is injected or healed). A soak
    collected before the window aggregates existed gets them stored first (a soak with no
    window yet is left as it is: no digest rebuilt for nothing)."""
    if not SoakWindow.objects.filter(soak=soak).exists() and Measurement.objects.filter(
            gate_run_id=soak.gate_run_id, metric__in=WINDOW_METRICS, derived=False).exists():
        soak_windows_rebuild(soak)
    stamp, faults = _faults_now(soak)
    tick = SoakTick(stamp, steady.LiveSpans(faults, **soak_spans(soak)))
    soak_tick_fold(soak, tick)
    return tick


def soak_checks_refresh(*, soak: Soak, stamp: SoakTick | None) -> SoakTick:
    """The driver's tick: fold in the windows and answers stored since ``stamp`` (the state
    this returned last time; None: build it from every stored window and answer) and, when
    anything was new, judge the checks on the live span figures and store them
    (:func:`checks_store`) — in proportion to the new rows and the span figures, not to the
    soak's length. A fault injected or healed since builds the state again from the stored
    windows. With a 60 s sampling interval and 15 min windows, 14 ticks of 15 bring no
    window: nothing is judged then."""
    faults, _ = _faults_now(soak)
    if stamp is None or stamp.faults != faults:
        tick = soak_tick_start(soak)
    else:
        tick = stamp
        try:
            if not soak_tick_fold(soak, tick):
                return tick
        except ValueError:  # a window seen twice: the stored rows decide, read again
            logger.warning("soak %s: a window was folded twice; state built again", soak.id)
            tick = soak_tick_start(soak)
    checks_store(soak, tick.spans.figures(time.time()))
    return tick


def _store_figures(soak: Soak) -> list[evaluation.Sample]:
    """Store every figure G4 is decided on: ``steady.decision_figures`` (the pure core's) on
    the stored samples, each linked to the rows it used; the figures as samples, with the ids
    they were stored under (not read back)."""
    nodes = {n.name: n for n in soak.gate_run.gate.engagement.nodes.all()}
    windows, answers, faults = soak_inputs(soak)
    figures = steady.decision_figures(windows, answers, faults, fault_outcomes(soak),
                                      **soak_spans(soak),
                                      time_compression=soak.time_compression)
    rows = [Measurement(gate_run=soak.gate_run, node=nodes.get(figure.node),
                        metric=figure.metric, value=figure.value, unit=figure.unit,
                        labels=figure.labels, derived=True) for figure in figures]
    with transaction.atomic():  # the input links in bulk (COPY on PostgreSQL)
        stored = Measurement.objects.bulk_create(rows, batch_size=2000)
        links_insert((row.id, input_id) for row, figure in zip(stored, figures, strict=True)
                     for input_id in dict.fromkeys(figure.input_ids))
    return [evaluation.Sample(row.id, f.metric, f.value, f.unit, f.labels,
                              f.node if f.node in nodes else "")
            for row, f in zip(stored, figures, strict=True)]


def links_insert(pairs: Iterable[tuple[int, int]]) -> int:
    """Insert ``(figure id, input id)`` rows into the measurements' input links; the number
    inserted. PostgreSQL: one ``COPY`` (no model instance per link: 0.9 M links took 45 s as
    ``bulk_create``); other databases: ``bulk_create`` in batches."""
    through = Measurement.inputs.through
    table = through._meta.db_table
    count = 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor, cursor.copy(
                f'COPY "{table}" (from_measurement_id, to_measurement_id) FROM STDIN') as copy:
            lines: list[str] = []
            # COPY's text format (":d": whole numbers only), written in chunks
            for figure_id, input_id in pairs:
                lines.append(f"{figure_id:d}\t{input_id:d}\n")
                if len(lines) >= 50000:
                    copy.write("".join(lines))
                    count += len(lines)
                    lines = []
            copy.write("".join(lines))
        return count + len(lines)
    batch: list = []
    for figure_id, input_id in pairs:
        batch.append(through(from_measurement_id=figure_id, to_measurement_id=input_id))
        if len(batch) >= 20000:
            through.objects.bulk_create(batch, batch_size=5000)
            count += len(batch)
            batch = []
    through.objects.bulk_create(batch, batch_size=5000)
    return count + len(batch)


def _where(soak: Soak, verdict: evaluation.Verdict, samples: list[evaluation.Sample]) -> str:
    """The node and span a failing verdict's worst figure comes from, in words."""
    chosen = [s for s in samples if s.id in set(verdict.sample_ids)]
    worst = next((s for s in chosen if s.value == verdict.measured
                  and s.node == verdict.node), None)
    if worst is None or "phase" not in worst.labels:
        return verdict.node
    if worst.labels.get("fault"):
        fault = soak.faults.filter(name=worst.labels["fault"]).first()
        span = ""
        if fault and fault.injected_at:
            end = f"{fault.healed_at:%H:%M:%S}" if fault.healed_at else "…"
            span = f" {fault.injected_at:%H:%M:%S}–{end} UTC"
        kind = fault.kind if fault else ""
        return (f"{worst.node} in fault window {worst.labels['fault']} ({kind}{span}), "
                f"{worst.labels['phase']} the fault")
    return f"{worst.node} in steady state"


def soak_decide(*, soak: Soak) -> Decision | None:
    """Derive and store the span figures of a soak whose load is over (state evaluating) and
    record G4's decision, in one transaction. None when there is no decision: the evidence
    cannot decide (the soak and its run failed with the reason), or the soak is not waiting
    for one (already decided, or a duplicate call). Figures an evaluation left unfinished by a
    dead worker are replaced."""
    gate_run = GateRun.objects.select_related("gate__engagement").get(id=soak.gate_run_id)
    try:
        with transaction.atomic():
            if not Soak.objects.select_for_update().filter(
                    id=soak.id, state=Soak.State.EVALUATING).exists() or \
                    Decision.objects.filter(gate_run=gate_run).exists():
                return None
            return _decide(soak, gate_run)
    except Exception as error:  # recorded; recovery evaluates again (nothing half-stored)
        logger.exception("soak %s evaluation failed", soak.id)
        event_record(soak, "driver error", f"{type(error).__name__}: {error}")
        raise


def _decide(soak: Soak, gate_run: GateRun) -> Decision | None:
    simulated = simulated_evidence_error(gate_run, extra_nodes=soak.agents.filter(
        simulated=True).values_list("node__name", flat=True))
    if simulated:  # a customer's soak on stand-ins: no figures, no decision
        return _no_decision(soak, gate_run, simulated)
    Measurement.objects.filter(gate_run=gate_run, derived=True).delete()
    samples = _store_figures(soak)
    criteria = list(gate_run.gate.criteria.all())
    specs = [criterion_spec(c) for c in criteria]
    Soak.objects.filter(id=soak.id).update(fault_checks=fault_checks_judge(soak, samples))
    verdicts = [evaluation.evaluate_criterion(spec, samples) for spec in specs]
    verdicts = [replace(v, node=_where(soak, v, samples)) if v.verdict == "fail" else v
                for v in verdicts]
    blocking = {s.key: s.blocking for s in specs}
    outcome = evaluation.gate_outcome(verdicts, blocking)
    now = timezone.now()
    if outcome == "error":
        return _no_decision(soak, gate_run, evaluation.no_decision_reason(verdicts, blocking))
    stop = "; ".join(f"{v.key}: {v.explanation} — {v.node}" for v in verdicts
                     if v.verdict == "fail")
    decision = decision_record(gate_run=gate_run, verdicts=verdicts, criteria=criteria,
                               outcome=outcome)
    Soak.objects.filter(id=soak.id).update(state=Soak.State.DONE, finished_at=now,
                                           stop_reason=stop)
    event_record(soak, f"decided: {outcome}", decision.sentence)
    return decision


def _no_decision(soak: Soak, gate_run: GateRun, reason: str) -> None:
    now = timezone.now()
    Soak.objects.filter(id=soak.id).update(state=Soak.State.FAILED, finished_at=now,
                                           error=reason)
    GateRun.objects.filter(id=gate_run.id).update(state=GateRun.State.FAILED,
                                                  error=reason, finished_at=now)
    event_record(soak, "no decision", reason)
    events.announce(events.run_failed, gate_run_id=gate_run.id)  # notifications


def soak_finish(*, soak: Soak) -> None:
    """The decision and its signed report are recorded: the soak's gate run is done."""
    GateRun.objects.filter(id=soak.gate_run_id).update(state=GateRun.State.DONE,
                                                       finished_at=timezone.now())


def soak_report_failed(*, soak: Soak, decision: Decision, error: Exception) -> None:
    """The decision is recorded but its signed report could not be issued: the gate run fails
    saying so (the decision stays)."""
    GateRun.objects.filter(id=soak.gate_run_id).update(
        state=GateRun.State.FAILED, finished_at=timezone.now(),
        error=f"decision recorded ({decision.outcome}) but the signed report could not be "
              f"issued: {type(error).__name__}: {error}")
    events.announce(events.run_failed, gate_run_id=soak.gate_run_id)  # notifications
