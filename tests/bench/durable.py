"""The cost of durable jobs, in-process on PostgreSQL: a checkpoint, a step record, beside a plain progress report.

    python -m tests.bench.durable [--calls 500] [--rounds 5] [--server postgres://postgres@127.0.0.1:5432/postgres]

On a database of its own (``ojs_bench_*``, dropped after), one job is
claimed as a worker claims it, and a handler's context calls, per round:
``ctx.progress`` written at once (the baseline: a progress report), ``ctx.checkpoint``
(a report carrying a 100-byte checkpoint) and ``ctx.run_step`` with a new name
each call (a step record and its event). Prints, per call, the SQL statements
Django sends (``CaptureQueriesContext``, BEGIN and COMMIT included) and
the median over rounds of the wall time in µs: what a handler waits per call.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

from .stage import DEFAULT_SERVER, bench_database

CHECKPOINT = {"last_file_index": 72, "path": "/data/chunk_072.parquet", "bytes_done": 7_340_032, "phase": "load"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--server", default=DEFAULT_SERVER)
    options = parser.parse_args()
    with bench_database(options.server):
        for line in measure(options.calls, options.rounds):
            print(line)


def measure(calls: int, rounds: int) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import django_ojs
    from django_ojs.handlers.context import JobContext
    from django_ojs.models import Job

    django_ojs.enqueue("bench.durable", [], queue="bench-durable", visibility_timeout="PT1H")
    [job] = Job.objects.fetch(["bench-durable"], worker_id="bench")
    ctx = JobContext(job, "bench", beat=lambda: None)
    names = (f"step:{n}" for n in itertools.count())
    fraction = itertools.count()

    def report() -> None:
        ctx.progress(next(fraction) % 100 / 100)
        ctx.flush_progress()

    modes: dict[str, Callable[[], object]] = {
        "progress report (baseline)": report,
        "checkpoint": lambda: ctx.checkpoint(CHECKPOINT),
        "step record": lambda: ctx.run_step(next(names), lambda: {"charge_id": "ch_3Nf9"}),
    }
    statements: dict[str, float] = {}
    for mode, call in modes.items():
        with CaptureQueriesContext(connection) as captured:
            for _ in range(20):
                call()
        statements[mode] = len(captured.captured_queries) / 20
    timings: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode, call in modes.items():  # alternated, round by round
            began = time.perf_counter()
            for _ in range(calls):
                call()
            timings[mode].append((time.perf_counter() - began) / calls * 1e6)
    lines = [f"{'per call':<28} {'SQL statements':>15} {'µs (median)':>12}"]
    for mode in modes:
        lines.append(f"{mode:<28} {statements[mode]:>15.0f} {statistics.median(timings[mode]):>12.0f}")
    return lines


if __name__ == "__main__":
    main()
