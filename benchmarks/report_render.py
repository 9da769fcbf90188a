"""A signed 40-page report with 20 charts: our render + sign vs WeasyPrint's bare render of the
same HTML (TARGETS.md: ≤ 1.3×).

Ours is what ``report_issue`` does after the queries: ``render_gate_report_pdf`` (the report
HTML rendered by WeasyPrint as PDF/A-3b with ``summary.json`` and every run's raw output
embedded) followed by ``sign_pdf`` (pyHanko PAdES, development signer, no TSA). The anchor is
``weasyprint.HTML(string=html).write_pdf()`` of the very HTML ours renders, measured beside it,
the two interleaved. The report: a final report of four gate sections with five charts each
(runners.charts geometry), criteria tables (grown to size the report), and an evidence appendix of
80 runs with 4 KiB raw outputs (one line per node), sized to about ``--pages`` pages.

Prints one JSON line per figure: ``{"name", "value", "unit", "anchor", "ratio"}``, medians of
``--runs`` runs: the whole (render + sign), and its two parts against the same anchor.

Run: ``.venv/bin/python benchmarks/report_render.py [--runs 5] [--pages 40] [--keep FILE]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

import django  # noqa: E402

django.setup()

from gates.presentation import VerdictRow  # noqa: E402
from reports.context import (  # noqa: E402
    EvidenceRow,
    GateReportContext,
    GateSection,
    NodeRow,
    ScheduleRow,
)
from reports.render import render_gate_report_html, render_gate_report_pdf  # noqa: E402
from reports.signing import ensure_dev_signer, load_signer, sign_pdf  # noqa: E402
from runners.charts import Point, bar_chart  # noqa: E402

TARGET = 1.3
CHARTS_PER_GATE = 5
GATES = ("G1", "G2", "G3", "G4")
RUNS_PER_GATE = 20
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def _chart(gate: str, index: int, nodes: int):
    kind = index % 3
    if kind == 0:
        return bar_chart(key=f"{gate}-ttft-{index}", title=f"{gate} TTFT p50 #{index}", unit="s",
                         points=[Point(f"round {r}", arm, 17.3 - (arm == "array") * 5.4 + r * .1)
                                 for r in (1, 2) for arm in ("local", "array")],
                         series_names={"local": "baseline", "array": "array tier"},
                         simulated=True)
    if kind == 1:
        return bar_chart(key=f"{gate}-bw-{index}", title=f"{gate} bandwidth #{index}",
                         unit="B/s", points=[Point(f"lab-inference-{n}", "read_bandwidth",
                                                   10.5e9 + n * 1e8) for n in range(1, nodes)],
                         series_names={}, reference=(12.5e9, "line rate 12.50 GB/s"),
                         simulated=True)
    return bar_chart(key=f"{gate}-eff-{index}", title=f"{gate} line efficiency #{index}",
                     unit="ratio", points=[Point(f"lab-inference-{n}", "node", 0.84 + n / 200)
                                           for n in range(1, nodes)],
                     series_names={}, reference=(0.83, "83 % line"), simulated=True)


def report_context(runs_per_gate: int, criteria_per_gate: int = 6) -> GateReportContext:
    sections = []
    for g, gate in enumerate(GATES):
        runs = []
        for i in range(runs_per_gate):
            raw = (f"{gate} run {i} " * 300).encode()[:4096]
            started = START + timedelta(days=14 * g, minutes=i)
            runs.append(EvidenceRow(
                node=f"lab-inference-{i % 8 + 1}", probe="vllm_bench_serve",
                command=f"vllm bench serve --model Qwen3-Coder-480B-FP8 --max-concurrency 16 "
                        f"--num-prompts 200 --save-result --result-filename run{i}.json",
                tool_version="vllm 0.20.1", started_at=started,
                finished_at=started + timedelta(seconds=95), exit_code=0,
                sha256=hashlib.sha256(raw).hexdigest(), simulated=True, state="succeeded",
                raw_output=raw))
        criteria = [VerdictRow(metric=f"metric_{gate}_{k}",
                               description="A criterion of the benchmark report",
                               requirement=">= 0.83", measured_text="0.880 (88.0 %)",
                               reference_source="DOMAIN.md " + gate, verdict="pass",
                               explanation="measured on lab-inference-1: 0.88; required >= 0.83")
                    for k in range(criteria_per_gate)]
        sections.append(GateSection(
            gate_code=gate, gate_name="Single-node baseline", decision_outcome="passed",
            decision_sentence=f"{gate} passed: all {criteria_per_gate} criteria met.",
            decided_at=START + timedelta(days=14 * g + 1), decided_by="acceptance service",
            criteria=criteria, charts=[_chart(gate, i, 9) for i in range(CHARTS_PER_GATE)],
            runs=runs))
    return GateReportContext(
        engagement_name="bench-report", customer="Example Cloud Ltd.", kind="final",
        sections=sections, gate_code="", gate_name="", due_date=date(2026, 5, 11),
        engagement_start=date(2026, 3, 2), decision_outcome="passed",
        decision_sentence="Accepted: all 4 gates passed.",
        decided_at=START + timedelta(days=60), decided_by="acceptance service",
        nodes=[NodeRow(f"lab-inference-{n}", f"127.0.0.1:{2200 + n}", "inference node",
                       "SHA256:" + "A" * 43) for n in range(1, 9)],
        schedule=[ScheduleRow(f"{g} gate", date(2026, 3, 2) + timedelta(weeks=2 * i + 2),
                              "passed", START, "passed") for i, g in enumerate(GATES)],
        simulated=True)


def page_count(pdf: bytes) -> int:
    import io

    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(pdf)).pages)


def sized_context(pages: int) -> GateReportContext:
    """The context whose report has about ``pages`` pages. The evidence appendix is one line per
    node (issue 17: it does not grow a page per run), so the criteria tables grow instead; each
    gate keeps ``RUNS_PER_GATE`` runs with their 4 KiB raw outputs embedded."""
    from weasyprint import HTML

    criteria = 6
    for _ in range(8):
        ctx = report_context(RUNS_PER_GATE, criteria)
        got = len(HTML(string=render_gate_report_html(ctx)).render().pages)
        if abs(got - pages) <= 1:
            return ctx
        criteria = max(1, round(criteria * pages / got))
    return ctx


def _bare(html_class, html: str) -> float:
    t0 = time.perf_counter()
    html_class(string=html).write_pdf()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--keep", help="write the signed PDF here")
    args = parser.parse_args()

    from weasyprint import HTML

    with tempfile.TemporaryDirectory() as tmp:
        ensure_dev_signer(Path(tmp))
        signer = load_signer(signing_dir=Path(tmp))
        ctx = sized_context(args.pages)
        html = render_gate_report_html(ctx)
        charts = sum(len(s.charts) for s in ctx.gate_sections())
        bare_times, render_times, sign_times, total_times = [], [], [], []
        signed = b""
        for i in range(args.runs):
            # alternate which goes first, so neither gains from the other's warm caches
            if i % 2 == 0:
                bare_times.append(_bare(HTML, html))
            t0 = time.perf_counter()
            pdf = render_gate_report_pdf(ctx)
            t1 = time.perf_counter()
            signed = sign_pdf(pdf, signer=signer, timestamper=None)
            t2 = time.perf_counter()
            render_times.append(t1 - t0)
            sign_times.append(t2 - t1)
            total_times.append(t2 - t0)
            if i % 2 == 1:
                bare_times.append(_bare(HTML, html))
        pages = page_count(signed)
        if args.keep:
            Path(args.keep).write_bytes(signed)
    bare = statistics.median(bare_times)
    figures = [
        ("signed_report_render_and_sign", statistics.median(total_times)),
        ("signed_report_render_pdfa_with_evidence", statistics.median(render_times)),
        ("signed_report_sign", statistics.median(sign_times)),
    ]
    for name, value in figures:
        print(json.dumps({"name": name, "value": round(value, 4), "unit": "s",
                          "anchor": round(bare, 4), "ratio": round(value / bare, 3),
                          "pages": pages, "charts": charts, "runs": args.runs,
                          "target": TARGET if name == "signed_report_render_and_sign" else None}))


if __name__ == "__main__":
    main()
