"""Lifecycle events (ojs-events), written in the transaction of the move they record.

One ``bulk_create`` per transition batch; with ``OJS["EVENTS"] = False`` the
store writes none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from uuid6 import uuid7

from ..conf import ojs_settings


def job_event(kind: str, job: Any, time: dt.datetime, **data: Any) -> Any:
    """An unsaved Event for ``job`` (any object with the Job attributes)."""
    from ..models import Event

    payload = {
        "job_id": str(job.id),
        "job_type": job.type,
        "queue": job.queue,
        "state": job.state,
        "attempt": job.attempt,
    }
    payload.update(data)
    return Event(id=uuid7(), type=kind, time=time, job_id=job.id, queue=job.queue, data=payload)


def worker_event(kind: str, worker: Any, time: dt.datetime, **data: Any) -> Any:
    """An unsaved Event about a worker (ojs-events §3.3)."""
    from ..models import Event

    payload = {"worker_id": worker.id, "queues": worker.queues, "concurrency": worker.concurrency, **data}
    return Event(id=uuid7(), type=kind, time=time, data=payload)


def other_event(kind: str, time: dt.datetime, *, queue: str | None = None, **data: Any) -> Any:
    """An unsaved Event about a queue or a cron schedule."""
    from ..models import Event

    return Event(id=uuid7(), type=kind, time=time, queue=queue, data=data)


def record(events: Iterable[Any]) -> None:
    if not ojs_settings.EVENTS:
        return
    from ..models import Event

    batch = list(events)
    if batch:
        Event.objects.bulk_create(batch)
