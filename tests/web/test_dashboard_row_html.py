"""A dashboard row's section, built by plain string formatting (``dashboard_row_html``), is the
very text ``acceptance/_dashboard_row.html`` renders: lab, stopped (with and without a reason),
overdue, accepted, text that needs escaping, and in both languages."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.template.loader import render_to_string
from django.utils import translation

from acceptance.models import Engagement, Organisation
from acceptance.pages.dashboard import dashboard_row, dashboard_row_html
from acceptance.pages.words import PageWords
from gates.models import Gate

TODAY = date(2026, 12, 4)
GATES = (("G1", "Arrival acceptance", 1), ("G2", "Single-node baseline", 3),
         ("G3", "Main joint test", 6), ("G4", "Stability and acceptance", 10))


def row_of(*, name="site-001", customer="Customer 1", state="active", reason="", lab=False,
           start=TODAY - timedelta(days=30), gate_states=("passed", "pending", "pending",
                                                          "pending"), moved=None):
    engagement = Engagement(id=1, name=name, customer=Organisation(name=customer), state=state,
                            stopped_reason=reason, is_lab=lab, start_date=start)
    gates = [Gate(engagement=engagement, code=code, name=gate_name, due_week=week,
                  rescheduled_due_date=moved if code == "G4" else None, state=gate_state)
             for (code, gate_name, week), gate_state in zip(GATES, gate_states, strict=True)]
    return dashboard_row(engagement, TODAY, PageWords(), gates=gates)


CASES = {
    "overdue": dict(),
    "lab, not started": dict(lab=True, start=TODAY + timedelta(days=3)),
    "stopped with a reason": dict(state="stopped", reason="G2 stopped: <b>&\"fans\"</b>",
                                  gate_states=("passed", "stopped", "pending", "pending")),
    "stopped without one": dict(state="stopped", reason=""),
    "accepted": dict(state="accepted", start=TODAY - timedelta(days=80),
                     gate_states=("passed",) * 4),
    "in review, moved": dict(gate_states=("passed", "passed", "review", "pending"),
                             moved=TODAY + timedelta(days=200), start=TODAY - timedelta(days=9)),
    "escaped names": dict(name="a&b", customer="O'Brien <Labs> & \"Co\""),
}


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_row_is_what_the_template_renders(case, language):
    with translation.override(language):
        row = row_of(**CASES[case])
        expected = render_to_string("acceptance/_dashboard_row.html", {"row": row})
        assert dashboard_row_html(row) == expected


def test_the_cases_show_what_they_are_named_for():
    with translation.override("en"):
        escaped = dashboard_row_html(row_of(**CASES["escaped names"]))
        stopped = dashboard_row_html(row_of(**CASES["stopped with a reason"]))
        bare = dashboard_row_html(row_of(**CASES["stopped without one"]))
        lab = dashboard_row_html(row_of(**CASES["lab, not started"]))
        overdue = dashboard_row_html(row_of(**CASES["overdue"]))
    assert "<span>O&#x27;Brien &lt;Labs&gt; &amp; &quot;Co&quot;</span>" in escaped
    assert "G2 stopped: &lt;b&gt;&amp;&quot;fans&quot;&lt;/b&gt;</p>" in stopped
    assert "<strong>Stopped:</strong> no reason recorded</p>" in bare
    assert "lab: simulated evidence" in lab and "lab: simulated evidence" not in overdue
    assert '<li class="pending overdue">' in overdue
    assert "<strong>Overdue:</strong>" in overdue and "<strong>Overdue:</strong>" not in lab
