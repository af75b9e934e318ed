"""Benchmark: every admin page, the admin API's lists and statistics, and the dashboards' HTTP paths at
scale -- ten million finished jobs and 300,000 waiting by default (not a test).

    python -m tests.bench.admin_scale --finished 10000000 --waiting 300000

Creates its own database (``--database``, on the server ``--server`` names), migrates it, fills it
(``fill.fill_scale``: bulk SQL in committed batches, the indexes made again afterwards, then VACUUM
ANALYZE), starts gunicorn from ``example_project/gunicorn.conf.py`` (2 workers), and GETs each path:
one warm-up request, then ``--rounds`` timed ones. Then each path once more in process through
Django's test client, to count its statements and name the slowest. Prints a table: median, p95
(nearest rank), status, statements, the slowest statement's time; paths over the 300 ms budget are
flagged. PostgreSQL's settings are its defaults: JIT stays on.

The database is dropped at the end unless ``--keep``; ``--reuse`` takes a kept one as it is when it
holds as many jobs as asked for (the fill of 10.3 million takes a quarter of an hour).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from urllib.parse import quote

import psycopg

from tests.bench.admin_pages import PASSWORD, REPOSITORY, USERNAME, logged_in_opener, start_server

BUDGET_MS = 300
NAME_WIDTH = 42


@dataclass
class Timing:
    name: str
    path: str
    median: float
    p95: float
    status: int
    statements: int | None = None
    slowest_statement_ms: float | None = None
    slowest_statement: str = ""


def create_database(server: str, name: str, reuse: bool) -> bool:
    """Make the database (dropping one of that name unless ``reuse``); True when it already existed."""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None
        if exists and reuse:
            return True
        if exists:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return False


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["OJS_METRICS"] = "true"  # /ojs/v1/metrics answers in process as in the served one
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    sys.path.insert(0, str(REPOSITORY))
    import django

    django.setup()


def prepare(finished: int, waiting: int, reuse: bool) -> dict[str, str]:
    """Migrate, fill unless a reused database holds the jobs already; return the ids the pages need."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from django_ojs.models import ApiKey, Job
    from tests.bench.fill import TYPES, fill_scale

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(seq) FROM django_ojs_job")
        present = cursor.fetchone()[0] or 0
    if not reuse or present != finished + waiting:
        print(f"filling {finished:,} finished and {waiting:,} waiting jobs ...", flush=True)
        started = time.perf_counter()
        fill_scale(finished, waiting, report=lambda line: print(
            f"{time.perf_counter() - started:6.0f} s {line}", flush=True))
        print(f"filled in {time.perf_counter() - started:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE django_ojs_worker SET last_heartbeat_at = now() - interval '2 seconds', handles = %s::jsonb "
            "WHERE id NOT IN ('bench-worker-18', 'bench-worker-19')",
            [__import__("json").dumps(TYPES[:-1])],
        )
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"database size: {cursor.fetchone()[0]}", flush=True)
    user, _ = User.objects.get_or_create(username=USERNAME)
    user.is_staff = user.is_superuser = True
    user.set_password(PASSWORD)
    user.save()
    dead = Job.objects.filter(state="discarded", dead_letter=True).order_by("-seq").values_list("seq", "id").first()
    big = Job.objects.filter(seq__in=[7 + 100_000 * k for k in range(1, 50)], args__0__row=1).values_list(
        "seq", flat=True).first()
    middle = finished // 2
    some = Job.objects.filter(seq=middle).values_list("id", flat=True).first()
    ApiKey.objects.filter(name="admin scale bench").delete()
    _, key = ApiKey.objects.issue("admin scale bench", ["admin"])
    connection.close()
    return {"dead_seq": str(dead[0]), "dead_id": str(dead[1]), "big_seq": str(big), "some_id": str(some),
            "middle_seq": str(middle), "key": key}


