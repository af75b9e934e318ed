"""What a job's own page shows: timeline, reservation and error history.

Functions of a job and the database's current time (``now``), so the
changelist, the change page and the Failed jobs page render them alike.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.admin.utils import quote
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..core import events
from ..core.dead_letter import KEEPING
from ..core.unique_keys import current_holder
from ..models import Event, Job, JobError, JobStep, Worker
from ..protocol.durable import render_checkpoint
from ..protocol.envelope import render_waits
from ..protocol.progress import percent, view
from ..protocol.states import JobState
from ..protocol.unique import decode_states
from .display import EMPTY, day, human_duration, link, moment, pretty_json

# A job that was retried from the dead letter many times could collect a long
# history; a page shows this many of its errors, the latest last.
ERROR_HISTORY_LIMIT = 100
# A job's page shows its latest events; ``?events=all`` raises the bound to
# EVENT_HISTORY_MAX so a job with 10,000 events still renders fast.
EVENT_HISTORY_LIMIT = 50
EVENT_HISTORY_MAX = 1000
# A job's page lists this many of its durable steps, the first recorded first.
STEPS_LIMIT = 200
# Progress reports are counted apart from the lifecycle events, exactly up to this many.
PROGRESS_COUNT_LIMIT = 10_000
_FINISHED_LABEL = {
    JobState.COMPLETED: "completed",
    JobState.DISCARDED: "discarded",
    JobState.CANCELLED: "cancelled",
}


def keeping(job: Job, now: dt.datetime, *, compact: bool = False) -> SafeString | str:
    """What a discarded job is kept as and until when (core/dead_letter.py), the time as the console writes it;
    ``compact`` (a list cell): the date, the whole time on hover."""
    until = job.kept_until
    if until is None:
        return ""
    return format_html(KEEPING[job.dead_letter], day(until) if compact else moment(until, now))


def dead_letter_line(job: Job, now: dt.datetime) -> SafeString | str:
    """The job page's "dead letter" row: 'yes — kept until …', 'no — discarded, kept until …', or 'no'."""
    if job.kept_until is None:
        return "no"
    if job.dead_letter:
        return format_html("yes — kept until {}", moment(job.kept_until, now))
    return format_html("no — {}", keeping(job, now))


def status_line(job: Job, now: dt.datetime) -> SafeString | str:
    """Where the job stands in time, said after its state in a list: 'waiting 3 min', 'runs in 5 min'."""
    state = job.state
    if state == JobState.SCHEDULED and job.waiting_for:
        # Parked by its handler (INFO's `waiting`): what it waits for says more than when it runs.
        return format_html("waits for {} · {}", job.waiting_for, moment(job.run_at, now, compact=True))
    if state in (JobState.SCHEDULED, JobState.RETRYABLE):
        verb = "runs" if state == JobState.SCHEDULED else "retries"
        return format_html("{} {}", verb, moment(job.run_at, now, compact=True))
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
                moment(job.lease_expires_at, now, compact=True),
            )
        return running
    return moment(job.finished_at or job.completed_at, now, compact=True)


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


def progress(job: Job, now: dt.datetime) -> SafeString:
    """The attempt's progress (ojs-progress) as a bar, its message, its figures and its structured data."""
    shown = view(job.state, job.attempt, job.progress)
    if shown["progress"] is None and shown["data"] is None and shown["message"] is None:
        return format_html('<span class="ojs-quiet">{}</span>', "no progress reported by this attempt")
    bar = EMPTY if shown["progress"] is None else format_html(
        '<progress class="ojs-progress-bar" max="1" value="{}"></progress> <strong class="ojs-progress-figure">{}</strong>',
        shown["progress"], percent(shown["progress"]),
    )
    reported = parse_datetime(shown["updated_at"]) if shown["updated_at"] else None
    rows = [("progress", bar)]
    if shown["message"] is not None:
        rows.append(("message", format_html('<span class="ojs-progress-message">{}</span>', shown["message"])))
    rows.append(("reported", moment(reported, now)))
    if shown["data"] is not None:
        rows.append(("data", pretty_json(shown["data"])))
    return _table(rows)


def waits(job: Job, now: dt.datetime) -> SafeString:
    """Snooze and signals: how often the job snoozed, what it waits for since and until when,
    and the signals delivered to it -- the words and values of INFO's ``snoozes``, ``waiting``, ``signals``."""
    shown = render_waits(job)
    rows: list[tuple[str, Any]] = [("snoozes", str(shown.get("snoozes", 0)))]
    waiting = shown.get("waiting")
    if waiting:
        rows.append(("waiting for", format_html(
            '<code class="ojs-waiting-for">{}</code> since {}, until {}', waiting["signal"],
            moment(parse_datetime(waiting["since"]), now), moment(parse_datetime(waiting["until"]), now),
        )))
    for name, entry in sorted(shown.get("signals", {}).items()):
        rows.append((f"signal {name}", format_html(
            '<span class="ojs-signal" data-signal="{}">received {}</span>{}', name,
            moment(parse_datetime(entry["received_at"]), now), pretty_json(entry.get("payload")),
        )))
    return _table(rows)
def checkpoint(job: Job, now: dt.datetime) -> SafeString:
    """The job's last checkpoint (ojs-progress §6.4): what a retry resumes from, which attempt kept it, when."""
    shown = render_checkpoint(job.checkpoint)
    if not shown:
        return format_html('<span class="ojs-quiet">{}</span>', "no checkpoint")
    kept = parse_datetime(shown["last_checkpoint_at"]) if shown["last_checkpoint_at"] else None
    return _table([
        ("attempt", shown["last_checkpoint_attempt"]),
        ("kept", moment(kept, now)),
        ("state", pretty_json(shown["last_checkpoint"])),
    ])


