"""Test-only moves: the store reset (served only while ``OJS["TEST_HOOKS"]`` is on), and
the claims ``django_ojs.testing`` makes to run jobs inside a test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import OperationalError, connection, transaction

from ..models import (
    CronJob,
    Event,
    Job,
    JobError,
    JobStep,
    Queue,
    RateLimitOverride,
    RateLimitStart,
    Worker,
    Workflow,
    WorkflowNode,
)
from ..protocol.states import JobState
from .claim import mark_claimed
from .clock import TxNow
from .maintenance import promote_due
from .queue_settings import forget

PROMOTE_BATCH = 500
# A reset that PostgreSQL aborted as one side of a deadlock is run again, up to this many times.
RESET_TRIES = 5
DEADLOCK_DETECTED = "40P01"


def reset_store() -> None:
    """Empty jobs, history, workflows, workers, cron, events and rate limit records; unpause every
    queue and clear its configuration.

    Queue rows stay: processes remember which queues have rows. Other
    processes may keep a queue's old configuration for ``QUEUE_CONFIG_TTL``.
    """
    for attempt in range(RESET_TRIES):
        try:
            _empty_store()
            break
        except OperationalError as exc:
            # TRUNCATE takes its tables' locks one after another, and a reaper reading two of them
            # at that moment can hold one the TRUNCATE waits for while waiting for one it holds:
            # PostgreSQL aborts one of the two. The reset is then run again.
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK_DETECTED or attempt == RESET_TRIES - 1:
                raise
    forget()


def _empty_store() -> None:
    emptied = (JobError, JobStep, Job, WorkflowNode, Workflow, Worker, CronJob, Event, RateLimitStart, RateLimitOverride)
    tables = [model._meta.db_table for model in emptied]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
        else:
            for model in emptied:
                model.objects.all()._raw_delete(model.objects.db)
        Queue.objects.update(
            paused=False, paused_at=None, concurrency=None, rate_limit=None, throttle=None, max_size=None,
            overflow_policy="reject",
        )


# -- django_ojs.testing: run jobs in the test's own process ---------------------------------


def make_due(queues: Sequence[str] | None, *, scheduled: bool) -> int:
    """Bring retries (and, with ``scheduled``, scheduled jobs) to ``available`` now, whatever their time.

    ``drain()`` runs what a test queued, retries included, without waiting
    out their backoff. They pass through the promotion the reaper makes
    (``job.enqueued`` events and all), only earlier. Rows in seq order. Jobs
    parked waiting for a signal stay parked until it comes, or their deadline.
    """
    states = [JobState.RETRYABLE, *([JobState.SCHEDULED] if scheduled else [])]
    with transaction.atomic():
        # Not a job parked on a wait: it waits for its signal, not for a time, and run now
        # its handler's wait would only park it again (drain would loop until max_jobs).
        rows = Job.objects.select_for_update(skip_locked=True).filter(state__in=states).exclude(
            state=JobState.SCHEDULED, waiting_for__isnull=False
        )
        if queues is not None:
            rows = rows.filter(queue__in=list(queues))
        due = list(rows.order_by("seq").values_list("seq", flat=True))
        if due:
            Job.objects.filter(seq__in=due).update(run_at=TxNow())
    if due:
        _promote_everything_due()
    return len(due)


def _promote_everything_due() -> None:
    # The reaper's own move, repeated until nothing due is left (it orders by
    # run_at, so rows already due before ours go first).
    while promote_due(PROMOTE_BATCH) == PROMOTE_BATCH:
        pass


def claim_job(job_id: Any, worker_id: str) -> Job | None:
    """Claim one job by its id for an inline run, as FETCH would; None if it is not waiting to run.

    A scheduled job is promoted first (inline mode ignores delays, as
    ojs-testing §5.2 says); pending and finished jobs are left alone.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(id=job_id).first()
        if job is None or job.state not in (JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE):
            return None
        if job.state != JobState.AVAILABLE:
            Job.objects.filter(seq=job.seq).update(run_at=TxNow())
            _promote_everything_due()
        job = Job.objects.select_for_update().annotate(db_now=TxNow()).get(seq=job.seq)
        if job.state != JobState.AVAILABLE:
            return None
        mark_claimed([job], job.db_now, worker_id, None)
    return job
