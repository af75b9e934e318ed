"""What ``manage.py ojs`` shows: jobs by filter, one job, queues, workers, as plain dicts.

Read-only; every change goes through the core (``core.bulk``, ``Queue.objects``). The
filter (``JobFilter``) is the core's, shared with the admin API.
Listings are bounded (``--limit``) and newest first, straight from the primary key.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models.fields.json import KT

from ..core import awaiting, coverage, workers
from ..core.clock import db_now
from ..core.dead_letter import describe, keeping
from ..core.django_tasks import task_column
from ..core.durable import steps_of
from ..core.queue_config import describe_limits, render_config
from ..core.selection import JobFilter, job_uuid
from ..core.stats import queue_figures
from ..core.workflows import job_counts
from ..models import Job, Queue, Worker, Workflow
from ..protocol.durations import format_timestamp
from ..protocol.envelope import render_job
from ..protocol.errors import NotFound
from ..protocol.progress import view
from ..protocol.states import JobState


def list_jobs(job_filter: JobFilter, limit: int) -> list[dict[str, Any]]:
    rows = (
        job_filter.selection()
        .order_by("-seq")
        .annotate(error_type=KT("error__type"), task=task_column())
        .only("id", "type", "queue", "state", "priority", "attempt", "max_attempts", "releases", "snoozes",
              "created_at",
              "finished_at", "dead_letter")[:limit]
    )
    return [
        {"id": str(job.id), "type": job.type, "task": job.task, "queue": job.queue, "state": job.state, "priority": job.priority,
         "attempt": job.attempt, "max_attempts": job.max_attempts, "attempts_charged": job.attempt - job.releases,
         "snoozes": job.snoozes,
         "created_at": format_timestamp(job.created_at),
         "finished_at": format_timestamp(job.finished_at), "error_type": job.error_type,
         "kept": keeping(job) or None}
        for job in rows
    ]


def show_job(job_id: str) -> dict[str, Any]:
    job = Job.objects.filter(id=job_uuid(job_id)).first()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    # Its checkpoint and steps as INFO renders them (last_checkpoint..., steps): one meaning on every surface.
    body = render_job(job, errors=job.errors.all(), steps=steps_of(job))
    body["worker_id"] = job.worker_id
    # What GET /ojs/v1/jobs/{id}/progress answers beside the job's id and state.
    body["progress"] = view(job.state, job.attempt, job.progress)
    return body


def show_workflow(workflow_id: str) -> dict[str, Any]:
    """A workflow and its jobs by state, as the admin and ``GET /ojs/v1/workflows/{id}`` count them."""
    try:
        ref = uuid.UUID(workflow_id)
    except ValueError:
        raise NotFound(f"workflow {workflow_id} not found") from None
    workflow = Workflow.objects.filter(id=ref).first()
    if workflow is None:
        raise NotFound(f"workflow {workflow_id} not found")
    return {"id": str(workflow.id), "type": workflow.type, "name": workflow.name, "state": workflow.state,
            "jobs_by_state": job_counts(workflow)}


def result_of(job_id: str, timeout: float | None) -> dict[str, Any]:
    """What ``GET /ojs/v1/jobs/{id}/result`` answers, once the job ends (``core.awaiting.wait``)."""
    job = awaiting.wait(job_uuid(job_id), timeout)
    body: dict[str, Any] = {"job_id": str(job.id), "state": job.state, "result": job.result}
    if job.state != JobState.COMPLETED and job.error is not None:
        body["error"] = job.error
    return body
def durable_line(rendered: dict[str, Any]) -> str:
    """``show``'s line for people about a durable job: its steps and the checkpoint a retry resumes from."""
    parts = []
    if rendered.get("steps"):
        steps = ", ".join(f"{step['name']} (attempt {step['attempt']})" for step in rendered["steps"])
        parts.append(f"steps recorded: {steps}")
    if "last_checkpoint" in rendered:
        parts.append(
            f"last checkpoint: attempt {rendered['last_checkpoint_attempt']}, {rendered['last_checkpoint_at']}"
        )
    return "\n".join(parts)


