"""PUSH: store validated jobs, one or a batch, atomically (ojs-core §7.1)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import NoReturn

from django.db import IntegrityError, transaction

from ..models import Event, Job
from ..protocol.durations import RelativeTime, format_timestamp
from ..protocol.envelope import JobSpec
from ..protocol.errors import Duplicate, InvalidRequest
from ..protocol.states import JobState
from . import bounds, engine, events, job_columns, unique
from .clock import db_now
from .queue_settings import register_queues
from .row_movement import retried_on_row_movement
from .unique_keys import stamp


def push(spec: JobSpec) -> Job:
    """Store one job; the returned job carries every system attribute."""
    return push_many([spec])[0]


@retried_on_row_movement
def push_many(specs: Sequence[JobSpec]) -> list[Job]:
    """Store jobs atomically: all of them or none (ojs-core §7.1, batch variant).

    Inside a caller's ``transaction.atomic()`` the jobs commit or roll back
    with the caller's own rows (transactional enqueue). Plain jobs go in one
    statement where the engine can (``Engine.push_plain``); the rest in steps.
    """
    # Ids a caller chose may be taken already; those made by ``enqueue`` cannot be.
    ids = [spec.id for spec in specs if spec.id is not None and not spec.id_made_here]
    if len(ids) != len(set(ids)):
        raise Duplicate("the batch contains the same job id twice")
    try:
        stored = engine.current().push_plain(specs, ids)
        if stored is not None:
            return stored
        with transaction.atomic():
            now = db_now()
            defaults = job_columns.Defaults.from_settings()
            jobs = [new_job(spec, now, defaults) for spec in specs]
            if ids:
                taken = list(Job.objects.filter(id__in=ids).values_list("id", flat=True)[:10])
                if taken:
                    raise _duplicate(taken)
            # Bounded queues (ojs-queue-config §6.1) and unique jobs
            # (core/unique.py): unconfigured queues and plain jobs pay nothing.
            bounds.make_room(jobs, now)
            if any(spec.unique for spec in specs):
                jobs = unique.insert(jobs, [spec.unique for spec in specs], now)
            else:
                Job.objects.bulk_create(jobs)
            created = [job for job in jobs if not job.deduplicated]
            register_queues({job.queue for job in created})
            events.record(filter(None, (push_event(job, now) for job in created)))
    except IntegrityError as exc:
        # A concurrent PUSH with the same id won the race to the unique index.
        _raise_taken(ids, exc)
    return jobs


def new_job(spec: JobSpec, now: dt.datetime, defaults: job_columns.Defaults) -> Job:
    """The unsaved job, as of the database clock's ``now``."""
    scheduled_at = _resolve(spec.scheduled_at, now)
    expires_at = _resolve(spec.expires_at, now)
    if spec.pending and scheduled_at is not None and scheduled_at > now:
        raise InvalidRequest(
            "a job is either pending (staged for activation) or scheduled, not both",
            field="options.pending",
        )
    if spec.pending:
        state = JobState.PENDING
    elif scheduled_at is not None and scheduled_at > now:
        state = JobState.SCHEDULED
    else:
        state = JobState.AVAILABLE
    job = Job(
        **job_columns.spec_columns(spec, defaults, expires_at),
        state=state,
        created_at=now,
        # enqueued_at marks entry into `available` (ojs-core §5.3).
        enqueued_at=now if state == JobState.AVAILABLE else None,
        scheduled_at=scheduled_at,
        run_at=scheduled_at if state == JobState.SCHEDULED else None,
    )
    if spec.unique is not None:
        stamp(job, spec.unique, now)
    return job


def push_event(job: Job, now: dt.datetime) -> Event | None:
    """ojs-events §3: job.enqueued when a job enters ``available``, job.scheduled
    for a future one (its job.enqueued follows when it comes due). A pending job
    gets its job.enqueued when it is activated."""
    if job.state == JobState.SCHEDULED:
        return events.job_event("job.scheduled", job, now, scheduled_at=format_timestamp(job.scheduled_at))
    if job.state == JobState.AVAILABLE:
        return events.job_event("job.enqueued", job, now, priority=job.priority)
    return None


def _raise_taken(ids: list, exc: IntegrityError) -> NoReturn:
    """The PUSH failed on a unique index: a duplicate id if one of ``ids`` is taken, else ``exc``."""
    taken = list(Job.objects.filter(id__in=ids).values_list("id", flat=True)[:10]) if ids else []
    if taken:
        raise _duplicate(taken) from exc
    raise exc


def _resolve(value: dt.datetime | RelativeTime | None, now: dt.datetime) -> dt.datetime | None:
    return value.resolve(now) if isinstance(value, RelativeTime) else value


def _duplicate(taken: list) -> Duplicate:
    first = str(taken[0])
    return Duplicate(
        f"a job with id {first} already exists",
        details={"existing_job_id": first, "existing_job_ids": [str(i) for i in taken]},
    )
