"""Fault: two final reports issued at once (the command twice, a double click), on real
PostgreSQL. Before: two "version 1" final reports, then an IntegrityError traceback / HTTP 500,
each leaving a signed PDF without a row. Now: one version and one clear refusal (exit 2, one
line), no traceback, one file per row.

Two real processes share a fresh PostgreSQL database; each renders and signs for real
(WeasyPrint, pyHanko). Rendering is slowed by 3 s in both so that the two surely overlap (the
second asks while the first holds the engagement's lock)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.harness import postgres_url, service_env  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SETUP = """
import django
django.setup()
from datetime import timedelta
from django.utils import timezone
from gates.services import engagement_create
from reports.services import report_issue
from tests.web.conftest import G1_MISSING_DRIVE, decide
engagement = engagement_create(name="acme-pg", customer="ACME",
                               start_date=timezone.localdate() - timedelta(weeks=3))
decision = decide(engagement.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped", settle=False)
print(report_issue(decision=decision).path)
"""

ISSUE_SLOWLY = """
import sys, time
import django
django.setup()
from django.core.management import call_command
import reports.services as services
real = services.render_gate_report_pdf
def slow(context):
    time.sleep(3)
    return real(context)
services.render_gate_report_pdf = slow
call_command("issue_final_report", "acme-pg", "--by", sys.argv[1])
"""


def test_two_final_reports_issued_at_once_give_one_version_and_one_refusal(
        tmp_path, postgres_url):  # noqa: F811
    env = service_env(tmp_path, DATABASE_URL=postgres_url,
                      DJANGO_SETTINGS_MODULE="acceptance.settings")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stderr
    setup = subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stderr
    gate_report = Path(setup.stdout.strip().splitlines()[-1])

    both = [subprocess.Popen([sys.executable, "-c", ISSUE_SLOWLY, who], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for who in ("first-click", "second-click")]
    results = [(p.wait(timeout=300), *p.communicate()) for p in both]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(out for code, out, _ in results if code == 2)
    assert refused.strip() == ("refused: final report version 1 was issued meanwhile by "
                               "another request; nothing was stored")
    issued = next(out for code, out, _ in results if code == 0)
    assert "version: 1" in issued
    for _, _, err in results:
        assert "Traceback" not in err and "IntegrityError" not in err, err

    import psycopg

    with psycopg.connect(postgres_url.replace("postgres://", "postgresql://", 1)) as connection:
        rows = connection.execute(
            "select kind, version, path from reports_report order by id").fetchall()
    assert [(k, v) for k, v, _ in rows] == [("gate", 1), ("final", 1)]
    on_disk = sorted(p.name for p in (tmp_path / "var" / "reports" / "acme-pg").iterdir())
    assert on_disk == sorted(Path(p).name for _, _, p in rows)  # one file per row, no more
    assert Path(rows[0][2]) == gate_report
