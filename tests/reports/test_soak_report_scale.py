"""The G4 report stays the same length as nodes are added: from 2 to 8 nodes × a 72 h soak
(576 collection records a node) the signed PDF gains at most the nodes' one-line rows, never a
row or a page per record; every record's raw output is still embedded (a node's collected
ranges of one file as one attachment, each range hashed alone in ``summary.json``) and the
report still re-decides G4 from them alone.

The soaks are built as their collection leaves them (``runners.lab.soak_scale``: real raw
lines, read by the soak's own parsers), decided by ``soak_decide`` and reported by
``report_issue`` into real PDFs (WeasyPrint, pyHanko), read back with pdfinfo and pypdf.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.conf import settings

from acceptance_core.__main__ import redecide_file
from acceptance_core.pdf import load_roots
from reports.evidence import SUMMARY_NAME, embedded_digests, embedded_files, evidence_check
from reports.services import report_issue
from reports.signing import verify_pdf
from runners.lab.soak_scale import soak_at_scale
from runners.models import ProbeRun
from runners.soak.evaluation import soak_decide
from runners.soak.models import Soak
from tests.reports.conftest import page_count

pytestmark = pytest.mark.slow


def _reported(nodes: int) -> tuple[Path, Soak, int, str]:
    soak, _rows, records, _count = soak_at_scale(nodes, 72, name=f"soak-scale-{nodes}")
    Soak.objects.filter(id=soak.id).update(state=Soak.State.EVALUATING)
    soak.refresh_from_db()
    decision = soak_decide(soak=soak)
    assert decision is not None, Soak.objects.get(id=soak.id).error
    return Path(report_issue(decision=decision).path), soak, records, decision.outcome


def test_the_g4_report_keeps_its_pages_from_2_to_8_nodes(db):
    pages = {}
    for nodes in (2, 8):
        path, soak, records, outcome = _reported(nodes)
        data = path.read_bytes()
        assert verify_pdf(data).valid
        pages[nodes] = page_count(path)
        # 576 records a node (288 windows × windows.jsonl and probes.jsonl ranges) + golden
        assert records == nodes * (2 * 288 + 1)

        summary = json.loads(embedded_files(data, only={SUMMARY_NAME})[SUMMARY_NAME])
        assert len(summary["runs"]) == records
        digests = embedded_digests(data)
        # the summary, and per node its golden round and one file per collected file
        assert len(digests) == 1 + 3 * nodes, sorted(digests)[:8]
        ledger = dict(ProbeRun.objects.filter(gate_run_id=soak.gate_run_id).values_list(
            "stdout_sha256", "stdout_size"))
        ranged = [r for r in summary["runs"] if "range" in r]
        assert len(ranged) == nodes * 2 * 288
        for run in summary["runs"]:
            assert ledger[run["sha256"]] == (run["range"][1] if "range" in run
                                             else digests[run["attachment"]][1])
        # a node's windows.jsonl ranges follow each other in its one attachment
        first = [r for r in ranged if r["attachment"].endswith("soak-gpu-000-windows.jsonl")]
        assert [r["range"][0] for r in first[:3]] == [0, first[0]["range"][1],
                                                       first[0]["range"][1]
                                                       + first[1]["range"][1]]
        check = evidence_check(data)
        assert check.ok and check.matched == records, check.summary

    # six more nodes add six lines to the inventory and six to the node table (4.6 mm each
    # of a 259 mm page: under half a page); one row per record would add 3456 rows
    assert pages[8] - pages[2] <= 1, pages

    # what redecide needs is still there: the 8-node report decides G4 the same again
    out = io.StringIO()
    roots = load_roots([str(Path(settings.SIGNING_DIR) / "ca.pem")])
    assert redecide_file(path.read_bytes(), roots, out) == 0, out.getvalue()
    assert f"decision G4: recorded {outcome}, recomputed {outcome}" in out.getvalue()
