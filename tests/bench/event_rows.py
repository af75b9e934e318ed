"""What ten event rows cost to build and insert, in the layout before migration 0033 and now.

    python -m tests.bench.event_rows [--rounds 10] [--statements 200]

On a fresh bench database: one statement inserts ten job events from a
ten-row source, as the claim's and the completion's statements do. "before"
is a table shaped as the events were before 0033 (a UUIDv7 built by
PostgreSQL per row, kept unique by an index, the whole payload built as
JSON); "now" is the events table, written by the engine's own SQL
(``core/pg/events.insert_job_events``). Each sample is ``--statements``
statements in one transaction (no commit in the figure), the two layouts and
the source alone alternated round by round; the report is each layout's median
time per statement above the source alone, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from .stage import DEFAULT_SERVER, bench_database

SOURCE = ("(SELECT gen_random_uuid() AS id, 'bench.noop'::text AS type, 'default'::text AS queue, "
          "'active'::text AS state, 1 AS attempt, now() AS started_at FROM generate_series(1, 10)) j")
BEFORE_TABLE = "ojs_bench_event_before"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--statements", type=int, default=200)
    args = parser.parse_args()
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)):
        from django.db import connection, transaction

        from django_ojs.core.pg.events import UUID7_SQL, insert_job_events

        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE {BEFORE_TABLE} (seq bigserial PRIMARY KEY, id uuid NOT NULL UNIQUE, "
                "type varchar(64) NOT NULL, time timestamptz NOT NULL, job_id uuid, queue varchar(128), "
                "data jsonb NOT NULL)"
            )
            cursor.execute(f"CREATE INDEX {BEFORE_TABLE}_queue ON {BEFORE_TABLE} (queue, type, seq)")
            cursor.execute(f"CREATE INDEX {BEFORE_TABLE}_job ON {BEFORE_TABLE} (job_id, seq) WHERE job_id IS NOT NULL")
        statements = {
            "before": (
                f"INSERT INTO {BEFORE_TABLE} (id, type, time, job_id, queue, data) SELECT {UUID7_SQL}, "
                "'job.started', now(), j.id, j.queue, jsonb_build_object('job_id', j.id::text, 'job_type', j.type, "
                "'queue', j.queue, 'state', j.state, 'attempt', j.attempt) || '{\"worker_id\": \"w1\"}'::jsonb "
                f"FROM {SOURCE}"
            ),
            "now": insert_job_events(SOURCE, kind="'job.started'", time="now()", data="'{\"worker_id\": \"w1\"}'"),
            "source": f"SELECT count(*) FROM {SOURCE}",
        }
        samples: dict[str, list[float]] = {name: [] for name in statements}
        with connection.cursor() as cursor:
            for _ in range(args.rounds):
                for name, sql in statements.items():
                    with transaction.atomic():  # its commit after the figure
                        began = time.perf_counter()
                        for _ in range(args.statements):
                            cursor.execute(sql)
                        samples[name].append((time.perf_counter() - began) / args.statements * 1e6)
        source = statistics.median(samples["source"])
        before, now = (statistics.median(samples[name]) - source for name in ("before", "now"))
        print(f"ten event rows in one statement, above the source alone ({args.rounds} rounds of "
              f"{args.statements} statements): before 0033 {before:.0f} µs, now {now:.0f} µs, "
              f"now/before {now / before:.2f}")


if __name__ == "__main__":
    main()
