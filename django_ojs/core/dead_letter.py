"""The dead letter and the failed jobs: one meaning for every door.

A job that stops being retried is ``discarded``. Its retry policy's
``on_exhaustion`` (or the handler's ``DEAD_LETTER`` code) decides what it is
kept as, and the job row's ``dead_letter`` flag records it:

- **dead letter** (``dead_letter`` true): kept for an operator, for
  ``RETENTION["dead_letter"]`` and at most ``RETENTION["dead_letter_max_count"]``
  of them (ojs-dead-letter §5); the dead letter is these jobs and no others
  (ojs-dead-letter: "implementations MUST distinguish" them from plain discards);
- **discarded**: a plain discard, kept ``RETENTION["discarded"]``.

``GET /ojs/v1/dead-letter``, ``/ojs/v1/admin/dead-letter``, their stats and
the ``ojs_dead_letter_jobs`` gauge read ``dead_letter_jobs()``; the admin's
Failed jobs page, the job page and ``manage.py ojs`` say what every discarded
job is kept as and until when with ``keeping`` and ``kept_until``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import QuerySet

from ..conf import ojs_settings
from ..models import Job, discarded_kept_until
from ..protocol.durations import format_timestamp
from ..protocol.errors import NotFound
from ..protocol.states import JobState

# What a discarded job is kept as, as filters name it: the admin's ``?kept=``, ``manage.py ojs --kept-as``
# (the record's ``dead_letter`` field); people read "dead letter" and "discarded" (``describe``).
DEAD_LETTER = "dead_letter"
DISCARDED = "discarded"
KEPT_AS = (DEAD_LETTER, DISCARDED)
# The same, in words, by the record's ``dead_letter``.
KEPT_WORDS = {True: "dead letter", False: "discarded"}


def failed_jobs(among: QuerySet | None = None) -> QuerySet:
    """Every discarded job (of ``among``, a queryset of jobs or of a proxy of them): the admin's Failed jobs page.

    A plain condition on the rows, never a ``pk IN (subquery)``: the planner reads the newest discards
    straight from ``ojs_job_finished`` (state, finished_at), where a semi-join over 10 million jobs hashed
    every discarded one first (7 s).
    """
    return (Job.objects.all() if among is None else among).filter(state=JobState.DISCARDED)


def dead_letter_jobs() -> QuerySet:
    """The dead letter: discarded jobs kept as dead letters, and only those."""
    return failed_jobs().filter(dead_letter=True)


def retention(dead_letter: bool) -> dt.timedelta:
    """How long a discarded job of either kind is kept after it finished."""
    return dt.timedelta(seconds=ojs_settings.RETENTION["dead_letter" if dead_letter else "discarded"])


def kept_until(job: Job) -> dt.datetime | None:
    """When the reaper prunes a discarded job (``Job.kept_until``: a dead letter may go sooner past
    ``dead_letter_max_count``); None for a job in any other state."""
    return job.kept_until


def kept_fields(state: str, dead_letter: bool, finished_at: dt.datetime | None) -> dict[str, Any]:
    """``dead_letter`` and ``kept_until`` as a job's record renders them, for a listed row (not a Job)."""
    if state != JobState.DISCARDED or finished_at is None:
        return {}
    return {"dead_letter": dead_letter, "kept_until": format_timestamp(discarded_kept_until(dead_letter, finished_at))}


def keeping(job: Job) -> str:
    """One line for operators: "kept as dead letter until …" or "discarded, kept until …"; "" for other states."""
    until = kept_until(job)
    if until is None:
        return ""
    return describe(job.dead_letter, format_timestamp(until))


# The line, by the record's ``dead_letter``, with the time in its place: the admin fills it with its
# own way of writing a time (``format_html``), the CLI and the logs with the API's.
KEEPING = {True: "kept as dead letter until {}", False: "discarded, kept until {}"}


def describe(dead_letter: bool, until: str) -> str:
    """``keeping``'s words for a job already rendered (its ``dead_letter`` and ``kept_until``)."""
    return KEEPING[dead_letter].format(until)


def find(job_ref: Any) -> Job:
    """The dead letter job of this id, for the dead letter's doors; ``NotFound`` for any other, a plain discard too."""
    # By id alone: a state condition can make PostgreSQL walk every finished job (core/control._move).
    job = Job.objects.filter(id=job_ref).first()
    if job is None or not is_dead_letter(job):
        raise NotFound(f"dead letter job {job_ref} not found",
                       details={"resource_type": "dead_letter_job", "resource_id": str(job_ref)})
    return job


def is_dead_letter(job: Any) -> bool:
    """A locked row's test for the dead letter's one-job moves (``control.resurrect``, ``control.purge_dead``)."""
    return bool(job.state == JobState.DISCARDED and job.dead_letter)
