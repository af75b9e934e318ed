"""Jobs (ojs-admin-api §7): list with filters, detail with its error history and events, cancel, retry.

A list reads a few columns of a page of rows, never the arguments; its order
is a keyset (``paging.py``). ``total`` is exact up to ``core/counting.py``'s
bound and the planner's estimate past it (``total_exact``: false).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.db.models.fields.json import KT
from rest_framework.response import Response

from ...core import control, events, partitions
from ...core.counting import count_rows
from ...core.dead_letter import kept_fields
from ...core.django_tasks import task_column
from ...core.durable import steps_of
from ...core.selection import JobFilter
from ...models import Job
from ...protocol.durations import format_timestamp
from ...protocol.envelope import parse_job_ref, render_job
from ...protocol.errors import NotFound
from ...protocol.states import JobState
from ..system import render_event
from .base import AdminView
from .filters import FIELDS, filter_from_query
from .paging import KEYSET_PARAMS, PAGE_PARAMS, Read, keyset_of, page_of

LISTED = ("seq", "id", "type", "queue", "state", "priority", "attempt", "max_attempts", "created_at",
          "enqueued_at", "scheduled_at", "started_at", "completed_at", "finished_at", "worker_id", "dead_letter")
# A job's latest events shown with it (its admin page shows as many).
EVENTS_SHOWN = 50


def render_listed(row: dict[str, Any]) -> dict[str, Any]:
    """A list entry: the job's identity, state and times, and its last error's type and message."""
    out: dict[str, Any] = {"id": str(row["id"])}
    out["type"] = row["type"]
    if row["task"] is not None:
        out["task"] = row["task"]  # the Django @task function a django.task job runs
    out.update((name, row[name]) for name in ("queue", "state", "priority", "attempt", "max_attempts"))
    for name in ("created_at", "enqueued_at", "scheduled_at", "started_at", "completed_at"):
        if row[name] is not None:
            out[name] = format_timestamp(row[name])
    if row["state"] in (JobState.CANCELLED, JobState.DISCARDED) and row["finished_at"] is not None:
        out[f"{row['state']}_at"] = format_timestamp(row["finished_at"])
    # What a discarded job is kept as and until when, as its record says.
    out.update(kept_fields(row["state"], row["dead_letter"], row["finished_at"]))
    if row["state"] == JobState.ACTIVE and row["worker_id"]:
        out["worker_id"] = row["worker_id"]
    if row["error_type"] is not None:
        out["error"] = {"type": row["error_type"], "message": row["error_message"]}
    return out


def listed(jobs: QuerySet) -> QuerySet:
    """The columns a list entry shows (``render_listed``), never the arguments."""
    return jobs.values(*LISTED, error_type=KT("error__type"), error_message=KT("error__message"), task=task_column())


def job_by_ref(job_id: str) -> Job:
    job = Job.objects.filter(id=parse_job_ref(job_id, "id")).first()
    if job is None:
        raise NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": job_id})
    return job


# What a list of jobs reads of its query: the filter, and ``job_page``'s sort and page.
JOB_LIST_QUERY = (*FIELDS, *PAGE_PARAMS, *KEYSET_PARAMS)


def job_page(job_filter: JobFilter, params: Any) -> dict[str, Any]:
    """One page of the jobs ``job_filter`` selects, as §7.1 lists jobs: sorted and paged by
    ``params``, with its count. A range of creation times is read partition by partition
    (``partitions.slice_by_partition``): each day holds few or many of its jobs, and only a
    partition planned alone reads the index that suits it."""
    keyset = keyset_of(params)
    page = page_of(params)
    selection = job_filter.selection()
    in_range = bool(job_filter.created_since or job_filter.created_until)
    read = _by_partition(job_filter) if in_range else None
    rows, has_more = page.slice_of_parts([listed(part) for part in keyset.parts(selection)], read)
    # A range's jobs are mostly finished ones: counted first, their bound passed, the waiting
    # jobs (no index on created_at, every one of them read) are not read for the total.
    total = count_rows(selection, parts=_finished_first(selection) if in_range else ())
    pagination = page.meta(total.value, has_more, exact=total.exact)
    if has_more:
        pagination["next_cursor"] = keyset.cursor_after(rows[-1])
    return {"items": [render_listed(row) for row in rows], "pagination": pagination,
            "sort": keyset.sort, "order": "desc" if keyset.descending else "asc"}


def _by_partition(job_filter: JobFilter) -> Read:
    # The dead letter's filter names no state but selects discarded jobs only.
    states = job_filter.states or ([JobState.DISCARDED.value] if job_filter.kept_as else [])

    def read(rows: QuerySet, start: int, stop: int) -> list[Any]:
        found = partitions.slice_by_partition(rows, start, stop, states)
        return list(rows[start:stop]) if found is None else found

    return read


def _finished_first(selection: QuerySet) -> list[QuerySet]:
    return [selection.filter(state__in=partitions.TERMINAL_STATES), selection.filter(state__in=partitions.LIVE_STATES)]


class JobListView(AdminView):
    query = {"GET": JOB_LIST_QUERY}

    def get(self, request: Any) -> Response:
        params = request.query_params
        return Response(job_page(filter_from_query(params), params))


class JobView(AdminView):
    """§7.2: the full envelope, its error history, its latest events, and the §7.2 ``metadata`` times."""

    def get(self, request: Any, job_id: str) -> Response:
        job = job_by_ref(job_id)
        body = render_job(job, errors=job.errors.all(), steps=steps_of(job))
        if job.worker_id:
            body["worker_id"] = job.worker_id
        # Its lifecycle, as its admin page lists it: progress reports would push it out (core/events.job_story).
        story, _ = events.job_story(job.id, EVENTS_SHOWN)
        body["events"] = [render_event(event) for event in story]
        finished = format_timestamp(job.finished_at)
        body["metadata"] = {
            "created_at": format_timestamp(job.created_at),
            "enqueued_at": format_timestamp(job.enqueued_at),
            "started_at": format_timestamp(job.started_at),
            "scheduled_at": format_timestamp(job.scheduled_at),
            "completed_at": format_timestamp(job.completed_at),
            "cancelled_at": finished if job.state == JobState.CANCELLED else None,
            "discarded_at": finished if job.state == JobState.DISCARDED else None,
        }
        return Response(body)


class JobCancelView(AdminView):
    """§7.3: the data plane's CANCEL, under the admin path (a job already finished is returned unchanged)."""

    def post(self, request: Any, job_id: str) -> Response:
        job, previous = control.cancel(parse_job_ref(job_id, "id"))
        return Response({"job": render_job(job), "previous_state": previous, "cancelled": previous is not None})


class JobRetryView(AdminView):
    """§7.4: a discarded job back to ``available`` with fresh attempts (the dead letter's retry).

    A cancelled job stays cancelled (409): ojs-core §6 makes ``cancelled``
    terminal, and the core wins (README, "Decisions").
    """

    def post(self, request: Any, job_id: str) -> Response:
        job = control.resurrect(parse_job_ref(job_id, "id"), missing="job")
        return Response({"job": render_job(job)})