def kept_line(rendered: dict[str, Any]) -> str:
    """``show``'s line for people: what a discarded job is kept as and until when (core/dead_letter.py)."""
    if rendered.get("state") != JobState.DISCARDED or not rendered.get("kept_until"):
        return ""
    return describe(rendered["dead_letter"], rendered["kept_until"])


def waiting_line(rendered: dict[str, Any]) -> str:
    """``show``'s line for people: what a parked job waits for, since and until when (INFO's ``waiting``)."""
    waiting = rendered.get("waiting")
    if not waiting:
        return ""
    return f"waiting for signal {waiting['signal']} since {waiting['since']}, until {waiting['until']}"


def list_queues() -> list[dict[str, Any]]:
    """Every queue with a row (used once, configured or paused), as ``GET /ojs/v1/admin/queues``
    lists them: paused or not, its jobs by state, its rates, oldest wait and estimated time to
    drain, its limits, bound and fairness.

    The counts are the admin API's and the metrics' (``core/stats.py``): exact up to a bound,
    the planner's estimate past it, the states estimated named in ``counts_estimated``.
    """
    settings = {queue.name: queue for queue in Queue.objects.all()}
    unrunnable: dict[str, list[dict[str, Any]]] = {}
    for item in coverage.unrunnable()[0]:
        unrunnable.setdefault(item.queue, []).append(
            {"type": item.type, "count": item.count, "oldest_at": format_timestamp(item.oldest_at)}
        )
    unread = set(coverage.unread())
    names = sorted(settings)
    # The counts and autoscaling signals as the admin API and the metrics say them (core/stats.py).
    figures = queue_figures(names, db_now())
    out = []
    for name in names:
        queue = settings[name]
        tallies = figures[name].counts
        out.append(
            {
                "name": name,
                "paused": queue.paused,
                "paused_at": format_timestamp(queue.paused_at),
                "counts": {state.value: tallies[state.value].value for state in JobState},
                "counts_estimated": [state.value for state in JobState if not tallies[state.value].exact],
                # Available jobs no running worker of the queue has a handler for (core/coverage.py),
                # and whether jobs wait with no live worker reading the queue at all.
                "unrunnable": unrunnable.get(name, []),
                "no_live_worker": name in unread,
                # Completed and discarded per minute, as the admin API gives them.
                "throughput": {
                    "processed_per_minute": round(figures[name].completed_per_minute, 2),
                    "failed_per_minute": round(figures[name].failed_per_minute, 2),
                },
                "oldest_available_age_seconds": figures[name].oldest_available_age_seconds,
                "oldest_available_exact": figures[name].oldest_exact,
                "estimated_drain_seconds": figures[name].estimated_drain_seconds,
                # As the admin's Queues page says them; "config" as GET /ojs/v1/queues/{name}/config.
                "limits": describe_limits(queue, tallies[JobState.ACTIVE.value].value),
                "config": render_config(queue),
            }
        )
    return out


def list_workers(include_dead: bool = False) -> list[dict[str, Any]]:
    """Registered workers; ``state`` as every surface says it (``core.workers.shown_state``),
    ``active_jobs`` the jobs each holds in the jobs table."""
    rows = list(Worker.objects.order_by("id"))
    now = db_now()
    if not include_dead:
        # Dead as it is shown: silent past HEARTBEAT_TIMEOUT is dead before the reaper declares it.
        rows = [worker for worker in rows if workers.shown_state(worker, now) != workers.DEAD]
    held = workers.held_counts([worker.id for worker in rows])
    return [
        {
            "id": worker.id,
            "hostname": worker.hostname,
            "pid": worker.pid,
            "queues": worker.queues,
            "handles": worker.handles,
            "concurrency": worker.concurrency,
            "state": workers.shown_state(worker, now),
            "reported_state": worker.state,
            "directive": worker.directive,
            "active_jobs": held.get(worker.id, 0),
            "overrun_handlers": workers.overrun_shown(worker, now),
            "last_heartbeat_at": format_timestamp(worker.last_heartbeat_at),
            "declared_dead_at": format_timestamp(worker.declared_dead_at),
            "last_declared_dead_at": format_timestamp(worker.last_declared_dead_at),
        }
        for worker in rows
    ]
