"""What the reaper's recovery of a dead worker's jobs costs, by how many it held.

    python -m tests.bench.recovery [--sizes 50,500] [--rounds 3] [--sqlite]

On a fresh bench database, for each size N (at most ``REAPER_BATCH_SIZE``,
500 by default, what one pass moves): N jobs are enqueued and claimed by one
worker id, then ``core.workers.recover_jobs`` requeues them in one
transaction, as the reaper does for a worker declared dead -- their failure
recorded, their events written, the rows locked until the commit. The report
is each size's median time of that transaction over ``--rounds`` rounds, the
sizes alternated round by round.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

from .stage import DEFAULT_SERVER, bench_database

QUEUE = "bench-recovery"


def recover(size: int) -> float:
    """Seconds to requeue ``size`` jobs held by a worker declared dead."""
    from django.db import transaction
    from django.utils import timezone

    import django_ojs
    from django_ojs.core import workers
    from django_ojs.models import Job

    django_ojs.enqueue_many([{"type": "bench.recovered", "args": [n], "queue": QUEUE} for n in range(size)])
    claimed = 0
    while claimed < size:
        claimed += len(Job.objects.fetch([QUEUE], count=size - claimed, worker_id="bench-dead-worker"))
    started = time.perf_counter()
    with transaction.atomic():
        recovered = workers.recover_jobs(["bench-dead-worker"], timezone.now(), "declared dead (bench)")
    took = time.perf_counter() - started
    if recovered != size:
        raise SystemExit(f"recovered {recovered} of {size} jobs")
    Job.objects.filter(queue=QUEUE).delete()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true", help="a temporary SQLite file, not PostgreSQL")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    server = os.environ.get("DATABASE_URL", DEFAULT_SERVER)
    with bench_database(server, "sqlite" if args.sqlite else "postgres"):
        logging.disable(logging.INFO)  # a line per requeued job is not what is measured
        recover(min(sizes))  # warm: the first statements of a process plan and connect
        times: dict[int, list[float]] = {size: [] for size in sizes}
        for _ in range(args.rounds):
            for size in sizes:
                times[size].append(recover(size))
        for size in sizes:
            print(f"recover {size:5} jobs: median {statistics.median(times[size]) * 1e3:7.1f} ms "
                  f"({', '.join(f'{t * 1e3:.0f}' for t in times[size])})", flush=True)


if __name__ == "__main__":
    main()
