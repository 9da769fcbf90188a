"""One probe end to end through the service vs the same command through plain ``ssh``.

Figure (TARGETS.md): dispatch, SSH, store raw, parse, store measurements for one
``nvme smart-log`` probe on a lab node, against ``ssh -p PORT host CMD`` with OpenSSH's client
(connection set-up included in both). Target ≤ 1.05×. Prints one JSON line:
``{"name", "value", "unit", "anchor", "ratio"}`` with medians of ``--runs`` runs, interleaved.

Run: ``.venv/bin/python benchmarks/probe_overhead.py [--runs 9]`` (uses a scratch var dir).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["ACCEPTANCE_VAR_DIR"] = tempfile.mkdtemp(prefix="bench-var-")
os.environ.pop("CELERY_BROKER_URL", None)
os.environ.pop("DATABASE_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)

    from runners.execution import _JobContext, probe_run_execute
    from runners.lab.services import lab_down, lab_up
    from runners.models import GateRun, NodeJob
    from runners.probes import probe
    from runners.transport import SSHConnection

    engagement, lab = lab_up(scenario_name="healthy")
    try:
        node = engagement.nodes.get(role="array")
        gate_run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                          started_by="benchmark")
        job = NodeJob.objects.create(gate_run=gate_run, node=node, state="running",
                                     lease="benchmark")
        spec = probe("nvme_smart_log")
        values = {"device": "/dev/nvme3"}
        command = spec.command(values)
        key = lab.directory / "client_key"
        known = lab.directory / "known_hosts"
        known.write_text(f"[127.0.0.1]:{lab.port} {lab.host_key}\n")
        ssh = ["ssh", "-F", "/dev/null", "-i", str(key), "-p", str(lab.port),
               "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
               "-o", "BatchMode=yes", f"{lab.user}@127.0.0.1", command]

        def service_once() -> float:
            start = time.perf_counter()
            with SSHConnection(node.ssh_target()) as connection:
                run = probe_run_execute(ctx=_JobContext(job, connection, {}), spec=spec,
                                        values=values)
            assert run.state == "parsed", run.error
            return time.perf_counter() - start

        def ssh_once() -> float:
            start = time.perf_counter()
            done = subprocess.run(ssh, capture_output=True, check=True)
            assert b"critical_warning" in done.stdout
            return time.perf_counter() - start

        service_once(), ssh_once()  # warm caches
        ours, anchor = [], []
        for _ in range(args.runs):
            ours.append(service_once())
            anchor.append(ssh_once())
        value, base = statistics.median(ours), statistics.median(anchor)
        print(json.dumps({"name": "probe_end_to_end", "value": round(value, 4), "unit": "s",
                          "anchor": round(base, 4), "ratio": round(value / base, 3)}))
    finally:
        lab_down()


if __name__ == "__main__":
    main()
