"""The run page and the measurements API at site scale.

Figures (one JSON line each, p95 of ``--requests`` requests through Django's test Client after
3 warm-ups, DEBUG off, PostgreSQL):

* ``run_page_p95_100k``: ``GET /runs/<id>/`` of a finished gate run on 128 nodes with 100 000
  measurements (256 of them charted: read bandwidth and line efficiency per node), as an
  engineer; the measurements are paged (200 a page). Target ≤ 300 ms (anchor 300).
* ``run_page_last_page_p95_100k``: the same on the last measurements page (its "Last" link,
  ``?measurements_cursor=last``), and ``run_page_middle_page_p95_100k`` on the page after row
  50 000 (a "Next" link's cursor): pages are keyset walks (``runners.measurement_pages``),
  every page should cost the same.
* ``api_measurements_first_page_p95_1m``: ``GET /api/measurements/?limit=100`` with 1 000 000
  measurements in the ledger, as a project manager (token). Target ≤ 50 ms (anchor 50).
* ``api_measurements_deep_page_p95_1m``: the page a client reaches after following ``next``
  900 000 rows deep (its cursor built as DRF builds it). Target ≤ 50 ms.
* ``api_measurements_deep_page_metric_p95_1m``: the same deep page with ``?metric=``.
* ``api_measurements_deep_page_gate_run_p95_1m``: 90 000 rows deep into the run of 100 000
  (``?gate_run=``).
* ``api_measurements_deep_page_customer_p95_1m``: the deep page as the engagement's customer
  (the list limited to their runs' ids, read first; staff see every engagement, so their query
  is the measurements alone).

Each figure also as ``…_cpu_p95_…``: the process's own CPU per request, and ``…_db_p95_…``:
the time spent waiting on the database (its server's CPU is there, not in the process's).
After seeding, the table is vacuumed and analysed as autovacuum would; ``--fresh`` measures
before that (no statistics, autovacuum off on the table), the figures named
``…_before_analyze_…``.

Owns its database (``bench_paging_<pid>``, dropped at the end) and Redis index 12
(``$BENCH_PAGING_REDIS_INDEX`` names another, for engineers sharing the machine). ``--rows``
sets the API's ledger size (default 1 000 000, inserted with ``generate_series``).

Run: ``.venv/bin/python benchmarks/paging.py [--requests 50] [--rows 1000000] [--fresh]``
"""

import argparse
import base64
import gc
import os
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _own import DatabaseWait, figure, measurements_insert, own, p95  # noqa: E402

NODES = 128
REDIS_INDEX = int(os.environ.get("BENCH_PAGING_REDIS_INDEX", "12"))  # _own.py: each its own
RUN_PAGE_ROWS = 100_000


def seed(rows: int):
    import base64 as b64

    from django.utils import timezone

    from acceptance.models import Credential, Node
    from gates.services import engagement_create
    from runners.models import GateRun, Measurement, NodeJob

    engagement = engagement_create(name="bench-paging", customer="Bench",
                                   start_date=date(2026, 9, 1))
    credential = Credential.from_secret("bench-key", "not a real key")
    credential.save()
    key = "ssh-ed25519 " + b64.b64encode(b"bench-host-key").decode()
    Node.objects.bulk_create(
        Node(engagement=engagement, name=f"gpu-{k:03d}", role=Node.Role.INFERENCE,
             address=f"10.1.{k // 250}.{k % 250 + 1}", ssh_user="acctest", host_key=key,
             credential=credential) for k in range(NODES))
    node_ids = [n.id for n in Node.objects.filter(engagement=engagement)]
    run = GateRun.objects.create(gate=engagement.gates.get(code="G2"), attempt=1,
                                 state=GateRun.State.DONE, started_by="bench",
                                 finished_at=timezone.now())
    NodeJob.objects.bulk_create(NodeJob(gate_run=run, node_id=n, state="done",
                                        started_at=timezone.now(),
                                        finished_at=timezone.now()) for n in node_ids)
    Measurement.objects.bulk_create(
        [Measurement(gate_run=run, node_id=n, metric="read_bandwidth", value=10.4e9,
                     unit="B/s", labels={"job": "seqread"}) for n in node_ids]
        + [Measurement(gate_run=run, node_id=n, metric="line_efficiency", value=0.84,
                       unit="ratio", labels={}, derived=True) for n in node_ids])
    measurements_insert(RUN_PAGE_ROWS - 2 * NODES, [run.id], node_ids)
    # The rest of the ledger: other runs of the same engagement (the API lists them all).
    others = [GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=a,
                                     state=GateRun.State.DONE, started_by="bench").id
              for a in range(1, 6)]
    measurements_insert(rows - RUN_PAGE_ROWS, others, node_ids)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fresh", action="store_true",
                        help="measure before the table has statistics (no ANALYZE, autovacuum "
                             "off on it): figures named …_before_analyze_…")
    args = parser.parse_args()
    owned = own("paging", redis_index=REDIS_INDEX, postgres=True)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    if settings.DEBUG:
        raise SystemExit("DEBUG is on: the figures would not be what a user gets")

    call_command("migrate", verbosity=0)
    try:
        measure(args)
    finally:
        owned.release()


