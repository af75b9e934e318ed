"""Where a bulk enqueue's time goes: ``python -m tests.bench.profile_bulk [--batches N]``.

Runs ``enqueue_many`` of 1,000 noop jobs N times on a fresh bench database and
prints the wall time per batch split into the statement (PostgreSQL and the
round trip, from the cursor's execute) and the Python around it, and a
cProfile of the rest.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

from .stage import DEFAULT_SERVER, bench_database


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)):
        from django.db import connection

        import django_ojs

        from . import store

        executed = [0.0]

        def timed(execute, sql, params, many, context):
            began = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                executed[0] += time.perf_counter() - began

        def batch():
            django_ojs.enqueue_many([{"type": store.NOOP, "args": []} for _ in range(1000)])

        for _ in range(3):
            batch()  # warm
        store.reset()
        executed[0] = 0.0
        with connection.execute_wrapper(timed):
            began = time.perf_counter()
            for _ in range(args.batches):
                batch()
            wall = time.perf_counter() - began
        print(f"per batch of 1000: {wall / args.batches * 1000:.1f} ms wall, "
              f"{executed[0] / args.batches * 1000:.1f} ms in execute, {1000 * args.batches / wall:,.0f} jobs/s")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.batches):
                batch()
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    main()
