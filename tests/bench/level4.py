"""What unique jobs and rate limits cost: a unique PUSH against a plain one, and a
rate-limited FETCH against a plain one, in the same run, through the core.

Each figure is the median over several runs of a batch of operations, one
transaction each (as an HTTP PUSH or FETCH is). Like the suite, it runs in a
database of its own on the server of ``--server`` and drops it after:

    python -m tests.bench.level4 [--server postgres://postgres@127.0.0.1:5432/postgres] [--sqlite]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from .stage import DEFAULT_SERVER, bench_database


def clear() -> None:
    from django.db import connection

    from django_ojs.models import Event, Job, JobError, Queue, RateLimitOverride, RateLimitStart

    with connection.cursor() as cursor:
        for model in (JobError, Event, Job, Queue, RateLimitStart, RateLimitOverride):
            cursor.execute(f"DELETE FROM {model._meta.db_table}")


def timed(operations: int, step: Callable[[int], None]) -> float:
    """Microseconds per operation."""
    started = time.perf_counter()
    for n in range(operations):
        step(n)
    return (time.perf_counter() - started) / operations * 1e6


def push_costs(operations: int) -> dict[str, float]:
    from django_ojs.models import Job
    from django_ojs.protocol.envelope import parse_job

    def plain(n: int) -> None:
        Job.objects.push(parse_job({"type": "bench.plain", "args": [n], "options": {"queue": "bench"}}))

    def unique(n: int) -> None:
        Job.objects.push(parse_job({"type": "bench.unique", "args": [n], "options": {"queue": "bench",
                                    "unique": {"keys": ["type", "args"]}}}))

    def duplicate(n: int) -> None:
        # The same key every time: the first is stored, the rest collide and are ignored.
        Job.objects.push(parse_job({"type": "bench.unique", "args": ["same"], "options": {"queue": "bench",
                                    "unique": {"keys": ["type", "args"], "on_conflict": "ignore"}}}))

    return {"plain push": timed(operations, plain), "unique push (new key)": timed(operations, unique),
            "unique push (duplicate, ignore)": timed(operations, duplicate)}


def fetch_costs(operations: int) -> dict[str, float]:
    from django_ojs.models import Job
    from django_ojs.protocol.envelope import parse_job

    def fill(queue: str, options: dict) -> None:
        Job.objects.push_many([parse_job({"type": "bench.job", "args": [], "options": {"queue": queue, **options}})
                               for _ in range(operations)])

    fill("plain", {})
    # Limits high enough never to bind: the figure is the cost of checking them.
    fill("limited", {"rate_limit": {"key": "bench-api", "concurrency": 10**6,
                                    "rate": {"limit": 10**6, "period": "PT1M"}}})
    plain = timed(operations, lambda n: Job.objects.fetch(["plain"], worker_id="w"))
    limited = timed(operations, lambda n: Job.objects.fetch(["limited"], worker_id="w"))
    return {"plain fetch": plain, "rate-limited fetch (concurrency + window)": limited}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operations", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--server", default=DEFAULT_SERVER, help="PostgreSQL server to create the bench database on")
    parser.add_argument("--sqlite", action="store_true", help="measure on a temporary SQLite file instead")
    args = parser.parse_args()
    with bench_database(args.server, "sqlite" if args.sqlite else "postgres"):
        report(args.operations, args.runs)


def report(operations: int, runs: int) -> None:
    from django.db import connection

    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        for measure in (push_costs, fetch_costs):
            clear()
            for name, value in measure(operations).items():
                samples.setdefault(name, []).append(value)
    print(f"{connection.vendor}: median of {runs} runs of {operations} operations, µs per operation")
    for name, values in samples.items():
        print(f"  {name:<45} {statistics.median(values):>8.0f}")


if __name__ == "__main__":
    main()
