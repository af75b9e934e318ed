"""What ``manage.py ojs`` shows: jobs by filter, one job, queues, workers, as plain dicts.

Read-only; every change goes through the core (``core.bulk``, ``Queue.objects``). The
filter (``JobFilter``) is the core's, shared with the admin API.
Listings are bounded (``--limit``) and newest first, straight from the primary key.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.db.models.fields.json import KT

from ..core.selection import JobFilter, job_uuid
from ..models import Job, Queue, Worker
from ..protocol.durations import format_timestamp
from ..protocol.envelope import render_job
from ..protocol.errors import NotFound
from ..protocol.progress import view
from ..protocol.states import TERMINAL, JobState


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
    job = Job.objects.filter(id=job_uuid(job_id)).first()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    body = render_job(job, errors=job.errors.all())
    body["worker_id"] = job.worker_id
    # What GET /ojs/v1/jobs/{id}/progress answers beside the job's id and state.
    body["progress"] = view(job.state, job.attempt, job.progress)
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
