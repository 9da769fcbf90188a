"""The real-engagement journey (issue 20's "Done when") in a pytest process of its own.

The journey starts a real in-process Celery worker. Celery keeps per-process state (the broker's
connection and producer pools, the app's configuration) that earlier tests in the same process
change, and the run's tasks then never reach the worker. The journey itself is in
``journey_real_engagement.py`` (not collected here); this test runs it in a fresh interpreter and
fails with its output when it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOURNEY = Path(__file__).with_name("journey_real_engagement.py")


@pytest.mark.slow
def test_a_real_engagement_from_an_empty_database_to_a_signed_g1_report():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:schemathesis", "-p", "no:cacheprovider",
         str(JOURNEY.relative_to(ROOT))],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout, run.stdout[-2000:]