def admin_pages(ids: dict[str, str]) -> list[tuple[str, str]]:
    """Every page of the admin: the lists with and without filters, a job, the queues and a queue, the rest."""
    jobs, dead_letter = "/admin/django_ojs/job/", "/admin/django_ojs/deadletterjob/"
    return [
        ("admin index", "/admin/"),
        ("overview (chart: last hour)", "/admin/django_ojs/overview/"),
        ("overview (chart: last 30 days)", "/admin/django_ojs/overview/?chart=month"),
        ("jobs", jobs),
        ("jobs, page 2", f"{jobs}?p=2"),
        ("jobs, last reachable page", f"{jobs}?p=200"),
        ("jobs state=available", f"{jobs}?state=available"),
        ("jobs state=scheduled", f"{jobs}?state=scheduled"),
        ("jobs state=completed", f"{jobs}?state=completed"),
        ("jobs state=discarded", f"{jobs}?state=discarded"),
        ("jobs queue=billing", f"{jobs}?queue=billing"),
        ("jobs queue=billing state=retryable", f"{jobs}?queue=billing&state=retryable"),
        ("jobs type=analytics.rollup (rarest)", f"{jobs}?type=analytics.rollup"),
        ("jobs type + state=discarded", f"{jobs}?type=analytics.rollup&state=discarded"),
        ("jobs priority=-5", f"{jobs}?priority=-5"),
        ("jobs discarded in the last hour", f"{jobs}?state=discarded&finished_within=1h"),
        ("jobs of one worker", f"{jobs}?state=active&worker_id=bench-worker-1"),
        ("search: job id", f"{jobs}?q={ids['some_id']}"),
        ("search: tenant id", f"{jobs}?q=tenant-5"),
        ("search: type", f"{jobs}?q=email.digest"),
        ("search: no match", f"{jobs}?q=no-such-thing"),
        ("job page (3 errors)", f"{jobs}{ids['dead_seq']}/change/"),
        ("job page (300 KB args)", f"{jobs}{ids['big_seq']}/change/"),
        ("failed jobs (dead letter)", dead_letter),
        ("failed jobs queue=billing", f"{dead_letter}?queue=billing"),
        ("failed job page", f"{dead_letter}{ids['dead_seq']}/change/"),
        ("queues", "/admin/django_ojs/queue/"),
        ("queue page (configure billing)", "/admin/django_ojs/queue/billing/configure/"),
        ("workers", "/admin/django_ojs/worker/"),
        ("workers live refresh (JSON)", "/admin/django_ojs/worker/live/"),
        ("workflows", "/admin/django_ojs/workflow/"),
        ("cron", "/admin/django_ojs/cronjob/"),
        ("rate limits", "/admin/django_ojs/ratelimitoverride/"),
        ("api keys", "/admin/django_ojs/apikey/"),
    ]


