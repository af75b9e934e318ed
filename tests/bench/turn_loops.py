"""The worker's turn without the worker: what the store allows, and what the runtime adds to it.

    python -m tests.bench.turn_loops [--processes 1,2] [--jobs 20000] [--rounds 3]

K processes each loop on the turn ``ojs_worker`` runs (``settle_and_fetch``:
complete the last 10, claim the next 10, one statement) with no handler, no
thread, no heartbeat: the ceiling of a worker of concurrency 10 on this
machine. Beside jobs/s, each process's PostgreSQL backend CPU per turn
(``/proc``: the statement and its commit, whatever the load), its wall time
per turn, and what the backends waited on, sampled from ``pg_stat_activity``
during the run (``CPU`` is not waiting; ``Client/ClientRead`` waiting for the
Python side; ``IO/WALSync`` the commit's flush; ``Lock/transactionid`` a row
another turn holds). Compare with ``python -m tests.bench.suite --only worker``
in the same minutes: the gap is the runtime's (docs/explanation/performance.md).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import statistics
import threading
import time

from .stage import DEFAULT_SERVER, bench_database

BATCH = 10


def _backend_cpu(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loop(name: str, start: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue) -> None:
    """One process: claim, then complete and claim until the queue is empty."""
    from django.db import connection

    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Job, Worker

    from . import store

    connection.close()  # forked: a connection of its own
    Worker.objects.register(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    start.wait()
    began, cpu, turns = time.perf_counter(), _backend_cpu(backend), 0
    held = Job.objects.fetch([store.QUEUE], count=BATCH, worker_id=name)
    while held:
        finished = [Settlement(job.id, Lease(name, job.attempt)) for job in held]
        _, held = Job.objects.settle_and_fetch(name, finished, [store.QUEUE], BATCH)
        turns += 1
    results.put((turns, _backend_cpu(backend) - cpu, time.perf_counter() - began))


def sample_waits(dsn: str, stop: threading.Event, seen: collections.Counter) -> None:
    """Count what the database's client backends are doing, every 2 ms until ``stop``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            for kind, event in conn.execute(
                "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'"
            ):
                seen["CPU" if kind is None else f"{kind}/{event}"] += 1
            stop.wait(0.002)


def run(dsn: str, processes: int, jobs: int) -> tuple[float, float, float, collections.Counter]:
    """(jobs/s, backend CPU ms per turn, wall ms per turn per process, wait samples) of one run."""
    from django.db import connection

    from django_ojs.models import Job

    from . import store

    store.reset()
    store.fill(jobs)
    connection.close()
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(processes + 1), context.Queue()
    workers = [context.Process(target=loop, args=(f"turns-{n}", start, results)) for n in range(processes)]
    for worker in workers:
        worker.start()
    seen: collections.Counter = collections.Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=sample_waits, args=(dsn, stop, seen))
    start.wait()
    sampler.start()
    began = time.perf_counter()
    done = [results.get(timeout=600) for _ in workers]
    elapsed = time.perf_counter() - began
    stop.set()
    sampler.join()
    for worker in workers:
        worker.join()
    completed = Job.objects.filter(state="completed", attempt=1).count()
    if completed != jobs:
        raise SystemExit(f"{completed} of {jobs} jobs completed once")
    turns = sum(turn for turn, _, _ in done)
    return (jobs / elapsed, sum(cpu for _, cpu, _ in done) / turns * 1e3,
            sum(wall for _, _, wall in done) / turns * 1e3, seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="1,2", help="comma-separated process counts, alternated")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shapes = [int(n) for n in args.processes.split(",")]
    with bench_database(os.environ.get("DATABASE_URL", DEFAULT_SERVER)) as stage:
        figures: dict[int, list[tuple[float, float, float]]] = {shape: [] for shape in shapes}
        waits: dict[int, collections.Counter] = {shape: collections.Counter() for shape in shapes}
        for round_ in range(args.rounds):
            for shape in shapes if round_ % 2 == 0 else list(reversed(shapes)):
                rate, cpu, wall, seen = run(stage.dsn, shape, args.jobs)
                figures[shape].append((rate, cpu, wall))
                waits[shape].update(seen)
        print(f"turn loops, {args.jobs:,} no-op jobs, {args.rounds} rounds, medians "
              f"(load {os.getloadavg()[0]:.1f} at the end)")
        for shape in shapes:
            rate, cpu, wall = (statistics.median(values) for values in zip(*figures[shape]))
            total = sum(waits[shape].values()) or 1
            profile = ", ".join(f"{name} {count / total:.0%}" for name, count in waits[shape].most_common(5)) or (
                "none sampled (too short a run)")
            print(f"  {shape} × turn loop: {rate:,.0f} jobs/s; backend CPU {cpu:.2f} ms/turn; "
                  f"wall {wall:.2f} ms/turn per process; backends: {profile}")


if __name__ == "__main__":
    main()
