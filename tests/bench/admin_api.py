"""Benchmark: the admin API's list and statistics paths with a million jobs, and the history read (not a test).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ojs_admin_bench \\
        /work/venv/bin/python tests/bench/admin_api.py --jobs 1000000

Migrates the database and fills it as the admin pages' benchmark does
(``admin_pages.prepare``: ``fill.py``, a million jobs over seven days, kept
between runs unless ``--refill``), writes 30 days of statistics history for
``--history-queues`` queues (20 by default: the fill's 8 and more; hour
buckets for 30 days, minute buckets for the last two: every transition in
every bucket, as a busy deployment leaves it), then:

1. reads the history in process (``core.history.series``) for each period
   over its longest window, for every queue and for one, ``--rounds`` times
   each, and prints the median and the slowest against the 100 ms target;
2. starts gunicorn and GETs each admin API path with an admin key: one
   warm-up request, then ``--rounds`` timed ones; prints the median and the
   slowest.

Point it at a scratch database: a refill empties its jobs, and the history
written replaces the one there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import time
import urllib.request
from urllib.parse import quote

from tests.bench.admin_pages import measure, prepare, setup_django, start_server

HISTORY_TARGET_MS = 100
TRANSITIONS = ("enqueued", "completed", "discarded", "retried", "cancelled")


def history_queues(count: int) -> list[str]:
    """The fill's queues, then as many more as ``count`` asks for."""
    from tests.bench.fill import QUEUES  # imports the models: Django is set up by then

    return [*QUEUES, *(f"queue-{index:02}" for index in range(len(QUEUES) + 1, count + 1))][:count]


def write_history(queues: list[str], days: int = 30) -> dt.datetime:
    """Hour buckets for ``days`` days and minute buckets for the last two, every queue and transition."""
    from django.db import connection

    from django_ojs.core.clock import db_now
    from django_ojs.core.history import hour_floor, minute_floor
    from django_ojs.models import HistoryCursor, StatsBucket

    now = db_now()
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {StatsBucket._meta.db_table}")
        for span, step, count, last in (("hour", "1 hour", days * 24, hour_floor(now)),
                                        ("minute", "1 minute", 2 * 24 * 60, minute_floor(now))):
            cursor.execute(
                f"""INSERT INTO {StatsBucket._meta.db_table} (span, start, queue, transition, count)
                    SELECT %s, %s - g * %s::interval, q, t, 1 + (g * 7 + length(q) + length(t)) %% 500
                    FROM generate_series(1, %s) g, unnest(%s::text[]) q, unnest(%s::text[]) t""",
                [span, last, step, count, queues, list(TRANSITIONS)],
            )
        cursor.execute(f"ANALYZE {StatsBucket._meta.db_table}")
    HistoryCursor.objects.update_or_create(id=1, defaults={
        "began_at": now - dt.timedelta(days=days + 1), "counted_through": minute_floor(now),
        "rolled_through": hour_floor(now), "marks": [[(now - dt.timedelta(minutes=1)).isoformat(), 0]]})
    return now


def time_history(rounds: int, queues: list[str]) -> None:
    from django.db import connection

    from django_ojs.core import history
    from django_ojs.core.clock import db_now

    windows = [("1m", dt.timedelta(hours=24)), ("5m", dt.timedelta(hours=24)), ("1h", dt.timedelta(days=30)),
               ("1d", dt.timedelta(days=30))]
    print(f"\nhistory of {len(queues)} queues read in process (core.history.series), {rounds} rounds; "
          f"target {HISTORY_TARGET_MS} ms\n")
    print(f"{'period over window':40} {'slots':>6} {'median':>9} {'slowest':>9}")
    for period, window in windows:
        for queue in (None, queues[-1]):
            times = []
            for _ in range(rounds + 1):
                now = db_now()
                started = time.perf_counter()
                found = history.series(period, now - window, now, now, queue)
                times.append((time.perf_counter() - started) * 1000)
            times = times[1:]
            median = statistics.median(times)
            flag = "" if median < HISTORY_TARGET_MS else "  OVER TARGET"
            name = f"{period} over {window}, {'every queue' if queue is None else 'one queue'}"
            print(f"{name:40} {len(found.slots):6} {median:7.1f}ms {max(times):7.1f}ms{flag}")
    connection.close()