def measure(args) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from rest_framework.test import APIClient

    from acceptance.models import Membership
    from acceptance.tokens import api_token_create
    from runners.measurement_pages import ASCENDING, Cursor, Key
    from runners.models import Measurement

    started = time.perf_counter()
    run = seed(args.rows)
    with connection.cursor() as cursor:
        if args.fresh:
            # As right after a bulk insert, before autovacuum has looked: no statistics.
            cursor.execute("ALTER TABLE runners_measurement SET (autovacuum_enabled = false)")
        else:
            # What autovacuum does after a bulk insert (PostgreSQL ≥ 13 vacuums on inserts
            # too): statistics and the visibility map, so index-only scans can skip the heap.
            cursor.execute("VACUUM ANALYZE runners_measurement")
    stored = Measurement.objects.count()
    print(f"# {stored} measurements ({time.perf_counter() - started:.0f} s to seed); "
          f"load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    engineer = User.objects.create_user("bench-engineer")
    Membership.objects.create(user=engineer, role=Membership.Role.ENGINEER)
    pm = User.objects.create_user("bench-pm")
    Membership.objects.create(user=pm, role=Membership.Role.PROJECT_MANAGER)
    browser = Client(SERVER_NAME="localhost")
    browser.force_login(engineer)
    api = APIClient(SERVER_NAME="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=pm, name='b')[1]}")
    customer = User.objects.create_user("bench-customer")
    Membership.objects.create(user=customer, role=Membership.Role.CUSTOMER,
                              organisation=run.gate.engagement.customer)
    customer_api = APIClient(SERVER_NAME="localhost")
    customer_api.credentials(
        HTTP_AUTHORIZATION=f"Token {api_token_create(user=customer, name='c')[1]}")

    cpu: dict[str, list[float]] = {}
    db: dict[str, list[float]] = {}
    waited = DatabaseWait()

    def timed(name: str, client, url: str, must: bytes) -> list[float]:
        for _ in range(3):
            client.get(url)
        gc.collect()
        gc.freeze()  # as acceptance/wsgi.py does: the seeding's heap is not walked per request
        times, cpu[name], db[name] = [], [], []  # by figure: two clients ask one URL
        for _ in range(args.requests):
            waited.seconds = 0.0
            start, start_cpu = time.perf_counter(), time.process_time()
            with connection.execute_wrapper(waited):
                response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            cpu[name].append((time.process_time() - start_cpu) * 1000)
            db[name].append(waited.seconds * 1000)
            if response.status_code != 200 or must not in response.content:
                raise SystemExit(f"GET {url}: {response.status_code} {response.content[:200]!r}")
        return times

    page_url = reverse("run-detail", args=[run.id])
    middle = Cursor(forward=True, key=Key(*run.measurements.order_by(*ASCENDING).values_list(
        "metric", "node_id", "id")[RUN_PAGE_ROWS // 2])).token()
    deep_id = Measurement.objects.order_by("id").values_list("id", flat=True)[900_000
                                                                              if stored > 900_000
                                                                              else stored // 2]
    deep = base64.b64encode(f"p={deep_id}".encode()).decode()
    run_deep_id = run.measurements.order_by("id").values_list("id", flat=True)[
        RUN_PAGE_ROWS * 9 // 10]
    run_deep = base64.b64encode(f"p={run_deep_id}".encode()).decode()
    k = f"{round(stored / 1000)}k" if stored < 1_000_000 else f"{stored // 1_000_000}m"
    fresh = "_before_analyze" if args.fresh else ""
    cases = [  # figure name, client, url, a text the answer must hold, target (ms)
        ("run_page_p95_100k", browser, page_url, b"100000 measurements", 300.0),
        ("run_page_last_page_p95_100k", browser, f"{page_url}?measurements_cursor=last",
         b"of 100000", 300.0),
        ("run_page_middle_page_p95_100k", browser, f"{page_url}?measurements_cursor={middle}",
         b"rows 50002\xe2\x80\x9350201 of 100000", 300.0),
        (f"api_measurements_first_page_p95_{k}", api, "/api/measurements/?limit=100",
         b'"results"', 50.0),
        (f"api_measurements_deep_page_p95_{k}", api,
         f"/api/measurements/?limit=100&cursor={deep}", b'"results"', 50.0),
        (f"api_measurements_deep_page_metric_p95_{k}", api,
         f"/api/measurements/?limit=100&metric=temperature&cursor={deep}", b'"temperature"',
         50.0),
        (f"api_measurements_deep_page_gate_run_p95_{k}", api,
         f"/api/measurements/?limit=100&gate_run={run.id}&cursor={run_deep}", b'"results"',
         50.0),
        (f"api_measurements_deep_page_customer_p95_{k}", customer_api,
         f"/api/measurements/?limit=100&cursor={deep}", b'"results"', 50.0),
    ]
    walls = {name: timed(name, client, url, must) for name, client, url, must, _ in cases}
    size = len(browser.get(page_url).content)
    print(f"# run page {size} bytes; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for name, _client, _url, _must, target in cases:
        wall, cpu_ms, db_ms = walls[name], cpu[name], db[name]
        print(f"# {name}: median wall {sorted(wall)[len(wall) // 2]:.1f} ms, "
              f"CPU {sorted(cpu_ms)[len(cpu_ms) // 2]:.1f} ms, database "
              f"{sorted(db_ms)[len(db_ms) // 2]:.1f} ms", file=sys.stderr)
        print(figure(name.replace("_p95", f"{fresh}_p95"), p95(wall), "ms", target, 1))
        print(figure(name.replace("_p95", f"{fresh}_cpu_p95"), p95(cpu_ms), "ms", target, 1))
        print(figure(name.replace("_p95", f"{fresh}_db_p95"), p95(db_ms), "ms", target, 1))
    print(figure("run_page_bytes_100k", size, "B", None, 0))


if __name__ == "__main__":
    main()
