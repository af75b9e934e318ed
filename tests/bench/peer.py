"""The peer: pgqueuer (``pip install django-ojs[bench]``), a PostgreSQL job queue on asyncpg.

Installed in the suite's own database with its defaults (durable: every
table logged). Its log table records each job's ``queued``, ``picked`` and
``successful`` moves with the database's clock, so its figures are read
the way ours are: from the store's own timestamps.

- enqueue: ``Queries.enqueue`` with lists of 1,000 (bulk) or one job per call (single);
- work: ``python -m tests.bench.peer consume DSN`` runs one ``QueueManager``
  (batch 10) in drain mode: it exits once the queue is empty;
- pickup: the same with ``--continuous``, an idle consumer woken by NOTIFY.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from .stage import BenchError

ENTRYPOINT = "noop"


def available() -> str | None:
    """pgqueuer's version, or None when it is not installed."""
    try:
        import asyncpg  # noqa: F401
        import pgqueuer
    except ImportError:
        return None
    return pgqueuer.__version__


def _run(dsn: str, body: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    """Run ``body(connection, queries)`` on a fresh asyncpg connection."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    async def main() -> Any:
        conn = await asyncpg.connect(dsn)
        try:
            return await body(conn, Queries(AsyncpgDriver(conn)))
        finally:
            await conn.close()

    return asyncio.run(main())


def install(dsn: str) -> None:
    async def body(conn: Any, queries: Any) -> None:
        if not await queries.schema_is_installed():
            await queries.install()

    _run(dsn, body)
    reset(dsn)


def reset(dsn: str) -> None:
    async def body(conn: Any, queries: Any) -> None:
        await conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")

    _run(dsn, body)


def enqueue_bulk(dsn: str, count: int, batch: int = 1000) -> float:
    """Seconds to enqueue ``count`` jobs, ``batch`` per call."""

    async def body(conn: Any, queries: Any) -> float:
        began = time.perf_counter()
        for offset in range(0, count, batch):
            size = min(batch, count - offset)
            await queries.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size)
        return time.perf_counter() - began

    return _run(dsn, body)


def enqueue_single(dsn: str, count: int, in_transaction: bool = False) -> float:
    """Seconds to enqueue ``count`` jobs, one call (one autocommit statement) each, or each
    call in a transaction of its own on the same connection (``in_transaction``)."""

    async def body(conn: Any, queries: Any) -> float:
        began = time.perf_counter()
        for _ in range(count):
            if in_transaction:
                async with conn.transaction():
                    await queries.enqueue(ENTRYPOINT, None)
            else:
                await queries.enqueue(ENTRYPOINT, None)
        return time.perf_counter() - began

    return _run(dsn, body)


def measure(dsn: str, expected: int) -> float:
    """jobs/s from the first pick to the last success; raises unless each job was picked and succeeded once."""

    async def body(conn: Any, queries: Any) -> float:
        row = await conn.fetchrow(
            "SELECT count(DISTINCT job_id) FILTER (WHERE status = 'successful') AS done, "
            "count(*) FILTER (WHERE status = 'successful') AS successes, "
            "count(*) FILTER (WHERE status = 'picked') AS picks, "
            "extract(epoch FROM max(created) FILTER (WHERE status = 'successful') "
            "  - min(created) FILTER (WHERE status = 'picked')) AS seconds "
            "FROM pgqueuer_log"
        )
        left = await conn.fetchval("SELECT count(*) FROM pgqueuer")
        if not row["done"] == row["successes"] == row["picks"] == expected or left:
            raise BenchError(f"pgqueuer: {row['done']} of {expected} jobs succeeded once "
                             f"({row['successes']} successes, {row['picks']} picks, {left} left)")
        return expected / float(row["seconds"])

    return _run(dsn, body)


def pickup_latencies(dsn: str, samples: int, timeout: float) -> list[float]:
    """Milliseconds from enqueue to pick of one job at a time, by the log's timestamps (a consumer must be idle)."""

    async def body(conn: Any, queries: Any) -> list[float]:
        latencies = []
        for _ in range(samples):
            [job_id] = await queries.enqueue(ENTRYPOINT, None)
            deadline = time.monotonic() + timeout
            while True:
                latency = await conn.fetchval(
                    "SELECT extract(epoch FROM max(created) FILTER (WHERE status = 'picked') "
                    "  - min(created) FILTER (WHERE status = 'queued')) * 1000 "
                    "FROM pgqueuer_log WHERE job_id = $1 HAVING bool_or(status = 'successful')",
                    job_id,
                )
                if latency is not None:
                    latencies.append(float(latency))
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"pgqueuer did not run job {job_id} within {timeout:g}s")
                await asyncio.sleep(0.005)
            # Let the consumer go back to waiting, as a job arriving at an idle worker would find it.
            await asyncio.sleep(0.05)
        return latencies

    return _run(dsn, body)


def consume(dsn: str, batch: int, continuous: bool) -> None:
    """One consumer: a QueueManager running a noop entrypoint."""
    from pgqueuer import QueueManager
    from pgqueuer.types import QueueExecutionMode

    async def body(conn: Any, queries: Any) -> None:
        manager = QueueManager(queries)

        @manager.entrypoint(ENTRYPOINT)
        async def noop(job: Any) -> None:
            return None

        mode = QueueExecutionMode.continuous if continuous else QueueExecutionMode.drain
        await manager.run(batch_size=batch, mode=mode, dequeue_timeout=timedelta(seconds=5))

    _run(dsn, body)


def main() -> None:
    parser = argparse.ArgumentParser(description="One pgqueuer consumer process of the benchmark's peer.")
    parser.add_argument("command", choices=["consume"])
    parser.add_argument("dsn")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--continuous", action="store_true", help="keep running when the queue is empty")
    options = parser.parse_args()
    consume(options.dsn, options.batch, options.continuous)


if __name__ == "__main__":
    main()
