"""Evaluation plus the signed report of a gate run at 8 and 128 nodes, and the report's pages.

One G2 run on one lab node (real sshd, the lab's stand-ins, in this process) gives real raw
outputs; the run of N nodes is built from it as the ledger holds it after its last node job
(``runners.lab.scale.scaled_run``: nodes enrolled on the lab's array, every output kept as a
content-addressed file with its sha256 and parsed by the real parser, each node's differing;
G2's plan: one node per array reads the array, every node runs the benchmark). The timed part
is then done ``--runs`` times on that evidence, each time from the run as the last node job
leaves it (decision, derived figures and report removed): ``gate_run_decide`` (derivations,
evaluation, the decision) and ``report_issue`` (the report's queries, WeasyPrint, the embedded
outputs, pyHanko signing, the verification of the signed file, storing it) — what the worker's
``gate_run_evaluate`` does after the last node.

Figures (one JSON line each: ``{"name", "value", "unit", "anchor", "ratio", …}``, medians):

* ``evaluation_report_<N>_nodes`` (s, wall): decide + signed report; target ≤ 3 s at 128
  (TARGETS.md). Anchor: the same at 8 nodes. Depends on the machine's two cores (other
  processes share them), so ``evaluation_report_cpu_<N>_nodes`` (s, this process's CPU time)
  is printed too, and the load average.
* ``evaluation_report_queries_<N>_nodes``: database queries in that time (the anchor: 8 nodes).
* ``report_pages_<N>_nodes``: pages of the signed report; anchor: the pages at 8 nodes; the
  growth per added node is ``report_pages_per_node`` (a node table row is about 0.03 page).
* ``report_attachments_<N>_nodes``: embedded raw outputs, each checked against its sha256
  (``reports.evidence.evidence_check``): a report that does not carry them all stops the
  benchmark.

Owns PostgreSQL ``bench_report_scale_<pid>`` (``benchmarks/_own.py``; no Redis: in-process).

Run: ``.venv/bin/python benchmarks/report_scale.py [--nodes 8 128] [--runs 3] [--profile FILE]
[--keep DIR] [--phases]`` (``--profile``: cProfile of one timed pass at the largest N, for
``pstats``; ``--phases``: the CPU time of each part of the report, on stderr).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import own  # noqa: E402

TARGET_S = 3.0


def line(name: str, value: float, unit: str, anchor: float | None, **extra) -> str:
    ratio = round(value / anchor, 3) if anchor else None
    return json.dumps({"name": name, "value": round(value, 4), "unit": unit,
                       "anchor": None if anchor is None else round(anchor, 4), "ratio": ratio,
                       **extra})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 128])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of one pass at the largest N here")
    parser.add_argument("--phases", action="store_true",
                        help="print the CPU time of each part of the report (stderr)")
    parser.add_argument("--keep", help="copy each size's signed report into this directory")
    args = parser.parse_args()
    owned = own("report_scale", postgres=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        measure(args)
    finally:
        from runners.lab.services import lab_down

        lab_down()
        owned.release()


def _reset(gate_run) -> None:
    """The run as the last node job leaves it: evaluating, no decision, no derived figure."""
    from django.db import transaction

    from gates.models import Decision
    from reports.models import Report
    from runners.models import GateRun

    with transaction.atomic():
        Report.objects.filter(decision__gate_run=gate_run).delete()
        Decision.objects.filter(gate_run=gate_run).delete()
        gate_run.measurements.filter(derived=True).delete()
        GateRun.objects.filter(pk=gate_run.pk).update(state=GateRun.State.EVALUATING,
                                                      finished_at=None, error="")
        gate_run.gate.__class__.objects.filter(pk=gate_run.gate_id).update(state="pending")


def _timed(gate_run) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from reports.services import report_issue
    from runners.decision import gate_run_decide

    _reset(gate_run)
    with CaptureQueriesContext(connection) as queries:
        wall, cpu = time.perf_counter(), time.process_time()
        decision = gate_run_decide(gate_run_id=gate_run.id)
        assert decision is not None, "no decision"
        report = report_issue(decision=decision)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "queries": len(queries), "report": report}


def _phases(gate_run) -> dict[str, float]:
    """CPU seconds of each part of the report of ``gate_run``'s decision, done once more
    outside the service's transaction: its context (queries), the HTML, WeasyPrint's layout,
    the PDF with its attachments, signing, verifying the signed file."""
    from weasyprint import HTML

    from reports.assembly import report_context
    from reports.render import _attachments, render_gate_report_html, render_html_pdf
    from reports.signer import service_signer
    from reports.signing import sign_pdf, verify_pdf

    out, clock = {}, time.process_time
    t = clock()
    ctx = report_context(gate_run.decision)
    out["context"], t = clock() - t, clock()
    html = render_gate_report_html(ctx)
    out["html"], t = clock() - t, clock()
    HTML(string=html).render()
    out["layout"], t = clock() - t, clock()
    pdf = render_html_pdf(html, attachments=_attachments(ctx))
    out["layout_and_pdf"], t = clock() - t, clock()
    signed = sign_pdf(pdf, signer=service_signer(), reason="benchmark")
    out["sign"], t = clock() - t, clock()
    verify_pdf(signed)
    out["verify"] = clock() - t
    return {k: round(v, 3) for k, v in out.items()}


def _pages(path: str) -> int:
    import io

    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(Path(path).read_bytes())).pages)


def measure(args) -> None:
    from django.conf import settings

    from reports.evidence import evidence_check
    from runners.dispatch import gate_run_start
    from runners.lab.scale import scaled_run
    from runners.lab.services import lab_up
    from runners.models import GateRun

    assert settings.CELERY_TASK_ALWAYS_EAGER, "runs in-process: unset CELERY_BROKER_URL"

    def g2_run(engagement) -> GateRun:
        engagement.gates.filter(code="G1").update(state="passed")
        engagement.state = "active"
        engagement.save(update_fields=["state"])
        run = gate_run_start(gate=engagement.gates.get(code="G2"), started_by="benchmark")
        run.refresh_from_db()
        assert run.state == "done", run.error
        return run

    engagement, _ = lab_up(scenario_name="healthy", engagement_name="bench-report")
    first = g2_run(engagement)  # one real G2 on one lab node: the outputs every node repeats
    results: dict[int, dict] = {}
    for n in sorted(args.nodes):
        run = scaled_run(first, n)
        rows = [_timed(run) for _ in range(args.runs)]
        report = rows[-1]["report"]
        data = Path(report.path).read_bytes()
        check = evidence_check(data)
        assert check.ok and check.matched == run.evidence_probe_runs().count(), check.summary
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(report.path, Path(args.keep) / f"G2-{n}-nodes.pdf")
        if args.profile and n == max(args.nodes):
            profiler = cProfile.Profile()
            profiler.enable()
            _timed(run)
            profiler.disable()
            profiler.dump_stats(args.profile)
        results[n] = {
            "wall": statistics.median(r["wall"] for r in rows),
            "cpu": statistics.median(r["cpu"] for r in rows),
            "queries": statistics.median(r["queries"] for r in rows),
            "pages": _pages(report.path), "attachments": check.matched,
            "bytes": len(data), "probe_runs": run.probe_runs.count(),
            "walls": [round(r["wall"], 2) for r in rows],
        }
        print(f"# {n} nodes: {results[n]['probe_runs']} probe runs, walls {results[n]['walls']},"
              f" load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        if args.phases:
            print(f"# {n} nodes, CPU s by part: {_phases(run)}", file=sys.stderr, flush=True)
    smallest = min(results)
    base = results[smallest]
    for n, r in sorted(results.items()):
        anchor = base if n != smallest else None
        print(line(f"evaluation_report_{n}_nodes", r["wall"], "s",
                   anchor and anchor["wall"], target=TARGET_S if n >= 128 else None,
                   runs=args.runs, depends_on_cores=True))
        print(line(f"evaluation_report_cpu_{n}_nodes", r["cpu"], "s",
                   anchor and anchor["cpu"], runs=args.runs, depends_on_cores=False))
        print(line(f"evaluation_report_queries_{n}_nodes", r["queries"], "queries",
                   anchor and anchor["queries"]))
        print(line(f"report_pages_{n}_nodes", r["pages"], "pages", anchor and anchor["pages"],
                   bytes=r["bytes"]))
        print(line(f"report_attachments_{n}_nodes", r["attachments"], "files", None,
                   probe_runs=r["probe_runs"]))
    if len(results) > 1:
        largest = results[max(results)]
        per_node = (largest["pages"] - base["pages"]) / (max(results) - smallest)
        print(line("report_pages_per_node", per_node, "pages", None,
                   target="one table row (≈ 0.03 page)"))


if __name__ == "__main__":
    main()
