"""A Celery worker with the shipped settings (the argv ``manage.py serve`` gives its worker
children: ``acceptance.serving.child_commands``), for the benchmarks.

``python benchmarks/_worker.py NUMBER [CHEAP_DIR]``: worker NUMBER's argv from
``child_commands``; with CHEAP_DIR, the nearly-free probes of ``_cheap`` are registered first
(the benchmark registers the same ones, so both sides plan the same steps).
With ``BENCH_PROFILE=<prefix>`` in the environment each task thread runs under cProfile (its
CPU time), written at shutdown to ``<prefix>.<NUMBER>`` (the figures then carry its cost).
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def shipped_argv(number: int) -> list[str]:
    """Worker ``number``'s argv after ``python -m celery`` as ``serve`` starts it."""
    from django.conf import settings

    from acceptance.serving import child_commands

    child = child_commands(roles=("worker",), var_dir=settings.VAR_DIR,
                           log_level="WARNING")[number - 1]
    return list(child.argv[3:])  # drop "python -m celery"


def profile_tasks(path: str) -> None:
    """cProfile every task's thread by its CPU time (``time.thread_time``), summed over the
    worker's tasks and written to ``path`` (pstats) when the worker shuts down; the task
    threads' CPU total beside the process's goes to ``path + ".cpu"``."""
    import cProfile
    import pstats
    import threading
    import time

    from celery.signals import task_postrun, task_prerun, worker_shutdown

    local, lock = threading.local(), threading.Lock()
    total: dict = {"stats": None, "task_cpu": 0.0, "start": time.process_time()}

    @task_prerun.connect(weak=False)
    def started(**_) -> None:
        local.profile, local.cpu = cProfile.Profile(time.thread_time), time.thread_time()
        local.profile.enable()

    @task_postrun.connect(weak=False)
    def ended(**_) -> None:
        local.profile.disable()
        with lock:
            total["task_cpu"] += time.thread_time() - local.cpu
            if total["stats"] is None:
                total["stats"] = pstats.Stats(local.profile)
            else:
                total["stats"].add(local.profile)

    @worker_shutdown.connect(weak=False)
    def shutdown(**_) -> None:
        with lock:
            if total["stats"] is not None:
                total["stats"].dump_stats(path)
            Path(path + ".cpu").write_text(
                f"task threads {total['task_cpu']:.3f} s CPU of the process's "
                f"{time.process_time() - total['start']:.3f} s\n")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    import django

    django.setup()
    if os.environ.get("BENCH_PROFILE"):  # a path prefix: <prefix>.<worker number>
        profile_tasks(f"{os.environ['BENCH_PROFILE']}.{sys.argv[1]}")
    if len(sys.argv) > 2:
        import _cheap

        _cheap.register(Path(sys.argv[2]))
    from celery.bin.celery import main as celery_main

    sys.argv = ["celery", *shipped_argv(int(sys.argv[1]))]
    celery_main()


if __name__ == "__main__":
    main()
