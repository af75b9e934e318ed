"""What ``manage.py ojs`` shows: jobs by filter, one job, queues, workers, as plain dicts.

Read-only; every change goes through the core (``core.bulk``, ``Queue.objects``).
Listings are bounded (``--limit``) and newest first, straight from the primary key.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.fields.json import KT

from ..core.search import job_search
from ..models import Job, Queue, Worker
from ..protocol.durations import format_timestamp
from ..protocol.envelope import render_job
from ..protocol.errors import InvalidRequest, NotFound
from ..protocol.states import TERMINAL, JobState


@dataclass(frozen=True)
class JobFilter:
    """The filters the CLI takes; each list is OR within, AND across."""

    states: Sequence[str] = ()
    queues: Sequence[str] = ()
    types: Sequence[str] = ()
    ids: Sequence[str] = ()
    # The type of the job's last error (ojs-dead-letter §6.2 ``error_type``).
    error_types: Sequence[str] = ()
    search: str = ""

    @property
    def empty(self) -> bool:
        return not (self.states or self.queues or self.types or self.ids or self.error_types or self.search)

    def selection(self) -> QuerySet:
        """The jobs this filter matches; bad values raise ``InvalidRequest``."""
        rows = Job.objects.all()
        if self.states:
            unknown = sorted(set(self.states) - {state.value for state in JobState})
            if unknown:
                raise InvalidRequest(f"unknown state {', '.join(unknown)}", field="state")
            rows = rows.filter(state__in=sorted(set(self.states)))
        if self.queues:
            rows = rows.filter(queue__in=list(self.queues))
        if self.types:
            rows = rows.filter(type__in=list(self.types))
        if self.ids:
            rows = rows.filter(id__in=[_uuid(value) for value in self.ids])
        if self.error_types:
            rows = rows.filter(error__type__in=list(self.error_types))
        condition = job_search(self.search) if self.search else None
        return rows.filter(condition) if condition is not None else rows


def list_jobs(job_filter: JobFilter, limit: int) -> list[dict[str, Any]]:
    rows = (
        job_filter.selection()
        .order_by("-seq")
        .annotate(error_type=KT("error__type"))
        .values("id", "type", "queue", "state", "priority", "attempt", "max_attempts", "created_at",
                "finished_at", "error_type")[:limit]
    )
    return [
        {**row, "id": str(row["id"]), "created_at": format_timestamp(row["created_at"]),
         "finished_at": format_timestamp(row["finished_at"])}
        for row in rows
    ]


def show_job(job_id: str) -> dict[str, Any]:
    job = Job.objects.filter(id=_uuid(job_id)).first()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    body = render_job(job, errors=job.errors.all())
    body["worker_id"] = job.worker_id
    return body


def list_queues() -> list[dict[str, Any]]:
    """Every queue with a settings row or unfinished jobs: paused or not, its backlog by state.

    Counts cover unfinished jobs and the dead letter (the partial indexes
    hold them); completed and cancelled jobs, the bulk of a table, are not
    counted here.
    """
    counted = sorted({state.value for state in JobState if state not in TERMINAL} | {JobState.DISCARDED.value})
    counts: dict[str, dict[str, int]] = {}
    for queue, state, n in (
        Job.objects.filter(state__in=counted).values_list("queue", "state").annotate(n=Count("seq")).order_by()
    ):
        counts.setdefault(queue, {})[state] = n
    settings = {queue.name: queue for queue in Queue.objects.all()}
    out = []
    for name in sorted(set(counts) | set(settings)):
        queue = settings.get(name)
        out.append(
            {
                "name": name,
                "paused": bool(queue and queue.paused),
                "paused_at": format_timestamp(queue.paused_at) if queue else None,
                "counts": {state: counts.get(name, {}).get(state, 0) for state in counted},
            }
        )
    return out


def list_workers(include_dead: bool = False) -> list[dict[str, Any]]:
    rows = Worker.objects.order_by("id")
    if not include_dead:
        rows = rows.filter(declared_dead_at__isnull=True)
    return [
        {
            "id": worker.id,
            "hostname": worker.hostname,
            "pid": worker.pid,
            "queues": worker.queues,
            "concurrency": worker.concurrency,
            "state": worker.state,
            "directive": worker.directive,
            "active_jobs": worker.active_jobs,
            "last_heartbeat_at": format_timestamp(worker.last_heartbeat_at),
            "declared_dead_at": format_timestamp(worker.declared_dead_at),
        }
        for worker in rows
    ]


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidRequest(f"{value!r} is not a job id (a UUID)", field="id") from None