def steps(job: Job, now: dt.datetime) -> SafeString:
    """The durable steps the job recorded, in order: name, the attempt that recorded it, when, its result."""
    if not job.step_count:
        return format_html('<span class="ojs-quiet">{}</span>', "no steps recorded")
    recorded = list(JobStep.objects.filter(job_id=job.seq).order_by("id")[:STEPS_LIMIT])
    rows = format_html_join(
        "",
        '<tr class="ojs-step"><td class="ojs-step-name">{}</td><td class="ojs-step-attempt">{}</td><td>{}</td><td>{}</td></tr>',
        ((step.name, step.attempt, moment(step.recorded_at, now), pretty_json(step.result)) for step in recorded),
    )
    more = job.step_count - len(recorded)
    hidden = format_html('<p class="ojs-quiet">{} more not shown</p>', more) if more > 0 else ""
    return format_html(
        '<table class="ojs-steps"><thead><tr><th>step</th><th>attempt</th><th>recorded</th><th>result</th></tr>'
        "</thead><tbody>{}</tbody></table>{}",
        rows, hidden,
    )


def progress_cell(job: Job) -> str:
    """The list's short form: '47%' while it means something, else nothing."""
    return percent(view(job.state, job.attempt, job.progress)["progress"])


def event_history(job: Job, now: dt.datetime, limit: int = EVENT_HISTORY_LIMIT) -> SafeString:
    """The job's lifecycle events, oldest first: every claim (worker, attempt), failure,
    release, recovery, cancellation -- why it ran as many times as it did.

    The latest ``limit`` lifecycle events, read newest first on the (job_id, seq)
    index. Progress reports are not among them: a handler reporting every
    second would push the claims and failures off the page within a minute.
    They are summed up in one line under the table instead (how many, the latest).
    """
    rows, more = events.job_story(job.id, limit)
    entries = [{"event": event, "when": moment(event.time, now), "what": _event_summary(event)} for event in rows]
    progress_count, latest = events.progress_reports(job.id, PROGRESS_COUNT_LIMIT)
    return render_to_string(
        "admin/django_ojs/job/event_history.html",
        {"entries": entries, "more": more, "limit": limit, "can_show_more": more and limit < EVENT_HISTORY_MAX,
         "max": EVENT_HISTORY_MAX,
         "progress_count": progress_count, "progress_more": progress_count > PROGRESS_COUNT_LIMIT,
         "progress_limit": PROGRESS_COUNT_LIMIT,
         "progress_latest": latest and {"when": moment(latest.time, now), "what": _event_summary(latest)}},
    )


def _event_summary(event: Event) -> str:
    """One line of what an event says beyond its type, attempt and worker."""
    data = event.data or {}
    parts = []
    error = data.get("error") or data.get("last_error")
    if isinstance(error, dict):
        parts.append(f"{error.get('type') or error.get('code')}: {error.get('message', '')}".strip())
    for key, label in (
        ("reason", "reason"), ("previous_state", "was"), ("next_retry_at", "next attempt"),
        ("scheduled_at", "for"), ("duration_ms", "took ms"), ("progress_percent", "progress %"),
    ):
        if data.get(key) is not None:
            parts.append(f"{label} {data[key]}")
    for flag, text in (("requeued", "back in its queue"), ("activated", "activated"),
                       ("retried_from_dead_letter", "retried from the dead letter"), ("dead_letter", "to the dead letter")):
        if data.get(flag):
            parts.append(text)
    return " · ".join(parts)


def _table(rows: list[tuple[str, object]]) -> SafeString:
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
    return format_html('<table class="ojs-facts">{}</table>', body)


def uniqueness(job: Job, now: dt.datetime) -> SafeString:
    """The job's unique key, whether it holds it now, and the job it collides with."""
    if not job.unique_key:
        return format_html('<span class="ojs-quiet">{}</span>', "not a unique job")
    holding = decode_states(job.unique_states)
    if not holding:
        standing = "released (its period lapsed, or a newer job replaced it)"
    elif job.state in holding:
        standing = f"holds the key while {', '.join(sorted(holding))}"
    else:
        standing = f"does not hold the key (it holds it only while {', '.join(sorted(holding))})"
    holder = current_holder(job.unique_key)
    if holder is None or holder.pk == job.pk:
        collides = EMPTY
    else:
        url = reverse("admin:django_ojs_job_change", args=[quote(holder.pk)])
        collides = format_html("{} ({})", link(url, holder.id), holder.state)
    expires = moment(job.unique_expires_at, now) if job.unique_expires_at else "no period"
    return format_html(
        '<table class="ojs-facts"><tr><th>key</th><td><code>{}</code></td></tr>'
        "<tr><th>now</th><td>{}</td></tr><tr><th>period ends</th><td>{}</td></tr>"
        "<tr><th>held by another job</th><td>{}</td></tr><tr><th>policy</th><td>{}</td></tr></table>",
        job.unique_key, standing, expires, collides, pretty_json(job.unique),
    )


def rate_limit(job: Job) -> SafeString:
    """The job's own rate limit key and policy, linked to the key's usage."""
    if not job.rate_key:
        return format_html('<span class="ojs-quiet">{}</span>', "no rate limit of its own")
    url = reverse("admin:django_ojs_ratelimitoverride_changelist") + f"?key={job.rate_key}"
    return format_html(
        '<table class="ojs-facts"><tr><th>key</th><td>{}</td></tr><tr><th>policy</th><td>{}</td></tr></table>',
        link(url, job.rate_key, "usage of this key"), pretty_json(job.rate_limit),
    )
