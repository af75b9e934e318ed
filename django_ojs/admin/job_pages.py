"""What a job's own page shows: timeline, reservation and error history.

Functions of a job and the database's current time (``now``), so the
changelist, the change page and the dead letter render them alike.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.admin.utils import quote
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..models import Job, JobError, Worker
from ..states import JobState
from .display import EMPTY, human_duration, link, moment, pretty_json, relative

# A job that was retried from the dead letter many times could collect a long
# history; a page shows this many of its errors, the latest last.
ERROR_HISTORY_LIMIT = 100
_FINISHED_LABEL = {
    JobState.COMPLETED: "completed",
    JobState.DISCARDED: "discarded",
    JobState.CANCELLED: "cancelled",
}


def status_line(job: Job, now: dt.datetime) -> SafeString | str:
    """Where the job stands in time, said after its state in a list: 'waiting 3 min', 'runs in 5 min'."""
    state = job.state
    if state in (JobState.SCHEDULED, JobState.RETRYABLE):
        verb = "runs" if state == JobState.SCHEDULED else "retries"
        return f"{verb} {relative(job.run_at, now, precise=False)}"
    if state == JobState.AVAILABLE:
        return f"waiting {_since(job.enqueued_at, now)}"
    if state == JobState.PENDING:
        return "until activated"
    if state == JobState.ACTIVE:
        running = f"running {_since(job.started_at, now)}"
        if job.lease_expires_at and job.lease_expires_at < now:
            return format_html(
                '{} · <strong class="ojs-alarm">lease expired {}</strong>',
                running,
                relative(job.lease_expires_at, now, precise=False),
            )
        return running
    return relative(job.finished_at or job.completed_at, now, precise=False)


def _since(moment: dt.datetime | None, now: dt.datetime) -> str:
    return human_duration(now - moment, precise=False) if moment else EMPTY


def timeline(job: Job, now: dt.datetime) -> SafeString:
    """The moments of the job's life so far, in order, as a small table."""
    finished_label = _FINISHED_LABEL.get(JobState(job.state), "finished")
    rows = [
        ("created", job.created_at),
        ("scheduled for", job.scheduled_at),
        ("enqueued", job.enqueued_at),
        ("started", job.started_at),
        ("completed", job.completed_at if job.state == JobState.COMPLETED else None),
        (finished_label, job.finished_at if job.state != JobState.COMPLETED else None),
        ("next attempt", job.run_at if job.state == JobState.RETRYABLE else None),
        ("expires", job.expires_at),
    ]
    return _table([(label, moment(value, now)) for label, value in rows if value is not None])


def reservation(job: Job, now: dt.datetime) -> SafeString | str:
    """Who holds the job and until when (ojs-worker-protocol §5)."""
    if job.state != JobState.ACTIVE:
        return "Not reserved: the job is not active."
    if job.worker_id and Worker.objects.filter(pk=job.worker_id).exists():
        url = reverse("admin:django_ojs_worker_change", args=[quote(job.worker_id)])
        worker = link(url, job.worker_id)
    else:
        worker = job.worker_id or "a client that gave no worker id"
    rows = [
        ("worker", worker),
        ("visibility deadline", moment(job.lease_expires_at, now)),
        ("execution deadline", moment(job.deadline_at, now)),
    ]
    return _table(rows)


def error_history(job: Job, now: dt.datetime) -> SafeString:
    """Every failed attempt, oldest first, each backtrace folded away until asked for."""
    errors = list(JobError.objects.filter(job_id=job.seq).order_by("-id")[:ERROR_HISTORY_LIMIT])
    errors.reverse()
    total = len(errors)
    if total == ERROR_HISTORY_LIMIT:
        total = JobError.objects.filter(job_id=job.seq).count()
    entries = [
        {
            "error": error,
            "occurred": moment(error.occurred_at, now),
            "details": pretty_json(error.details) if error.details else None,
            "backtrace": "\n".join(str(frame) for frame in error.backtrace or []),
            "frames": len(error.backtrace or []),
        }
        for error in errors
    ]
    return render_to_string(
        "admin/django_ojs/job/error_history.html", {"entries": entries, "total": total, "hidden": total - len(errors)}
    )


def _table(rows: list[tuple[str, object]]) -> SafeString:
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
    return format_html('<table class="ojs-facts">{}</table>', body)
