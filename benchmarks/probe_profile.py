"""Where the service's CPU per probe goes: one node job of ``--steps`` nearly-free probes
(``benchmarks/_cheap.py``: ``cat`` of outputs captured from one real G2 on a lab node, parsed by
the real parsers), run in this process (the embedded default: no broker) under cProfile.

Prints the process's CPU per probe (ms; every thread: the SSH transport's reader and the
tool-version pool included, which cProfile does not see), the SQL statements per probe, and the
profile's top functions by own and cumulative CPU time (the job's thread only: the rest of the
process's CPU is the other threads').

Owns PostgreSQL ``bench_probe_profile_<pid>`` (``benchmarks/_own.py``); no Redis.

cProfile slows the job's thread about 1.4×: ``--top 0`` runs it unprofiled for the CPU figures.

Run: ``.venv/bin/python benchmarks/probe_profile.py [--steps 20] [--top 30]``
"""

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import figure, own  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", type=Path, help="write the profile's pstats to this file")
    parser.add_argument("--steps", type=int, default=20, help="G2 plans repeated (3 probes each)")
    parser.add_argument("--top", type=int, default=30,
                        help="functions listed; 0: no profile (CPU figures without its cost)")
    args = parser.parse_args()
    if not 1 <= args.steps <= 200:
        parser.error("--steps must be 1 … 200")
    owned = own("probe_profile", postgres=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        measure(args, Path(owned.var_dir) / "cheap")
    finally:
        from runners.lab.services import lab_down

        lab_down()
        owned.release()


def measure(args, cheap_dir: Path) -> None:
    import _cheap
    from django.db import connection

    from runners import execution
    from runners.dispatch import gate_run_start
    from runners.lab.services import lab_up
    from runners.models import GateRun

    engagement, _ = lab_up(scenario_name="healthy", engagement_name="bench-profile")

    def g2() -> GateRun:
        engagement.gates.filter(code="G1").update(state="passed")
        engagement.gates.filter(code="G2").update(state="pending")
        engagement.state = "active"
        engagement.save(update_fields=["state"])
        return gate_run_start(gate=engagement.gates.get(code="G2"), started_by="benchmark")

    _cheap.capture(g2(), cheap_dir)  # one real G2: its outputs become the cheap ones
    _cheap.register(cheap_dir)
    engagement.gates.filter(code="G2").update(probe_plan=_cheap.plan())
    g2()  # warm-up of the cheap plan
    engagement.gates.filter(code="G2").update(probe_plan=_cheap.plan() * args.steps)

    real = execution.node_job_execute
    seen: dict = {}
    statements: Counter = Counter()

    def count(execute, sql, params, many, context):
        statements[sql.split(None, 1)[0].upper()] += 1
        return execute(sql, params, many, context)

    finish = execution.gate_run_finish_if_complete
    ended: list[int] = []

    def profiled(*, node_job_id: int) -> None:
        """The node job alone: its evaluation and report (rung at its end) after the profile."""
        profile = cProfile.Profile(time.thread_time)  # CPU of the job's thread, not waits
        execution.gate_run_finish_if_complete = lambda *, gate_run_id: ended.append(gate_run_id)
        try:
            cpu, wall, own_cpu = time.process_time(), time.perf_counter(), time.thread_time()
            with connection.execute_wrapper(count):
                if args.top:
                    profile.runcall(real, node_job_id=node_job_id)
                else:  # unprofiled: the CPU figures as served
                    real(node_job_id=node_job_id)
            seen.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall,
                        thread=time.thread_time() - own_cpu, profile=profile)
        finally:
            execution.gate_run_finish_if_complete = finish
        for gate_run_id in ended:
            finish(gate_run_id=gate_run_id)

    execution.node_job_execute = profiled
    try:
        run = g2()
    finally:
        execution.node_job_execute = real
    run.refresh_from_db()
    probes = run.probe_runs.count()
    assert probes == 3 * args.steps, probes
    assert not run.probe_runs.exclude(state="parsed").exists(), "a probe run did not parse"
    print(figure("node_job_cpu_per_probe", seen["cpu"] * 1000 / probes, "ms", 5.0, 2))
    print(figure("node_job_thread_cpu_per_probe", seen["thread"] * 1000 / probes, "ms", None,
                 2))
    print(figure("node_job_wall_per_probe", seen["wall"] * 1000 / probes, "ms", None, 2))
    print(f"# SQL statements per probe: {sum(statements.values()) / probes:.2f} "
          f"({dict(statements)} over {probes} probes)", file=sys.stderr)
    if args.dump and args.top:
        seen["profile"].dump_stats(args.dump)
    for key in ("tottime", "cumulative") if args.top else ():
        text = io.StringIO()
        pstats.Stats(seen["profile"], stream=text).sort_stats(key).print_stats(args.top)
        print(text.getvalue(), file=sys.stderr)


if __name__ == "__main__":
    main()
