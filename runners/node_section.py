"""The run page's "Nodes and probe runs" section as HTML, built by plain string formatting:
the very text ``runners/_run_nodes.html`` renders (kept as its readable reference;
``tests/web_engineer/test_node_section.py`` holds the two equal). Through the template engine
128 nodes cost 15 ms of CPU on every page view and every 2 s poll, before any probe run."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import conditional_escape as escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from runners.pages import NodeRow, ProbeRow


def _probe_html(p: ProbeRow) -> str:
    e = escape
    exit_sort = "" if p.exit_code is None else str(p.exit_code)
    exit_text = "\u2014" if p.exit_code is None else str(p.exit_code)
    simulated = (f' <span class="badge simulated">{e(_("simulated"))}</span>'
                 if p.simulated else "")
    detail = f'<div class="probe-detail">{e(p.detail)}</div>' if p.detail else ""
    error = f'<div class="err-text">{e(p.error_kind)}: {e(p.error)}</div>' if p.error else ""
    progress = (f'<div class="progress" title="{e(p.progress_text)}"><span style="width: '
                f'{e(p.progress_width)}"></span></div>' if p.progress_text else "")
    pruned = f'<div class="muted">{e(p.pruned_text)}</div>' if p.pruned_text else ""
    return (
        f"\n      <tr><td>{e(p.probe)}{simulated}{detail}\n"
        f"        {error}</td>\n"
        f'        <td><span class="badge {e(p.state)}">{e(p.state_text)}</span>{progress}</td>\n'
        f'        <td class="num hide-narrow" data-sort="{exit_sort}">{exit_text}</td>\n'
        f'        <td class="num" data-sort="{e(p.size_bytes)}">{e(p.size_text)}{pruned}</td>\n'
        f'        <td><a href="{e(p.log_url)}">{e(_("log"))}</a></td></tr>\n      ')


def _node_html(node: NodeRow, can_rerun: bool, header: str) -> str:
    e = escape
    carried = (f' <span class="carried">{e(node.carried_text)}</span>'
               if node.carried_text else "")
    error = (f'<p class="err-text">{e(node.error_kind)}: {e(node.error)}</p>'
             if node.error else "")
    rerun = ""
    if can_rerun and node.rerun_url:
        rerun = (f'<p class="node-rerun"><a class="button small secondary" '
                 f'href="{e(node.rerun_url)}">'
                 f'{_("Re-run %(node)s alone…") % {"node": e(node.name)}}</a></p>')
    if node.probes:
        probes = "".join(_probe_html(p) for p in node.probes)
    else:
        words = (_("No probe ran on this node.") if node.failed
                 else _("Not started yet."))
        probes = f'\n      <tr><td colspan="5" class="muted">{e(words)}</td></tr>\n      '
    return (
        f'\n  <details class="node"{" open" if node.open else ""}>\n'
        f'    <summary><span class="name">{e(node.name)}</span> <span class="muted">'
        f'{e(node.role)}</span> <span class="badge {e(node.state)}">{e(node.state_text)}'
        f'</span> <span class="node-progress mono" data-finished="{e(node.finished)}" '
        f'data-planned="{e(node.planned)}">{e(node.finished)} / {e(node.planned)}</span> '
        f'<span class="muted">{e(node.summary)}</span>{carried}</summary>\n'
        f"    {error}\n"
        f"    {rerun}\n"
        f'    <table class="probes sortable">\n'
        f"      {header}\n"
        f"      {probes}\n"
        f"    </table>\n"
        f"  </details>\n  ")


OOB = ' hx-swap-oob="true"'


@dataclass
class NodeSection:
    """What the run page and its poll show of the nodes: ``{{ nodes.html }}`` on the page,
    ``{{ nodes.oob_html }}`` in the poll's answer (swapped in out of band by htmx)."""

    rows: list[NodeRow]
    can_rerun: bool

    def html(self, oob: bool = False) -> SafeString:
        e = escape
        header = (f'<tr><th>{e(_("Probe"))}</th><th>{e(_("State"))}</th>'
                  f'<th class="num hide-narrow">{e(_("Exit"))}</th>'
                  f'<th class="num">{e(_("Output"))}</th><th></th></tr>')
        if self.rows:
            nodes = "".join(_node_html(node, self.can_rerun, header) for node in self.rows)
        else:
            nodes = (f'\n  <p class="muted">{e(_("Waiting for the first node to start…"))}'
                     f"</p>\n  ")
        return mark_safe(  # noqa: S308  # nosec B308, B703 # every data text above is escaped
            f'<div class="card" id="run-nodes"{OOB if oob else ""}>\n'
            f'  <h2>{e(_("Nodes and probe runs"))}</h2>\n'
            f"  {nodes}\n"
            f"</div>\n")

    def oob_html(self) -> SafeString:
        return self.html(oob=True)
