"""Lifecycle events (ojs-events), written in the transaction of the move they record.

One ``bulk_create`` per transition batch; with ``OJS["EVENTS"] = False`` the
store writes none. The PostgreSQL engine writes the events of its own
statements inside them (``core/pg/events.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from django.db import connections
from django.db.models import Q
from uuid6 import uuid7

from ..conf import ojs_settings
from ..models import Event
from ..observe import signals
from . import engine


def job_event(kind: str, job: Any, time: dt.datetime, **data: Any) -> Event:
    """An unsaved Event for ``job`` (any object with the Job attributes); ``data``: what it adds to the payload."""
    return Event(
        type=kind, time=time, job_id=job.id, queue=job.queue, job_type=job.type, state=job.state,
        attempt=job.attempt, extra=data or None,
    )


def worker_event(kind: str, worker: Any, time: dt.datetime, **data: Any) -> Event:
    """An unsaved Event about a worker (ojs-events §3.3)."""
    payload = {"worker_id": worker.id, "queues": worker.queues, "concurrency": worker.concurrency, **data}
    return Event(type=kind, time=time, extra=payload)


def other_event(kind: str, time: dt.datetime, *, queue: str | None = None, **data: Any) -> Event:
    """An unsaved Event about a queue or a cron schedule."""
    return Event(type=kind, time=time, queue=queue, extra=data)


def record(events: Iterable[Any]) -> None:
    """Write these events; hand them to the signal receivers and counters once committed."""
    listening = signals.observed()
    if not ojs_settings.EVENTS and not listening:
        return
    batch = list(events)
    stored = bool(batch) and ojs_settings.EVENTS
    if not stored or not connections[Event.objects.db].features.can_return_rows_from_bulk_insert:
        # No seq to make the id from (Event.id): a receiver still needs one.
        for event in batch:
            event.stored_id = event.stored_id or uuid7()
    if stored:
        Event.objects.bulk_create(batch)
    if listening:
        signals.after_commit(batch)


def events_of_job_types(job_types: list[str]) -> Q:
    """The condition on events of jobs of these types, written before migration 0033 (payload in ``extra``) or after."""
    return Q(job_type__in=job_types) | Q(job_type__isnull=True, extra__job_type__in=job_types)


# A job's progress reports: one a second from a chatty handler, so its story is told without them.
PROGRESS = "job.progress"


def job_story(job_id: Any, limit: int) -> tuple[list[Event], bool]:
    """A job's latest ``limit`` lifecycle events, oldest first, and whether older ones were left out.

    Progress reports are not among them (``progress_reports`` sums them up):
    they would push the claims, failures and recoveries out of any latest-N.
    Read newest first on the (job_id, seq) index, as the admin and the admin API show it.
    """
    rows = list(Event.objects.filter(job_id=job_id).exclude(type=PROGRESS).order_by("-seq")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    rows.reverse()
    return rows, more


def progress_reports(job_id: Any, bound: int) -> tuple[int, Event | None]:
    """How many progress reports a job has (counted up to ``bound + 1``), and its latest."""
    reports = Event.objects.filter(job_id=job_id, type=PROGRESS)
    count = reports.values("seq")[: bound + 1].count()
    return count, reports.order_by("-seq").first() if count else None


def forget_jobs(job_ids: Iterable[Any]) -> int:
    """Delete the events of these jobs (their ``id``), as the jobs themselves are deleted.

    A job's events are its story: they go with it, in the transaction that
    deletes it, never before it (``OJS["EVENTS_KEPT_WITH_JOB"]``).
    """
    ids = list(job_ids)
    if not ids:
        return 0
    return Event.objects.filter(job_id__in=ids)._raw_delete(Event.objects.db)


def record_for_jobs(
    kind: str,
    seqs: list[int],
    time: dt.datetime,
    fallback: Callable[[], Iterable[Any]],
    *,
    data: dict[str, Any] | None = None,
    with_duration: bool = False,
    live: bool = False,
) -> None:
    """Record one ``kind`` event per job, read from the jobs' rows as they are now.

    The payload is ``job_event``'s (job_id, job_type, queue, state, attempt,
    plus ``data``, plus ``duration_ms`` since ``started_at``). The engine
    may build them in one statement (``Engine.record_job_events``);
    otherwise ``fallback()`` builds them in Python. ``live``: the jobs are in
    a live state now (claimed, promoted), so the rows are read from the live
    partition alone (``partitions.live_jobs``).
    """
    if not seqs:
        return
    if not ojs_settings.EVENTS and not signals.observed():
        return
    if not engine.current().record_job_events(kind, seqs, time, data or {}, with_duration=with_duration, live=live):
        record(fallback())
