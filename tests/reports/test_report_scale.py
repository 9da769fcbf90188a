"""A gate report stays small as nodes are added: twice the nodes add at most their one-line
rows (the inventory's and the appendix's node table), never a page per node; every raw output
is still embedded and hashes to its sha256, and the report still re-decides.

The runs are real evidence through the real path: one G2 run on one lab node (real sshd, the
lab's stand-ins) gives the raw outputs; the run of N nodes is built from it as the ledger holds
it (``runners.lab.scale``: every output kept, hashed and parsed by the real parser; each node's
differs) and decided and reported as the worker does after the last node
(``gate_run_decide``, ``report_issue``).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from acceptance_core.__main__ import redecide_file
from acceptance_core.pdf import load_roots
from reports.assembly import CHART_NODE_LIMIT
from reports.evidence import SUMMARY_NAME, embedded_digests, embedded_files, evidence_check
from reports.services import report_issue
from reports.signing import verify_pdf
from runners.decision import gate_run_decide
from runners.lab.scale import scaled_run
from runners.models import GateRun
from tests.reports.conftest import page_count, pdftotext
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow

N = 20  # above CHART_NODE_LIMIT at N and 2N: the charts are summarised in both


def _real_g2(lab):
    engagement, _ = lab("healthy")
    engagement.gates.filter(code="G1").update(state="passed")
    code, out, err = run_gate(engagement.name, "G2")
    assert code == 0, out + err
    first = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    return engagement, first


def _reported(first: GateRun, count: int) -> GateRun:
    run = scaled_run(first, count)
    decision = gate_run_decide(gate_run_id=run.id)
    assert decision is not None, GateRun.objects.get(pk=run.pk).error
    report_issue(decision=decision)
    return run


def _node_table_lines(path: Path) -> list[str]:
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                          capture_output=True, text=True, timeout=60).stdout
    appendix = text[text.index("Appendix A"):]
    return [line for line in appendix.splitlines() if re.match(r"\s*lab-inference-\d+\s", line)]


def test_twice_the_nodes_add_their_rows_not_pages_and_every_output_is_attached(lab):
    engagement, first = _real_g2(lab)
    reports = {}
    for count in (N, 2 * N):
        run = _reported(first, count)
        report = run.decision.report
        path = Path(report.path)
        reports[count] = path
        data = path.read_bytes()
        assert verify_pdf(data).valid

        # every probe run's raw output is an attachment hashing to the ledger's sha256
        runs = list(run.evidence_probe_runs().order_by("started_at", "id"))
        summary = json.loads(embedded_files(data, only={SUMMARY_NAME})[SUMMARY_NAME])
        digests = embedded_digests(data)
        assert len(summary["runs"]) == len(runs) == count + 2
        assert len({r.stdout_sha256 for r in runs}) == len(runs)  # all differ
        for entry, probe_run in zip(summary["runs"], runs, strict=True):
            assert entry["sha256"] == probe_run.stdout_sha256
            assert entry["node"] == probe_run.node.name
            assert digests[entry["attachment"]] == (probe_run.stdout_sha256,
                                                    probe_run.stdout_size)
        check = evidence_check(data)
        assert check.ok and check.matched == len(runs), check.summary

        # one line per node in the node table, its figure on it
        lines = _node_table_lines(path)
        assert len(lines) == count, lines
        assert all("parsed" in line and "TTFT p50 17.50 s" in line for line in lines)
        assert "TTFT p50 17.50 s · read 11.00 GB/s · line 88.0 %" in lines[0]
        # the per-node chart is summarised: lowest, median, highest — no bar per node
        charts = pdftotext(path, page=1) + pdftotext(path, page=2)
        assert f"{count} nodes: each series' lowest, median and highest" in " ".join(
            charts.split())
        assert count > CHART_NODE_LIMIT

    # N more nodes: 2N more one-line rows (inventory and node table), at most 46 mm of a
    # 259 mm page per 10 rows, and each of the two lists may cross one more page break; a
    # per-node section or a bar per node would add pages (before: about 0.57 page per node)
    pages = {count: page_count(path) for count, path in reports.items()}
    rows_pages = 2 * N * 4.6 / 259
    assert pages[2 * N] - pages[N] <= int(rows_pages) + 2, pages

    # what redecide needs is still there: the 2N-node report decides the same again
    out = io.StringIO()
    roots = load_roots([str(Path(settings.SIGNING_DIR) / "ca.pem")])
    assert redecide_file(reports[2 * N].read_bytes(), roots, out) == 0, out.getvalue()