def paths(ids: dict[str, str]) -> list[tuple[str, str]]:
    from django_ojs.api.admin.paging import Keyset

    three_days_ago = quote((dt.datetime.now(dt.UTC) - dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    two_days_ago = quote((dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    thirty_days_ago = quote((dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    day_ago = quote((dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    middle = Keyset("created_at", True).cursor_after({"seq": int(ids["middle_seq"])})
    jobs, history = "/ojs/v1/admin/jobs", "/ojs/v1/admin/stats/history"
    return [
        ("queues", "/ojs/v1/admin/queues"),
        ("queue detail (billing)", "/ojs/v1/admin/queues/billing"),
        ("jobs", jobs),
        ("jobs, page 50 (by number)", f"{jobs}?page=50"),
        ("jobs, after a cursor mid-table", f"{jobs}?cursor={middle}"),
        ("jobs state=available", f"{jobs}?state=available"),
        ("jobs state=pending", f"{jobs}?state=pending"),
        ("jobs state=discarded", f"{jobs}?state=discarded"),
        ("jobs state=completed", f"{jobs}?state=completed"),
        ("jobs queue=billing state=retryable", f"{jobs}?queue=billing&state=retryable"),
        ("jobs type=analytics.rollup (rarest)", f"{jobs}?type=analytics.rollup"),
        ("jobs type=email.* (prefix)", f"{jobs}?type=email.*"),
        ("jobs sort=priority", f"{jobs}?sort=priority"),
        ("jobs sort=scheduled_at asc", f"{jobs}?sort=scheduled_at&order=asc"),
        ("jobs created 3 to 2 days ago", f"{jobs}?since={three_days_ago}&until={two_days_ago}"),
        ("jobs search tenant-5", f"{jobs}?search=tenant-5"),
        ("jobs search args.user_id=500000", f"{jobs}?search=args.user_id%3D500000"),
        ("job detail (3 errors)", f"{jobs}/{ids['dead_id']}"),
        ("workers", "/ojs/v1/admin/workers"),
        ("stats", "/ojs/v1/admin/stats"),
        ("history (default: 5m, last hour)", history),
        ("history 1m over 24 h", f"{history}?period=1m&since={day_ago}"),
        ("history 1h over 30 days", f"{history}?period=1h&since={thirty_days_ago}"),
        ("history 1d over 30 days", f"{history}?period=1d&since={thirty_days_ago}"),
        ("history 1d over 30 days, one queue", f"{history}?period=1d&since={thirty_days_ago}&queue=billing"),
        ("system config", "/ojs/v1/admin/system/config"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=8202)
    parser.add_argument("--history-queues", type=int, default=20, help="queues with 30 days of history")
    options = parser.parse_args()
    if "DATABASE_URL" not in os.environ:
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database")
    setup_django()
    from django.db import connection

    from django_ojs.models import ApiKey, Job

    ids = prepare(options.jobs, options.refill)
    ids["middle_seq"] = str(Job.objects.filter(seq__gte=options.jobs // 2).order_by("seq").values_list(
        "seq", flat=True).first())
    queues = history_queues(options.history_queues)
    write_history(queues)
    time_history(options.rounds, queues)
    _, key = ApiKey.objects.issue("admin api bench", ["admin"])
    connection.close()
    server = start_server(options.port)
    try:
        base = f"http://127.0.0.1:{options.port}"
        opener = urllib.request.build_opener()
        opener.addheaders = [("Authorization", f"Bearer {key}")]
        print(f"\n{options.jobs:,} jobs; {options.rounds} timed requests per path after one warm-up\n")
        print(f"{'path':40} {'median':>9} {'slowest':>9} {'status':>6} {'KB':>6}")
        for name, path in paths(ids):
            times, status, size = measure(opener, base + path, options.rounds)
            print(f"{name:40} {statistics.median(times):7.0f}ms {max(times):7.0f}ms {status:6} {size / 1024:6.1f}",
                  flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
