"""Store a progress report: on the lease it names, as a heartbeat (ojs-progress §6)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.db.models import F, Value

from ..models import Job
from ..protocol.durations import format_timestamp, parse_timestamp
from ..protocol.progress import EVENT_INTERVAL, Report, merge
from ..protocol.states import JobState
from . import events
from .clock import db_now


def report_progress(job_id: Any, report: Report, *, attempt: int | None = None, worker_id: str | None = None) -> bool:
    """Record ``report`` for the active attempt it belongs to; False if it is not (ignored, §6.1).

    Acts on a lease: ``attempt`` (and ``worker_id``) must still hold the job,
    so a late report from an attempt the reaper recovered never lands on the
    next one. The row is taken with SKIP LOCKED: progress is fire-and-forget
    and never waits behind the ACK or recovery that holds it. Extends the
    lease as a heartbeat would (§6.3), and records ``job.progress`` at most
    once a second per job (§6.2; the value itself is always stored).
    """
    with transaction.atomic():
        # By id alone, the state checked here: a state condition let PostgreSQL walk an
        # index of states whose statistics predate the backlog (tests/core/test_query_plans.py).
        job = (
            Job.objects.select_for_update(skip_locked=True)
            .filter(id=job_id)
            .only("seq", "id", "type", "queue", "state", "attempt", "worker_id", "progress")
            .first()
        )
        if job is None or job.state != JobState.ACTIVE or (attempt is not None and job.attempt != attempt):
            return False
        if worker_id and job.worker_id not in (None, worker_id):
            return False
        now = db_now()
        previous = job.progress if job.progress and job.progress.get("attempt") == job.attempt else None
        job.progress = merge(job.progress, job.attempt, report, format_timestamp(now) or "")
        Job.objects.filter(seq=job.seq).update(
            progress=job.progress, lease_expires_at=Value(now) + F("visibility_timeout")
        )
        if _event_due(previous, now):
            events.record([events.job_event(
                "job.progress",
                job,
                now,
                worker_id=job.worker_id,
                progress_percent=None if job.progress["progress"] is None else round(job.progress["progress"] * 100, 2),
                data=job.progress["data"],
            )])
    return True


def _event_due(previous: dict[str, Any] | None, now: dt.datetime) -> bool:
    if not previous or not previous.get("updated_at"):
        return True
    at = parse_timestamp(previous["updated_at"], allow_relative=False)
    return not isinstance(at, dt.datetime) or (now - at).total_seconds() >= EVENT_INTERVAL
