"""Section ``pickup``: how soon an idle worker starts a job that arrives alone.

One idle ``ojs_worker`` (LISTENing on PostgreSQL); jobs are enqueued one at
a time, each after the previous one completed and a short pause, and the
latency is the job's ``started_at - enqueued_at``, both stamped by the
database. Peer: an idle pgqueuer consumer, read from its log the same way.
"""

from __future__ import annotations

import time

import django_ojs
from django_ojs.models import Job, Worker

from . import peer, store
from .plan import Run
from .report import Figure, Target, percentile
from .stage import BenchError, Process, started, wait_for

WARM_UP = 3
PAUSE = 0.05  # lets the worker go back to waiting after each job
TIMEOUT = 30
POLL = 0.005  # how often the suite looks for the job; the latency itself is read from the store


def ours(context: Run, samples: int) -> list[float]:
    store.reset()
    worker = Process.manage(context.stage, "ojs_worker", "--concurrency", "10")
    with started([worker]):
        wait_for(lambda: Worker.objects.filter(state="running").exists(), TIMEOUT, "the worker to register",
                 [worker])
        latencies = []
        for number in range(WARM_UP + samples):
            time.sleep(PAUSE)
            job = django_ojs.enqueue(store.NOOP, [])
            completed = Job.objects.filter(pk=job.pk, state="completed").values_list("started_at", "enqueued_at")
            done = wait_for(completed.first, TIMEOUT, f"job {job.id} to be worked", [worker], interval=POLL)
            if number >= WARM_UP:
                latencies.append((done[0] - done[1]).total_seconds() * 1000)
        if worker.stop() != 0:
            raise BenchError(f"ojs_worker did not stop cleanly:\n{worker.output()[-2000:]}")
    return latencies


def theirs(context: Run, samples: int) -> list[float]:
    peer.reset(context.dsn)
    consumer = Process.module(context.stage, "tests.bench.peer", "consume", context.dsn, "--continuous")
    with started([consumer]):
        latencies = peer.pickup_latencies(context.dsn, WARM_UP + samples, TIMEOUT)[WARM_UP:]
        consumer.stop()
    return latencies


def run(context: Run) -> list[Figure]:
    samples = context.sizes.pickup_samples
    measured = ours(context, samples)
    theirs_measured = theirs(context, samples) if context.peer else []
    return [
        Figure(
            f"pickup.p{pct}", f"idle pickup p{pct} (enqueue → started)", "ms", percentile(measured, pct),
            peer=percentile(theirs_measured, pct) if theirs_measured else None, peer_note=context.peer_note,
            targets=(Target("absolute", "<=", 20),) if pct == 50 else (), detail={"samples": samples},
        )
        for pct in (50, 99)
    ]