def api_paths(ids: dict[str, str]) -> list[tuple[str, str]]:
    """The admin API's lists and statistics (docs/reference/http/admin-api.md), and the HTTP binding's
    queue statistics, dead letter and metrics."""
    from django_ojs.api.admin.paging import Keyset

    def ago(**delta: float) -> str:
        return quote((dt.datetime.now(dt.UTC) - dt.timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ"))

    middle = Keyset("created_at", True).cursor_after({"seq": int(ids["middle_seq"])})
    admin, jobs, history = "/ojs/v1/admin", "/ojs/v1/admin/jobs", "/ojs/v1/admin/stats/history"
    return [
        ("API queues", f"{admin}/queues"),
        ("API queue (billing)", f"{admin}/queues/billing"),
        ("API jobs", jobs),
        ("API jobs, page 50", f"{jobs}?page=50"),
        ("API jobs after a cursor mid-table", f"{jobs}?cursor={middle}"),
        ("API jobs state=available", f"{jobs}?state=available"),
        ("API jobs state=completed", f"{jobs}?state=completed"),
        ("API jobs state=discarded", f"{jobs}?state=discarded"),
        ("API jobs queue=billing state=retryable", f"{jobs}?queue=billing&state=retryable"),
        ("API jobs type=analytics.rollup", f"{jobs}?type=analytics.rollup"),
        ("API jobs type=email.*", f"{jobs}?type=email.*"),
        ("API jobs sort=priority", f"{jobs}?sort=priority"),
        ("API jobs sort=priority order=asc", f"{jobs}?sort=priority&order=asc"),
        ("API jobs sort=scheduled_at", f"{jobs}?sort=scheduled_at"),
        ("API jobs sort=scheduled_at order=asc", f"{jobs}?sort=scheduled_at&order=asc"),
        ("API jobs created 3 to 2 days ago", f"{jobs}?since={ago(days=3)}&until={ago(days=2)}"),
        ("API jobs 3 to 2 days ago, sort=priority",
         f"{jobs}?since={ago(days=3)}&until={ago(days=2)}&sort=priority"),
        ("API jobs search tenant-5", f"{jobs}?search=tenant-5"),
        ("API job (3 errors)", f"{jobs}/{ids['dead_id']}"),
        ("API workers", f"{admin}/workers"),
        ("API stats", f"{admin}/stats"),
        ("API history (5m, last hour)", history),
        ("API history 1h over 7 days", f"{history}?period=1h&since={ago(days=7)}"),
        ("API history 1d over 30 days, billing", f"{history}?period=1d&since={ago(days=30)}&queue=billing"),
        ("API dead letter", f"{admin}/dead-letter"),
        ("API dead letter stats", f"{admin}/dead-letter/stats"),
        ("API dead letter job", f"{admin}/dead-letter/{ids['dead_id']}"),
        ("API system config", f"{admin}/system/config"),
        ("HTTP queues", "/ojs/v1/queues"),
        ("HTTP queue (billing)", "/ojs/v1/queues/billing"),
        ("HTTP queue stats (billing)", "/ojs/v1/queues/billing/stats"),
        ("HTTP queue stats (critical)", "/ojs/v1/queues/critical/stats"),
        ("HTTP dead letter", "/ojs/v1/dead-letter"),
        ("HTTP dead letter stats", "/ojs/v1/dead-letter/stats"),
        ("HTTP metrics", "/ojs/v1/metrics"),
    ]


def p95(times: list[float]) -> float:
    """Nearest rank: of 5 samples, the slowest."""
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]


def time_path(opener: urllib.request.OpenerDirector, url: str, rounds: int) -> tuple[list[float], int]:
    times, status = [], 0
    for index in range(rounds + 1):
        started = time.perf_counter()
        try:
            with opener.open(url) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            error.read()
            status = error.code
        if index:  # the first request warms caches and connections
            times.append((time.perf_counter() - started) * 1000)
    return times, status


def statements(paths: list[tuple[str, str]], key: str) -> dict[str, tuple[int, float, str]]:
    """Each path once in process (Django's test client): how many statements, the slowest and its time."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(SERVER_NAME="localhost")
    client.force_login(User.objects.get(username=USERNAME))
    found = {}
    for _, path in paths:
        with CaptureQueriesContext(connection) as captured:
            client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
        timed = [(float(query["time"]) * 1000, query["sql"]) for query in captured.captured_queries]
        slowest = max(timed, default=(0.0, ""))
        found[path] = (len(timed), slowest[0], " ".join(slowest[1].split())[:90])
    connection.close()
    return found


def measure(ids: dict[str, str], rounds: int, port: int) -> list[Timing]:
    base = f"http://127.0.0.1:{port}"
    server = start_server(port)
    try:
        pages, paths = admin_pages(ids), api_paths(ids)
        browser = logged_in_opener(base)
        api = urllib.request.build_opener()
        api.addheaders = [("Authorization", f"Bearer {ids['key']}")]
        timings = []
        for opener, listed in ((browser, pages), (api, paths)):
            for name, path in listed:
                times, status = time_path(opener, base + path, rounds)
                timings.append(Timing(name, path, statistics.median(times), p95(times), status))
                print(f"  {name:{NAME_WIDTH}} {timings[-1].median:7.0f} ms", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    counted = statements([(t.name, t.path) for t in timings], ids["key"])
    for timing in timings:
        timing.statements, timing.slowest_statement_ms, timing.slowest_statement = counted[timing.path]
    return timings


def table(timings: list[Timing]) -> str:
    lines = [f"{'page':{NAME_WIDTH}} {'median':>8} {'p95':>8} {'status':>6} {'stmts':>5} {'slowest':>8}  slowest statement",
             "-" * 140]
    for t in timings:
        flag = " !" if t.median > BUDGET_MS else "  "
        lines.append(f"{t.name:{NAME_WIDTH}} {t.median:6.0f}ms {t.p95:6.0f}ms {t.status:6} {t.statements or 0:5} "
                     f"{t.slowest_statement_ms or 0:6.0f}ms{flag} {t.slowest_statement}")
    over = [t.name for t in timings if t.median > BUDGET_MS]
    lines.append(f"\n{len(over)} path(s) over {BUDGET_MS} ms (median)" + (f": {', '.join(over)}" if over else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Timing]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finished", type=int, default=10_000_000)
    parser.add_argument("--waiting", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=8231)
    parser.add_argument("--server", default=os.environ.get("OJS_BENCH_SERVER", "postgres://postgres@127.0.0.1:5432"),
                        help="the PostgreSQL server, without a database name")
    parser.add_argument("--database", default="ojs_scale_bench")
    parser.add_argument("--keep", action="store_true", help="keep the database when done")
    parser.add_argument("--reuse", action="store_true", help="use a kept database as it is, if it holds the jobs")
    options = parser.parse_args(argv)
    create_database(options.server, options.database, options.reuse)
    try:
        setup_django(f"{options.server}/{options.database}")
        ids = prepare(options.finished, options.waiting, options.reuse)
        print(f"\n{options.finished:,} finished + {options.waiting:,} waiting jobs; gunicorn (2 workers); "
              f"{options.rounds} timed requests per path after one warm-up\n", flush=True)
        timings = measure(ids, options.rounds, options.port)
        print("\n" + table(timings), flush=True)
        return timings
    finally:
        if not options.keep:
            from django.db import connections

            connections.close_all()
            drop_database(options.server, options.database)


if __name__ == "__main__":
    main()
