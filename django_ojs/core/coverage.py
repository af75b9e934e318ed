"""Which waiting jobs the running workers can run: the jobs no worker can, and the queues nobody reads.

An in-process worker claims only the job types it has handlers for
(``core/claim.py``) and registers them (``Worker.handles``). So a job of a
type no live worker of its queue handles waits, ``available``, until one
that can comes: a rolling deploy's new type waits for the new workers, a
typo waits for ever. ``unrunnable`` names such jobs -- per queue and type,
how many and since when -- for the overview, ``manage.py ojs queues``, the
metrics, the ``django_ojs.W006`` check and the worker's start.

Who counts as a consumer of a queue: a worker that reads it and is alive
and not shutting down -- running or quiet (``workers.shown_state``: a quiet
worker resumes when told). A consumer that declares no types (an HTTP
worker, which chooses by queue only) may run any type. A queue with no
consumer at all is another fact (``unconsumed``): its jobs wait for any
worker, not for a handler, and are not counted as unrunnable.

Bounded: nothing is read when every consumer handles every type there is
(a loose scan of ``ojs_job_type`` names them); otherwise one statement reads
the unhandled types' jobs since the oldest available one, on queues with
consumers, under the counting module's statement timeout (``TIME_BUDGET``);
an answer that could not be had in time is empty and says so (``complete``
false), never waited for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import DatabaseError, connection
from django.db.models import Count, F, Min

from ..models import Job, Queue, Worker
from ..protocol.states import JobState
from . import partitions
from .clock import db_now
from .counting import Tally, time_boxed
from .stats import job_types, queues_with_available
from .workers import QUIET, RUNNING, shown_state

# The most (queue, type) pairs one answer names: a page, a log line, a metric's labels.
MAX_PAIRS = 100
# How long the unhandled types' backlog may take to group (an overview page, a scrape): past it
# the answer says it is incomplete rather than keep anyone waiting.
TIME_BUDGET = 0.25
# The most distinct job types looked at; past it the answer says it is incomplete.
MAX_TYPES = 1_000


@dataclass(frozen=True)
class Unrunnable:
    """``count`` jobs of ``type`` wait on ``queue`` that no consumer of it can run, the oldest since ``oldest_at``."""

    queue: str
    type: str
    count: int
    oldest_at: dt.datetime

    def as_dict(self) -> dict[str, object]:
        return {"queue": self.queue, "type": self.type, "count": self.count, "oldest_at": self.oldest_at}


@dataclass(frozen=True)
class Unconsumed:
    """Jobs wait on ``queue`` and no live worker reads it."""

    queue: str
    waiting: Tally


def consumers(now: dt.datetime | None = None) -> dict[str, set[str] | None]:
    """Queue -> the job types its live consumers handle, None when one of them takes any type."""
    now = now or db_now()
    found: dict[str, set[str] | None] = {}
    for worker in Worker.objects.filter(declared_dead_at__isnull=True).only(
        "queues", "handles", "state", "last_heartbeat_at", "declared_dead_at"
    ):
        if shown_state(worker, now) not in (RUNNING, QUIET):
            continue
        for queue in worker.queues or []:
            if worker.handles is None or found.get(queue, set()) is None:
                found[queue] = None
            else:
                found.setdefault(queue, set()).update(worker.handles)  # type: ignore[union-attr]
    return found


def unrunnable(now: dt.datetime | None = None) -> tuple[list[Unrunnable], bool]:
    """The waiting jobs no live consumer of their queue can run, grouped by queue and type, oldest
    first; and whether the answer is complete (False: a queue's backlog took too long to group)."""
    return uncovered({queue: types for queue, types in consumers(now).items() if types is not None})


def uncovered(handled: Mapping[str, Iterable[str]]) -> tuple[list[Unrunnable], bool]:
    """The available jobs of each queue in ``handled`` whose type is not among its types: per queue
    and type, how many and the oldest; and whether the answer is complete.

    One statement, and only when some type is not handled: the types that exist are read by a loose
    scan of ``ojs_job_type`` (one probe per type), so the queues whose consumers handle every type
    cost nothing more. The unhandled types' available jobs are then read from the same index from
    the oldest available job's ``seq`` on -- the jobs of those types since the backlog began, not
    every available job's row nor the types' history.
    """
    consumed = {queue: set(types) for queue, types in handled.items()}
    if not consumed:
        return [], True
    try:
        with time_boxed(Job.objects.db, seconds=TIME_BUDGET):
            types = job_types(MAX_TYPES + 1)
            missing = {queue: set(types) - types_of for queue, types_of in consumed.items()}
            candidates = set().union(*missing.values())
            if not candidates:
                return [], len(types) <= MAX_TYPES
            available = Job.objects.filter(state=JobState.AVAILABLE)
            # The oldest available job. On the partitioned table the state keeps the read to the live
            # partition, whose primary key is walked from its oldest job (0.2 ms at 180,000 waiting; as
            # seq + 0, every available job's entry: 50 to 100 ms). On one plain table that walk would
            # cross the whole history first: there seq + 0 reads ojs_job_available instead.
            oldest = F("seq") if partitions.is_partitioned(connection) else F("seq") + 0
            first = available.aggregate(first=Min(oldest))["first"]
            grouped = [] if first is None else list(
                available.filter(type__in=sorted(candidates), seq__gte=first, queue__in=sorted(consumed))
                .values_list("queue", "type")
                .annotate(n=Count("seq"), oldest=Min("enqueued_at"))
                .order_by()
            )
    except DatabaseError:
        return [], False
    found = [Unrunnable(queue, job_type, n, oldest) for queue, job_type, n, oldest in grouped
             if job_type in missing[queue]]
    found.sort(key=lambda item: (item.oldest_at, item.queue, item.type))
    return found[:MAX_PAIRS], len(types) <= MAX_TYPES


def unread(now: dt.datetime | None = None, waiting: Iterable[str] | None = None) -> list[str]:
    """The queues not paused with available jobs and no live consumer (none reads them, or all are
    dead or draining), by name. ``waiting``: the queues with available jobs, when the caller has
    counted them; else found by a loose scan of ``ojs_job_available``, one probe per queue. (Asked
    per queue row, "has it an available job" was planned as a grouping of every available job: 0.1 s
    at 180,000 waiting.)"""
    read = set(consumers(now))
    names = queues_with_available() if waiting is None else list(waiting)
    return [
        name for name in Queue.objects.filter(name__in=names, paused=False).order_by("name").values_list("name", flat=True)
        if name not in read
    ]


def unconsumed(available: Mapping[str, Tally], now: dt.datetime | None = None, limit: int = 20) -> list[Unconsumed]:
    """``unread``'s first ``limit`` queues, each with its waiting jobs as ``available`` (queue -> its
    available jobs: ``stats.available_by_queue``) counts them -- the figure the jobs per state and the
    Queues page show, read by no statement of its own."""
    waiting = [name for name, tally in available.items() if tally.value]
    return [Unconsumed(name, available[name]) for name in unread(now, waiting)[:limit]]


def describe(items: Iterable[Unrunnable], now: dt.datetime) -> list[str]:
    """One line per item, as the check, the worker's log and the CLI's text say it."""
    return [
        f"{item.count:,} job(s) of type {item.type!r} on queue {item.queue!r} that no running worker can handle, "
        f"the oldest waiting since {item.oldest_at:%Y-%m-%d %H:%M:%S} UTC "
        f"({int((now - item.oldest_at).total_seconds())} s)"
        for item in items
    ]
