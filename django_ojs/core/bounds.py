"""Bounded queues at PUSH: refuse, or drop the oldest waiting jobs (ojs-queue-config §6.1, backpressure).

Only a queue with ``max_size`` takes the queue row's lock; the per-process
settings cache (``core/queue_settings.py``) says which do, so an unbounded
queue pays nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from ..models import Job, JobError, Queue
from ..protocol.durations import format_timestamp
from ..protocol.errors import QueueFull
from ..protocol.failure import Failure
from ..protocol.states import TERMINAL, JobState, Move, target
from . import events, partitions
from .queue_settings import settings_of
from .row_updates import update_rows
from .workflows import advance


def make_room(jobs: Iterable[Job], now: dt.datetime) -> None:
    """Enforce ``max_size`` for the queues these new jobs go to, before they are stored.

    The queue row is locked (``FOR UPDATE``) while counting, so concurrent
    PUSHes to one bounded queue are counted one after the other; unbounded
    queues take no lock. ``reject`` refuses the whole PUSH with 429
    ``queue_full``; ``drop_oldest`` discards the oldest waiting jobs.
    """
    incoming: dict[str, int] = {}
    for job in jobs:
        incoming[job.queue] = incoming.get(job.queue, 0) + 1
    for name in sorted(incoming):
        if settings_of(name).max_size is None:
            continue
        queue = Queue.objects.select_for_update().filter(name=name).first()
        if queue is None or queue.max_size is None:
            continue
        live = Job.objects.filter(queue=name).exclude(state__in=sorted(TERMINAL)).count()
        excess = live + incoming[name] - queue.max_size
        if excess <= 0:
            continue
        if queue.overflow_policy == "drop_oldest" and incoming[name] <= queue.max_size:
            _drop_oldest(name, excess, now)
            continue
        raise QueueFull(
            f"queue {name!r} holds {live} of at most {queue.max_size} jobs; "
            f"{incoming[name]} more do not fit",
            details={"queue": name, "max_size": queue.max_size, "size": live},
        )


def _drop_oldest(name: str, count: int, now: dt.datetime) -> None:
    """Discard the ``count`` oldest jobs that have not started (ojs-queue-config §6.1)."""
    waiting = [JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE, JobState.PENDING]
    victims = list(
        Job.objects.select_for_update(skip_locked=True).filter(queue=name, state__in=waiting).order_by("seq")[:count]
    )
    if len(victims) < count:
        raise QueueFull(
            f"queue {name!r} is full and too few of its jobs are waiting to make room",
            details={"queue": name},
        )
    failure = Failure(type="overflow", message=f"dropped to make room in bounded queue {name!r}", retryable=False)
    stamp = format_timestamp(now)
    for job in victims:
        job.state = target(Move.DISCARD)
        job.finished_at = now
        job.run_at = None
        job.error = failure.as_dict(job.attempt, stamp)
    update_rows(partitions.live_jobs(), victims, ["state", "finished_at", "run_at", "error"])
    JobError.objects.bulk_create(
        JobError(job_id=job.seq, attempt=job.attempt, type=failure.type, message=failure.message,
                 retryable=False, occurred_at=now)
        for job in victims
    )
    events.record(events.job_event("job.discarded", job, now, reason="overflow") for job in victims)
    # A dropped workflow step fails its step. When this PUSH is itself a
    # workflow's next step, that workflow's row is already held: docs/how-to/workflows.md
    # notes the one lock-order exception this makes.
    advance({job.seq: job.state for job in victims})
