"""``manage.py serve``: the whole service on this machine — gunicorn for the web, Celery
workers and beat as supervised child processes (``acceptance.serving`` has the rules).

``--only web|worker|beat`` (repeatable) starts one role: a container each in
``docker-compose.yml``. ``--print`` prints each child's argv and starts nothing. On the embedded
default (no ``CELERY_BROKER_URL``) the children use the server-less filesystem broker under
``var/broker``; with ``DATABASE_URL`` and ``CELERY_BROKER_URL`` set, PostgreSQL and Redis.

Refuses to start (exit status 2, one line) when the database has unapplied migrations, or in
production (``ACCEPTANCE_ENV=production``) when ``collectstatic`` has not been run. SIGTERM or
SIGINT stops every child; exit status 0 then, 1 when a child kept dying.
"""

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from acceptance.serving import (
    ROLES,
    Supervisor,
    announce_json,
    child_commands,
    child_environment,
    child_log_level,
)


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def positive_from_environment(variable: str, default: int) -> int:
    """``serve``'s default from ``variable``: a value that is not a whole number of at least 1
    refuses the start naming the variable (exit status 2, one line)."""
    raw = os.environ.get(variable)
    if raw is None:
        return default
    try:
        return positive(raw)
    except ValueError:
        # read while the parser is built, where a CommandError would end in a traceback
        sys.stderr.write(f"CommandError: {variable} must be a whole number of at least 1, "
                         f"not {raw!r}\n")
        raise SystemExit(2) from None


class Command(BaseCommand):
    help = "Serve the web (gunicorn), Celery workers and beat, supervised."
    requires_system_checks = []  # the children check; --print must work anywhere

    def add_arguments(self, parser):
        parser.add_argument("--only", action="append", choices=ROLES, default=None,
                            help="start only this role (repeatable); default: all")
        parser.add_argument("--bind", default=os.environ.get("ACCEPTANCE_BIND",
                                                             "127.0.0.1:8000"),
                            help="gunicorn's address (default $ACCEPTANCE_BIND or "
                                 "127.0.0.1:8000)")
        parser.add_argument("--web-workers", type=positive,
                            default=positive_from_environment("ACCEPTANCE_WEB_WORKERS", 2))
        parser.add_argument("--workers", type=positive,
                            default=positive_from_environment("ACCEPTANCE_WORKERS", 2),
                            help="Celery worker processes (default $ACCEPTANCE_WORKERS or 2: "
                                 "the service's own CPU per probe spread over two processes)")
        parser.add_argument("--concurrency", type=positive,
                            default=positive_from_environment("ACCEPTANCE_WORKER_CONCURRENCY",
                                                              64),
                            help="jobs at once per worker process (threads; default 64: node "
                                 "jobs wait on SSH, so 2 × 64 run 128 nodes in one wave)")
        parser.add_argument("--stop-grace", type=float, default=30.0,
                            help="seconds a child has to stop after SIGTERM")
        parser.add_argument("--print", action="store_true", dest="dry_run",
                            help="print each child's argv, start nothing")

    def handle(self, *args, only, bind, web_workers, workers, concurrency, stop_grace,
               dry_run, **options):
        roles = tuple(r for r in ROLES if r in (only or ROLES))
        env = child_environment(dict(os.environ), var_dir=settings.VAR_DIR)
        if "worker" in roles:  # the web child refuses barrier runs the workers cannot hold
            env.setdefault("ACCEPTANCE_NODE_JOB_SLOTS", str(workers * concurrency))
        children = child_commands(roles=roles, bind=bind, web_workers=web_workers,
                                  workers=workers, concurrency=concurrency,
                                  var_dir=settings.VAR_DIR, log_level=child_log_level(env))
        if dry_run:
            for child in children:
                self.stdout.write(f"{child.name}: {' '.join(child.argv)}")
            return
        self._refuse_unready(roles)
        broker_dir = (settings.VAR_DIR / "broker"
                      if env["CELERY_BROKER_URL"].startswith("filesystem://") else None)
        supervisor = Supervisor(children, env=env, cwd=settings.BASE_DIR,
                                stop_grace_s=stop_grace, broker_dir=broker_dir,
                                announce=announce_json(sys.stderr))
        status = supervisor.run()
        if status:
            raise CommandError(f"stopped: {supervisor.failed}", returncode=1)

    def _refuse_unready(self, roles):
        try:
            executor = MigrationExecutor(connection)
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except Exception as error:
            raise CommandError(f"database: unreachable ({type(error).__name__})",
                               returncode=2) from None
        if pending:
            raise CommandError(f"the database has {len(pending)} unapplied migrations: run "
                               "manage.py migrate first", returncode=2)
        manifest = settings.STATIC_ROOT / "staticfiles.json"
        if settings.PRODUCTION and "web" in roles and not manifest.exists():
            raise CommandError("no collected static files: run manage.py collectstatic "
                               "first (production serves hashed names)", returncode=2)
