"""Does a claim cost the same with a backlog of ten jobs and of millions?

Fills a PostgreSQL database with a backlog (available jobs) and a history
(completed and discarded jobs), then times FETCH+ACK round trips through the
core and prints the query plans of the hot statements. Not collected by
pytest; run it by hand:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ojs_bench \\
        python -m tests.bench.core_scaling --sizes 10 1000000 --history 1000000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import django


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill(available: int, history: int) -> None:
    """Bulk-insert rows with SQL: millions in seconds, not through the ORM."""
    from django.db import connection

    from django_ojs.models import Event, Job, JobError

    table = Job._meta.db_table
    with connection.cursor() as cursor:
        for model in (JobError, Event, Job):
            cursor.execute(f"TRUNCATE {model._meta.db_table} CASCADE")
        for count, state, queue in ((history, "completed", "bench"), (available, "available", "bench")):
            if not count:
                continue
            cursor.execute(
                f"""
                INSERT INTO {table} (id, type, queue, args, meta, priority, state, attempt, max_attempts,
                    releases, retry, visibility_timeout, tags, schema, extra, given_times, created_at,
                    enqueued_at, finished_at, completed_at, dead_letter)
                SELECT gen_random_uuid(), 'bench.noop', %s, '[]', '{{}}', (g %% 3) - 1, %s,
                    CASE WHEN %s = 'completed' THEN 1 ELSE 0 END, 3, 0, '{{}}', interval '30 minutes',
                    '[]', '', '{{}}', '{{}}', now(), now(),
                    CASE WHEN %s = 'completed' THEN now() END, CASE WHEN %s = 'completed' THEN now() END, false
                FROM generate_series(1, %s) AS g
                """,
                [queue, state, state, state, state, count],
            )
        cursor.execute(f"ANALYZE {table}")


def time_claims(rounds: int) -> list[float]:
    from django_ojs.core.outcome import Lease
    from django_ojs.models import Job

    timings = []
    for _ in range(rounds):
        began = time.perf_counter()
        jobs = Job.objects.fetch(["bench"], count=1, worker_id="bench")
        if jobs:
            Job.objects.ack(jobs[0].id, lease=Lease(worker_id="bench"))
        timings.append((time.perf_counter() - began) * 1000)
    return timings


def explain_claim() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """EXPLAIN (ANALYZE, BUFFERS) SELECT seq FROM django_ojs_job
               WHERE state = 'available' AND queue = 'bench'
               ORDER BY priority DESC, seq LIMIT 10 FOR UPDATE SKIP LOCKED"""
        )
        return "\n".join(row[0] for row in cursor.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1_000_000])
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    setup()
    from django_ojs.conf import ojs_settings

    print(f"events recorded: {ojs_settings.EVENTS}")
    for size in args.sizes:
        began = time.perf_counter()
        fill(size + args.rounds, args.history)
        print(f"\nbacklog {size:,} available + {args.history:,} completed (filled in "
              f"{time.perf_counter() - began:.1f}s)")
        time_claims(50)  # warm up connections and caches
        timings = time_claims(args.rounds)
        quantiles = statistics.quantiles(timings, n=100)
        print(f"  fetch+ack: median {statistics.median(timings):.2f} ms, p95 {quantiles[94]:.2f} ms, "
              f"p99 {quantiles[98]:.2f} ms over {len(timings)} rounds")
        print("  " + explain_claim().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
