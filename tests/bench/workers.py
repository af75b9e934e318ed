"""Section ``worker``: ``manage.py ojs_worker`` end to end, every job verified run exactly once.

Each run starts from ``--jobs`` noop jobs already available, starts 1 or 2
real worker processes at concurrency 10 or 50, waits until nothing is
available or active, and stops them with SIGTERM (each must exit 0).
jobs/s is read from the store: the first claim (``started_at``) to the last
completion (``completed_at``), both stamped by PostgreSQL, so start-up does
not count. Exactly once: every job completed on attempt 1 with one
``job.started`` and one ``job.completed`` event.

Floor: the raw-SQL queue of floor.py, 2 processes claiming 10 per statement.
Peer: pgqueuer, 5 consumer processes, batch 10. Both are read from their
own tables' timestamps and checked for exactly once the same way.
"""

from __future__ import annotations

from . import floor, peer, store
from .plan import Run
from .report import Figure, Target, median, median_or_none
from .stage import BenchError, Process, started, wait_for

SHAPES = ((1, 10), (2, 10), (1, 50), (2, 50))
FLOOR_PROCESSES = 2
PEER_CONSUMERS, PEER_BATCH = 5, 10


def _deadline(jobs: int) -> float:
    """Seconds a run may take: far beyond any plausible figure, so a stuck run fails instead of hanging."""
    return 120 + jobs / 50


def ours(context: Run, processes: int, concurrency: int) -> float:
    jobs = context.sizes.jobs
    store.reset()
    store.fill(jobs)
    workers = [Process.manage(context.stage, "ojs_worker", "--concurrency", str(concurrency))
               for _ in range(processes)]
    with started(workers):
        wait_for(lambda: not store.busy(), _deadline(jobs), f"{jobs:,} jobs to be worked", workers, interval=0.2)
        for worker in workers:
            if (status := worker.stop()) != 0:
                raise BenchError(f"ojs_worker exited {status} after SIGTERM:\n{worker.output()[-2000:]}")
    store.verify_exactly_once(jobs)
    return store.throughput()[0]


def raw(context: Run) -> float:
    jobs = context.sizes.jobs
    floor.install(context.dsn)
    floor.fill(context.dsn, jobs)
    _run_until_exit([Process.module(context.stage, "tests.bench.floor", "work", context.dsn)
                     for _ in range(FLOOR_PROCESSES)], jobs)
    return floor.measure(context.dsn, jobs)


def theirs(context: Run) -> float:
    jobs = context.sizes.jobs
    peer.reset(context.dsn)
    peer.enqueue_bulk(context.dsn, jobs)
    _run_until_exit([Process.module(context.stage, "tests.bench.peer", "consume", context.dsn,
                                    "--batch", str(PEER_BATCH)) for _ in range(PEER_CONSUMERS)], jobs)
    return peer.measure(context.dsn, jobs)


def _run_until_exit(processes: list[Process], jobs: int) -> None:
    """They stop by themselves once the queue is empty; each must exit 0."""
    with started(processes):
        for process in processes:
            if (status := process.wait(_deadline(jobs))) != 0:
                raise BenchError(f"{' '.join(process.argv[-4:])} exited {status}:\n{process.output()[-2000:]}")


def run(context: Run) -> list[Figure]:
    rates: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
    floors: list[float] = []
    peers: list[float] = []
    for _ in range(context.sizes.repeat):
        for shape in SHAPES:
            rates[shape].append(ours(context, *shape))
        floors.append(raw(context))
        if context.peer:
            peers.append(theirs(context))
    figures = []
    for processes, concurrency in SHAPES:
        samples = rates[(processes, concurrency)]
        targets = (Target("peer", ">=", 1.0), Target("floor", ">=", 0.6)) if (processes, concurrency) == (2, 10) else ()
        figures.append(Figure(
            f"worker.{processes}x{concurrency}", f"ojs_worker {processes} × concurrency {concurrency}", "jobs/s",
            median(samples), floor=median(floors),
            floor_name=f"raw SQL: {FLOOR_PROCESSES} processes, claim 10 per UPDATE … SKIP LOCKED",
            peer=median_or_none(peers), peer_note=context.peer_note, targets=targets, samples=samples,
            floor_samples=floors, peer_samples=peers,
            detail={"jobs": context.sizes.jobs, "peer": f"pgqueuer {PEER_CONSUMERS} consumers × batch {PEER_BATCH}"},
        ))
    return figures
