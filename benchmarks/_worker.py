"""A Celery worker with the shipped settings (the argv ``manage.py serve`` gives its worker
children: ``acceptance.serving.child_commands``), for the benchmarks.

``python benchmarks/_worker.py NUMBER [CHEAP_DIR]``: worker NUMBER's argv from
``child_commands``; with CHEAP_DIR, the nearly-free probes of ``_cheap`` are registered first
(the benchmark registers the same ones, so both sides plan the same steps).
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


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    import django

    django.setup()
    if len(sys.argv) > 2:
        import _cheap

        _cheap.register(Path(sys.argv[2]))
    from celery.bin.celery import main as celery_main

    sys.argv = ["celery", *shipped_argv(int(sys.argv[1]))]
    celery_main()


if __name__ == "__main__":
    main()
