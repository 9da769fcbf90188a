"""The API's own CPU per request, one request at a time, and where it goes.

Figure (one JSON line): ``api_engagements_cpu_median``: the process's CPU (ms) of ``GET
/api/engagements/`` through Django's test Client (DEBUG off, an API token, the data of
``benchmarks/load_servers.py``: 50 engagements seeded by ``benchmarks/dashboard.py``'s
``Seeder``, SQLite in a scratch var dir), median of ``--requests`` after 5 warm-ups; the query
count and answer size go to stderr. ``--profile N`` prints cProfile's top N functions (by
cumulative time) of one more request. No anchor: under 20 concurrent clients on 2 cores, CPU
per request is what bounds the answers per second (load_servers.py's p95).

Recorded (issue 17, 2 shared cores, load average 5-10, 3 runs each interleaved with the code
before): 22.4 ms before (19.2 / 22.4 / 25.8), 9.4 ms after (8.7 / 9.4 / 11.7); the same 5
queries and 34 440 bytes. About 7.7 ms of it is the request itself (one engagement).

Run: ``.venv/bin/python benchmarks/api_cpu.py [--requests 30] [--engagements 50]
[--profile 30] [--url /api/engagements/]``
"""

import argparse
import cProfile
import gc
import io
import math
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import figure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--engagements", type=int, default=50)
    parser.add_argument("--measurements", type=int, default=25_000)
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--url", default="/api/engagements/")
    args = parser.parse_args()
    var_dir = tempfile.mkdtemp(prefix="bench-api-cpu-")
    os.environ["ACCEPTANCE_VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "acceptance.settings"
    for variable in ("DATABASE_URL", "CELERY_BROKER_URL", "ACCEPTANCE_DEBUG", "DJANGO_DEBUG"):
        os.environ.pop(variable, None)
    try:
        measure(args)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def measure(args) -> None:
    import django

    django.setup()
    from dashboard import Seeder  # benchmarks/dashboard.py
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from acceptance.models import Membership
    from acceptance.tokens import api_token_create

    if settings.DEBUG:
        raise SystemExit("DEBUG is on: the figures would not be what a user gets")
    call_command("migrate", verbosity=0)
    Seeder(math.ceil(args.measurements / args.engagements)).engagements(args.engagements)
    user = User.objects.create_user("cpu-pm")
    Membership.objects.create(user=user, role=Membership.Role.PROJECT_MANAGER)
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user, name='c')[1]}")
    for _ in range(5):
        response = client.get(args.url)
        if response.status_code != 200:
            raise SystemExit(f"GET {args.url}: {response.status_code} {response.content[:200]!r}")
    gc.collect()
    gc.freeze()  # as acceptance/wsgi.py does
    cpu = []
    for _ in range(args.requests):
        start = time.process_time()
        client.get(args.url)
        cpu.append((time.process_time() - start) * 1000)
    with CaptureQueriesContext(connection) as queries:
        size = len(client.get(args.url).content)
    cpu.sort()
    print(f"# GET {args.url}: {len(queries)} queries, {size} bytes, CPU median "
          f"{cpu[len(cpu) // 2]:.1f} ms (min {cpu[0]:.1f}, max {cpu[-1]:.1f}); load average "
          f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(figure("api_engagements_cpu_median", cpu[len(cpu) // 2], "ms", None, 1))
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        client.get(args.url)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue(), file=sys.stderr)


if __name__ == "__main__":
    main()
