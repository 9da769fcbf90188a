"""The run page's nodes section, built by plain string formatting (``NodeSection``), is the
very text ``runners/_run_nodes.html`` renders: nodes running, failed, carried, not started,
probe runs simulated, failed, in progress, pruned, with and without an exit code, a re-run
link for engineers only, texts that need escaping, in and out of band, in both languages."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.utils import translation

from runners.node_section import NodeSection
from runners.pages import NodeRow, ProbeRow


def probe(i: int, **changes) -> ProbeRow:
    values = dict(id=i, probe="fio_seq_read", detail="", state="parsed", state_text="parsed",
                  progress=None, progress_text="", progress_width="", exit_code=0,
                  size_text="1.2 KiB", error_kind="", error="", simulated=False,
                  log_url=f"/runs/7/?probe={i}#log", size_bytes=1229)
    values.update(changes)
    return ProbeRow(**values)


def node(name: str, probes: list[ProbeRow], **changes) -> NodeRow:
    values = dict(name=name, role="inference node", state="done", state_text="done",
                  error_kind="", error="", failed=False, probes=probes, open=False,
                  summary=f"{len(probes)} probe runs", planned=len(probes),
                  finished=len(probes))
    values.update(changes)
    return NodeRow(**values)


ROWS = [
    node("gpu-001", [probe(1), probe(2, simulated=True, detail="job seqread · /dev/nvme0n1",
                                   exit_code=None, size_text="0 B", size_bytes=0)]),
    node("gpu-<002>&", [probe(3, state="failed", state_text="failed", exit_code=1,
                              error_kind="parse", error='no "jobs" <key> & more'),
                        probe(4, state="running", state_text="running", progress=42.4,
                              progress_text="42 %", progress_width="42%", exit_code=None,
                              pruned_text="stdout pruned on 2027-01-05 (retention)")],
         state="failed", state_text="failed", error_kind="ssh", error="refused <b>",
         failed=True, open=True, rerun_url="/runs/7/rerun/?node=gpu-%3C002%3E%26",
         summary="2 probe runs: 1 failed, 1 running", planned=5, finished=1),
    node("gpu-003", [], state="failed", state_text="failed", failed=True, open=True),
    node("gpu-004", [], state="queued", state_text="queued", open=True, planned=12,
         finished=0),
    node("gpu-005", [probe(5)], carried_text="evidence carried from attempt #1"),
]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("oob", [False, True])
@pytest.mark.parametrize("can_rerun", [False, True])
@pytest.mark.parametrize("rows", [ROWS, []], ids=["nodes", "none yet"])
def test_the_section_is_what_the_template_renders(rows, can_rerun, oob, language):
    with translation.override(language):
        section = NodeSection(rows, can_rerun)
        expected = render_to_string("runners/_run_nodes.html",
                                    {"rows": rows, "can_rerun": can_rerun, "oob": oob})
        assert (section.oob_html() if oob else section.html()) == expected


def test_the_rows_show_what_they_are_named_for():
    with translation.override("en"):
        engineer = NodeSection(ROWS, can_rerun=True).html()
        customer = NodeSection(ROWS, can_rerun=False).html()
        waiting = NodeSection([], can_rerun=False).oob_html()
    assert 'href="/runs/7/rerun/?node=gpu-%3C002%3E%26">Re-run gpu-&lt;002&gt;&amp; alone…' \
        in engineer
    assert "Re-run" not in customer
    assert "parse: no &quot;jobs&quot; &lt;key&gt; &amp; more" in engineer
    assert '<td class="num hide-narrow" data-sort="">\u2014</td>' in engineer
    assert '<td class="num hide-narrow" data-sort="1">1</td>' in engineer
    assert "No probe ran on this node." in engineer and "Not started yet." in engineer
    assert engineer.count('<details class="node" open>') == 3
    assert 'id="run-nodes" hx-swap-oob="true"' in waiting
    assert "Waiting for the first node to start…" in waiting
