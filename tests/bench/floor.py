"""The PostgreSQL floor: a job queue in raw SQL, the least work a store of this shape can do.

A table shaped like ours (uuid id, type, queue, JSON args and meta,
priority, state, attempt, timestamps) with the one partial index a claim
needs, its ids UUIDv7 as ojs-core requires and ``enqueue`` makes ours, and a
log table that gets a row per transition, as our events do.

- enqueue: ``COPY`` in batches of 1,000 (bulk), one autocommit ``INSERT`` each (single);
- work: ``python -m tests.bench.floor work DSN`` claims 10 jobs per
  ``UPDATE ... WHERE seq IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 10)
  RETURNING`` and completes the previous 10 in the same transaction (as our
  worker batches its ACKs with its next claim), until the queue is empty.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import psycopg
from uuid6 import uuid7

from .stage import BenchError

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_raw_job (
    seq bigserial PRIMARY KEY,
    id uuid NOT NULL UNIQUE,
    type text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL DEFAULT '[]',
    meta jsonb NOT NULL DEFAULT '{}',
    priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    completed_at timestamptz,
    worker_id text
);
CREATE INDEX IF NOT EXISTS bench_raw_job_available
    ON bench_raw_job (queue, priority DESC, seq) WHERE state = 'available';
CREATE TABLE IF NOT EXISTS bench_raw_log (
    seq bigserial PRIMARY KEY,
    job_id uuid NOT NULL,
    state text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
"""

CLAIM = """
WITH claimed AS (
    UPDATE bench_raw_job SET state = 'active', attempt = attempt + 1, started_at = now(), worker_id = %s
    WHERE seq IN (
        SELECT seq FROM bench_raw_job WHERE state = 'available' AND queue = 'default'
        ORDER BY priority DESC, seq LIMIT 10 FOR UPDATE SKIP LOCKED
    )
    RETURNING seq, id
), logged AS (
    INSERT INTO bench_raw_log (job_id, state) SELECT id, 'active' FROM claimed
)
SELECT seq FROM claimed
"""

COMPLETE = """
WITH done AS (
    UPDATE bench_raw_job SET state = 'completed', completed_at = now()
    WHERE seq = ANY(%s) AND state = 'active'
    RETURNING id
)
INSERT INTO bench_raw_log (job_id, state) SELECT id, 'completed' FROM done
"""


def install(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute("TRUNCATE bench_raw_job, bench_raw_log RESTART IDENTITY")


def enqueue_bulk(dsn: str, count: int, batch: int = 1000) -> float:
    """Seconds to COPY ``count`` jobs, one transaction per ``batch``."""
    with psycopg.connect(dsn) as conn:
        began = time.perf_counter()
        for offset in range(0, count, batch):
            with conn.cursor().copy("COPY bench_raw_job (id, type, queue, args, state) FROM STDIN") as copy:
                for _ in range(min(batch, count - offset)):
                    copy.write_row((uuid7(), "demo.noop", "default", "[]", "available"))
            conn.commit()
        return time.perf_counter() - began


def enqueue_single(dsn: str, count: int, in_transaction: bool = False) -> float:
    """Seconds to INSERT ``count`` jobs one by one, each committed on its own (autocommit, or
    ``in_transaction``: BEGIN, INSERT, COMMIT, as a view's transaction)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        began = time.perf_counter()
        for _ in range(count):
            with conn.transaction() if in_transaction else contextlib.nullcontext():
                conn.execute(
                    "INSERT INTO bench_raw_job (id, type, queue, args, state) VALUES (%s, %s, %s, %s, %s)",
                    (uuid7(), "demo.noop", "default", "[]", "available"),
                )
        return time.perf_counter() - began


def fill(dsn: str, count: int) -> None:
    """``count`` available jobs at once, for the work figure (not timed)."""
    # The ids OJS requires (ojs-core: UUIDv7), made as our fill makes them. Imported here, not at the
    # top: the floor's worker processes (``work``) run without Django and never need it.
    from django_ojs.core.pg.events import UUID7_SQL

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE bench_raw_job, bench_raw_log RESTART IDENTITY")
        conn.execute(
            "INSERT INTO bench_raw_job (id, type, queue, state) "
            f"SELECT {UUID7_SQL}, 'demo.noop', 'default', 'available' FROM generate_series(1, %s)",
            (count,),
        )
        conn.execute("ANALYZE bench_raw_job")


def work(dsn: str) -> None:
    """Claim and complete until nothing is left (the body of one floor process)."""
    worker_id = f"raw-{os.getpid()}"
    with psycopg.connect(dsn) as conn:
        previous: list[int] = []
        while True:
            with conn.transaction():
                if previous:
                    conn.execute(COMPLETE, (previous,))
                previous = [seq for (seq,) in conn.execute(CLAIM, (worker_id,)).fetchall()]
            if not previous:
                return


def measure(dsn: str, expected: int) -> float:
    """jobs/s from the first claim to the last completion; raises unless each job ran exactly once."""
    with psycopg.connect(dsn) as conn:
        total, once, seconds = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1), "
            "extract(epoch FROM max(completed_at) - min(started_at)) FROM bench_raw_job"
        ).fetchone()
        wrong = conn.execute(
            "SELECT count(*) FROM (SELECT job_id FROM bench_raw_log GROUP BY job_id HAVING "
            "count(*) FILTER (WHERE state = 'active') <> 1 OR count(*) FILTER (WHERE state = 'completed') <> 1) w"
        ).fetchone()[0]
    if total != expected or once != expected or wrong:
        raise BenchError(f"raw SQL floor: {once} of {expected} jobs completed once ({total} stored, {wrong} bad logs)")
    return expected / float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description="One raw-SQL worker process of the benchmark's floor.")
    parser.add_argument("command", choices=["work"])
    parser.add_argument("dsn")
    work(parser.parse_args().dsn)


if __name__ == "__main__":
    main()
