"""PUSH: store validated jobs, one or a batch, atomically (ojs-core §7.1)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, NoReturn

from django.db import IntegrityError, connection, transaction

from ..durations import RelativeTime, format_timestamp
from ..envelope import JobSpec
from ..errors import Duplicate, InvalidRequest
from ..states import JobState
from . import events, fastpush, newjob, queue_config, unique
from .clock import db_now

if TYPE_CHECKING:
    from ..models import Job

# Queue names this process has seen committed: a queue row is written once.
_known_queues: set[str] = set()


class PushMixin:
    def push(self, spec: JobSpec) -> Job:
        """Store one job; the returned job carries every system attribute."""
        return self.push_many([spec])[0]

    def push_many(self, specs: Sequence[JobSpec]) -> list[Job]:
        """Store jobs atomically: all of them or none (ojs-core §7.1, batch variant).

        Inside a caller's ``transaction.atomic()`` the jobs commit or roll back
        with the caller's own rows (transactional enqueue).
        """
        # Ids a caller chose may be taken already; those made by ``enqueue`` cannot be.
        ids = [spec.id for spec in specs if spec.id is not None and not spec.id_made_here]
        if len(ids) != len(set(ids)):
            raise Duplicate("the batch contains the same job id twice")
        if events.fast_paths_ok() and fastpush.all_plain(specs):
            return self._push_plain(specs, ids)
        try:
            with transaction.atomic():
                now = db_now()
                defaults = newjob.Defaults.from_settings()
                jobs = [self._new_job(spec, now, defaults) for spec in specs]
                if ids:
                    taken = list(self.filter(id__in=ids).values_list("id", flat=True)[:10])
                    if taken:
                        raise _duplicate(taken)
                # Bounded queues (ojs-queue-config §6.1) and unique jobs
                # (core/unique.py): unconfigured queues and plain jobs pay nothing.
                queue_config.make_room(self, jobs, now)
                if any(spec.unique for spec in specs):
                    jobs = unique.insert(self, jobs, [spec.unique for spec in specs], now)
                else:
                    self.bulk_create(jobs)
                created = [job for job in jobs if not getattr(job, "deduplicated", False)]
                _register_queues({job.queue for job in created})
                events.record(filter(None, (_push_event(job, now) for job in created)))
        except IntegrityError as exc:
            # A concurrent PUSH with the same id won the race to the unique index.
            self._raise_taken(ids, exc)
        return jobs

    def _push_plain(self, specs: Sequence[JobSpec], ids: list) -> list[Job]:
        """Plain jobs (``fastpush.all_plain``) in one statement.

        Outside a transaction that statement is the whole PUSH, atomic on
        its own: no BEGIN, no COMMIT. Inside the caller's transaction, when
        the caller chose an id (``ids``), a savepoint keeps that transaction
        usable if the id is taken. ``enqueue``'s own ids cannot be, so the
        commonest case, a view enqueueing a job in its transaction, is one
        round trip, not three (SAVEPOINT, the statement, RELEASE).
        """
        # No clock read: the statement sets created_at and enqueued_at itself.
        try:
            with transaction.atomic() if ids and connection.in_atomic_block else nullcontext():
                _register_queues({spec.queue for spec in specs})
                return fastpush.insert(self, specs)
        except IntegrityError as exc:
            self._raise_taken(ids, exc)

    def _raise_taken(self, ids: list, exc: IntegrityError) -> NoReturn:
        """The PUSH failed on a unique index: a duplicate id if one of ``ids`` is taken, else ``exc``."""
        taken = list(self.filter(id__in=ids).values_list("id", flat=True)[:10]) if ids else []
        if taken:
            raise _duplicate(taken) from exc
        raise exc

    def _new_job(self, spec: JobSpec, now: dt.datetime, defaults: newjob.Defaults) -> Job:
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
        job = self.model(
            **newjob.spec_columns(spec, defaults, expires_at),
            state=state,
            created_at=now,
            # enqueued_at marks entry into `available` (ojs-core §5.3).
            enqueued_at=now if state == JobState.AVAILABLE else None,
            scheduled_at=scheduled_at,
            run_at=scheduled_at if state == JobState.SCHEDULED else None,
        )
        if spec.unique is not None:
            unique.stamp(job, spec.unique, now)
        return job


def _push_event(job: Job, now: dt.datetime):
    """ojs-events §3: job.enqueued when a job enters ``available``, job.scheduled
    for a future one (its job.enqueued follows when it comes due). A pending job
    gets its job.enqueued when it is activated."""
    if job.state == JobState.SCHEDULED:
        return events.job_event("job.scheduled", job, now, scheduled_at=format_timestamp(job.scheduled_at))
    if job.state == JobState.AVAILABLE:
        return events.job_event("job.enqueued", job, now, priority=job.priority)
    return None


def _resolve(value: dt.datetime | RelativeTime | None, now: dt.datetime) -> dt.datetime | None:
    return value.resolve(now) if isinstance(value, RelativeTime) else value


def _duplicate(taken: list) -> Duplicate:
    first = str(taken[0])
    return Duplicate(
        f"a job with id {first} already exists",
        details={"existing_job_id": first, "existing_job_ids": [str(i) for i in taken]},
    )


def _register_queues(names: set[str]) -> None:
    """Give a queue its row on first use, so listings and pause find it."""
    from ..models import Queue

    new = names - _known_queues
    if not new:
        return
    Queue.objects.bulk_create([Queue(name=name) for name in sorted(new)], ignore_conflicts=True)
    transaction.on_commit(lambda: _known_queues.update(new))
