"""Faults with a broker configured (real Redis on TEST_REDIS_URL, a real Celery worker, a lab
node over real SSH, the commands as subprocesses sharing one database file):

- ``import_evidence`` with a broker: before, it always ended ``RelatedObjectDoesNotExist:
  GateRun has no decision``, exit 1 (the worker had not decided yet); now it waits for the
  worker's decision and prints it and the signed report, as without a broker (exit 1: stopped).
- a duplicate ``gate_run_evaluate`` delivery: before, it re-stored derived measurements, then
  failed on the unique decision; now it is a no-op (nothing stored twice, the task succeeds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.faults.harness import service_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

COLLECT = """
import sys
from pathlib import Path
import django
django.setup()
from acceptance.models import Engagement
from runners.evidence import collection_script
from runners.transport import SSHConnection
out = Path(sys.argv[1])
engagement = Engagement.objects.get(name="lab-missing-drive")
gate = engagement.gates.get(code="G1")
for node in engagement.nodes.filter(role="array"):
    script = out / f"collect-{node.name}.py"
    script.write_text(collection_script(gate=gate, node=node))
    bundle = out / f"{node.name}.tar.gz"
    with SSHConnection(node.ssh_target()) as connection:
        result = connection.run(f"python3 {script} --output {bundle}", timeout=120)
    assert result.exit_code == 0, result.stderr.decode()
    print(bundle)
"""

COUNTS = """
import json
import django
django.setup()
from gates.models import Decision
from reports.models import Report
from runners.models import GateRun, Measurement
run = GateRun.objects.get(gate__engagement__name="lab-missing-drive", gate__code="G1")
print(json.dumps({"run": run.id, "state": run.state,
                  "measurements": Measurement.objects.filter(gate_run=run).count(),
                  "derived": Measurement.objects.filter(gate_run=run, derived=True).count(),
                  "decisions": Decision.objects.filter(gate_run=run).count(),
                  "reports": Report.objects.filter(about__gate_run=run).count()}))
"""

RING = """
import sys
import django
django.setup()
from runners.doorbell import ring
ring("runners.gate_run_evaluate", gate_run_id=int(sys.argv[1]))
"""


def python(env, *args, timeout=300):
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def redis_url():
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: set TEST_REDIS_URL (scripts/test does)")
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


def test_import_evidence_with_a_broker_decides_and_a_duplicate_evaluation_is_a_no_op(
        tmp_path, redis_url):
    env = service_env(tmp_path, CELERY_BROKER_URL=redis_url,
                      DJANGO_SETTINGS_MODULE="acceptance.settings")
    assert python(env, "manage.py", "migrate", "-v", "0").returncode == 0
    up = python(env, "manage.py", "lab", "up", "--scenario", "missing-drive")
    assert up.returncode == 0, up.stderr
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "acceptance", "worker", "--pool=solo",
         "--loglevel=INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
         "-n", f"faults-{uuid.uuid4().hex[:8]}@%h"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        collected = python(env, "-c", COLLECT, str(tmp_path))
        assert collected.returncode == 0, collected.stderr
        bundles = collected.stdout.split()
        imported = python(env, "manage.py", "import_evidence", "lab-missing-drive", "G1",
                          *bundles, "--timeout", "240")
        before = json.loads(python(env, "-c", COUNTS).stdout)
        again = python(env, "-c", RING, str(before["run"]))
        assert again.returncode == 0, again.stderr
        time.sleep(8)  # the worker takes the duplicate delivery
        after = json.loads(python(env, "-c", COUNTS).stdout)
    finally:
        worker.terminate()
        log = worker.communicate(timeout=60)[0]
        python(env, "manage.py", "lab", "down")

    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert "RelatedObjectDoesNotExist" not in imported.stderr
    assert "drive_count" in imported.stdout and " 23 " in imported.stdout
    assert "decision: STOPPED" in imported.stdout
    assert "evidence: IMPORTED from collection bundles" in imported.stdout
    report = next(x[len("report: "):] for x in imported.stdout.splitlines()
                  if x.startswith("report: "))
    verify = python(env, "manage.py", "verify_report", report)
    assert verify.returncode == 0, verify.stdout

    assert before["state"] == "done" and (before["decisions"], before["reports"]) == (1, 1)
    assert after == before  # the duplicate stored nothing: same measurements, one decision
    assert log.count("runners.gate_run_evaluate") >= 3, log  # received twice, succeeded twice
    assert log.count("] succeeded in") >= 2, log
    assert "IntegrityError" not in log and "raised unexpected" not in log, log
