"""The transitions only time triggers: what ``manage.py ojs_reaper`` runs each tick, one function per duty.

Each function moves at most ``limit`` rows in one transaction, taking them
with ``FOR UPDATE SKIP LOCKED`` from a partial index, so several reapers
share the work without doing any row twice and none blocks a worker
(DESIGN invariant 6). Each returns how many rows it moved; the reaper calls
it again while a full batch comes back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q, Value

from ..conf import ojs_settings
from ..models import Event, Job, JobError, ReaperTick, Worker, Workflow, WorkflowNode
from ..protocol.failure import Failure
from ..protocol.states import WAITING, JobState, Move, sources, target
from ..protocol.workflows import DONE
from . import events, history, limits, maintenance_mode, partitions
from .clock import TxNow, db_now, restarted_within
from .durable import forget_steps
from .row_movement import retried_on_row_movement
from .settle import expire_rows, settle_rows
from .types import Settle
from .workers import recover_jobs


@retried_on_row_movement
def promote_due(limit: int) -> int:
    """scheduled/retryable -> available once their time has come; not in maintenance mode (ojs-admin-api §12.1)."""
    if maintenance_mode.current(fresh=True).enabled:
        return 0
    with transaction.atomic():
        due = list(
            Job.objects.select_for_update(skip_locked=True)
            .filter(state__in=sources(Move.PROMOTE), run_at__lte=TxNow())
            .order_by("run_at")
            .values_list("seq", flat=True)[:limit]
        )
        if due:
            now = db_now()
            promoted = partitions.live_jobs().filter(seq__in=due)  # live: never planned over history
            promoted.update(state=target(Move.PROMOTE), enqueued_at=now, run_at=None)
            events.record_for_jobs(
                "job.enqueued",
                due,
                now,
                lambda: (events.job_event("job.enqueued", job, now) for job in promoted.all()),
                live=True,
            )
    return len(due)


@retried_on_row_movement
def expire_overdue(limit: int) -> int:
    """Discard waiting jobs whose ``expires_at`` passed (ojs-core §5.2)."""
    with transaction.atomic():
        rows = _locked(state__in=WAITING, expires_at__lte=TxNow(), order="expires_at", limit=limit)
        return expire_rows(rows, rows[0].db_now) if rows else 0


@retried_on_row_movement
def requeue_lapsed(limit: int) -> int:
    """Active jobs whose visibility timeout passed without ACK or FAIL.

    ojs-worker-protocol §5.5: back to ``available`` with a
    ``visibility_timeout`` error, or ``discarded`` once the attempts
    (charged at claim) are exhausted, so a poison job cannot loop.
    Not while the database server has been up for less than a heartbeat
    timeout: heartbeats could not extend leases while it was down
    (``restarted_within``).
    """
    if restarted_within(ojs_settings.HEARTBEAT_TIMEOUT):
        return 0
    with transaction.atomic():
        rows = _locked(
            state=JobState.ACTIVE, lease_expires_at__lte=TxNow(), order="lease_expires_at", limit=limit
        )
        return settle_rows([(job, _lapsed(job), Settle.REQUEUE) for job in rows], rows[0].db_now) if rows else 0


@retried_on_row_movement
def fail_timed_out(limit: int) -> int:
    """Active jobs past their execution timeout fail with type ``timeout`` (ojs-timeouts §7.1).

    The server's deadline is ``started_at + timeout`` with no grace: the
    worker enforces its own grace period before that (docs/explanation/decisions.md).
    """
    with transaction.atomic():
        rows = _locked(state=JobState.ACTIVE, deadline_at__lte=TxNow(), order="deadline_at", limit=limit)
        if not rows:
            return 0
        now = rows[0].db_now
        return settle_rows([(job, _timed_out(job, now), Settle.POLICY) for job in rows], now)


def prune(limit: int) -> dict[str, int]:
    """Delete finished jobs and events past their retention (``OJS["RETENTION"]``).

    On a partitioned job table (``core/partitions.py``) whole day partitions go first, by
    DROP, and the coming days' are made; the DELETEs below then reach only completed and
    cancelled rows older than every day partition of their state (the DEFAULT partition's),
    and discarded jobs, plain discards and dead letters, each at its own retention.

    Each step is a transaction whose locks are waited for at most ``partitions.LOCK_TIMEOUT``
    (``partitions.bounded_locks``): a day partition an operator holds (``VACUUM FULL``) costs a step this pass,
    logged, not the reaper's other duties their turn.
    """
    retention = ojs_settings.RETENTION
    now = db_now()
    upkeep = partitions.maintain(now)
    day_starts = partitions.oldest_day_starts() if partitions.is_partitioned() else {}
    pruned = {"partitions_created": len(upkeep["created"]), "partitions_dropped": len(upkeep["dropped"]),
              **dict.fromkeys(JOB_KINDS, 0)}
    if day_starts is not None:
        # Else the partitions could not be read in time (logged): where the DELETEs may go is
        # unknown, and they would wait on that lock too. Jobs are the next pass's.
        pruned.update(_bounded("delete finished jobs", lambda: _prune_jobs(now, limit, day_starts)) or {})
    keep = retention.get("workflows", retention["completed"])
    for key, step in (
        ("events", lambda: _prune_events(now - dt.timedelta(seconds=retention["events"]), limit)),
        ("dead_workers", lambda: prune_dead_workers(limit)),
        ("rate_limit_starts", lambda: limits.prune_starts(now, limit)),
        ("workflows", lambda: _prune_workflows(now - dt.timedelta(seconds=keep), limit)),
    ):
        pruned[key] = _bounded(f"prune {key.replace('_', ' ')}", step) or 0
    return pruned


# What ``_prune_jobs`` counts, by kind.
JOB_KINDS = ("completed", "cancelled", "discarded", "dead_letter")


def _bounded(what: str, step: Any) -> Any:
    """``step()`` under ``partitions.bounded_locks``: its result, or None (logged) when a lock was
    not had in time. Its own transactions become savepoints."""
    with partitions.bounded_locks(what, subject="prune"):
        return step()
    return None


def _prune_jobs(now: dt.datetime, limit: int, day_starts: dict[str, dt.datetime]) -> dict[str, int]:
    """The DELETE part of ``prune``: finished jobs past their retention, up to ``limit`` of each kind."""
    retention = ojs_settings.RETENTION
    pruned: dict[str, int] = {}
    for state, key, dead_letter in (
        (JobState.COMPLETED, "completed", None),
        (JobState.CANCELLED, "cancelled", None),
        (JobState.DISCARDED, "discarded", False),
        (JobState.DISCARDED, "dead_letter", True),
    ):
        cutoff = now - dt.timedelta(seconds=retention[key])
        # The rest go with their partition, up to one partition's width past their retention;
        # a retention shorter than that width keeps the DELETE (those partitions go empty), and
        # so do discarded jobs, dead letters too: their partitions are wide (core/partitions.py
        # DISCARDED_MIN_DAYS), and each goes at its own "kept until", as every surface says.
        by_drop = dead_letter is None and retention[key] >= partitions.width_days(state.value) * 86400
        if state.value in day_starts and by_drop:
            cutoff = min(cutoff, day_starts[state.value])
        older = Job.objects.filter(state=state, finished_at__lt=cutoff)
        if dead_letter is not None:
            older = older.filter(dead_letter=dead_letter)
        pruned[key] = _delete_jobs(older.order_by("finished_at"), limit)
    pruned["dead_letter"] += _cap_dead_letter(retention["dead_letter_max_count"], limit)
    return pruned


def _cap_dead_letter(max_count: int, limit: int) -> int:
    """ojs-dead-letter §5.1: beyond ``max_count`` the oldest dead letters go first."""
    dead = Job.objects.filter(state=JobState.DISCARDED, dead_letter=True)
    excess = dead.count() - max_count
    if excess <= 0:
        return 0
    return _delete_jobs(dead.order_by("finished_at"), min(excess, limit))


@retried_on_row_movement
def _delete_jobs(queryset: Any, limit: int) -> int:
    """Delete up to ``limit`` jobs, their error history, their durable steps and their events.

    ``_raw_delete`` skips Django's collector, which would first load every
    related error row; the history and the events are deleted explicitly,
    in the same transaction.
    """
    with transaction.atomic():
        rows = list(queryset.select_for_update(skip_locked=True).values_list("seq", "id")[:limit])
        if not rows:
            return 0
        seqs = [seq for seq, _ in rows]
        JobError.objects.filter(job_id__in=seqs)._raw_delete(JobError.objects.db)
        forget_steps(seqs)
        events.forget_jobs([job_id for _, job_id in rows])
        return Job.objects.filter(seq__in=seqs)._raw_delete(Job.objects.db)


def _locked(*, order: str, limit: int, **conditions: Any) -> list[Any]:
    return list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(**conditions)
        .annotate(db_now=TxNow())
        .order_by(order)[:limit]
    )


@retried_on_row_movement
def reap_dead_workers(limit: int) -> int:
    """Declare workers silent past the heartbeat timeout dead; recover their jobs at once.

    ojs-worker-protocol §10.2: each job goes back to ``available`` (or is
    discarded when its attempts are exhausted; the attempt was charged at
    claim) with a ``worker_death`` error. The worker row stays, marked
    dead (see ``Worker.declared_dead_at``). A dead worker whose jobs
    could not all be recovered in one batch (too many, or some being
    settled right now) is taken again at the next tick until it holds
    none. Silence is not judged while the database server has been up
    for less than a heartbeat timeout (``restarted_within``).
    """
    timeout = ojs_settings.HEARTBEAT_TIMEOUT
    silent = Q(declared_dead_at__isnull=True, last_heartbeat_at__lt=TxNow() - Value(dt.timedelta(seconds=timeout)))
    if restarted_within(timeout):
        silent = Q(pk__in=[])
    holding = Exists(Job.objects.filter(state=JobState.ACTIVE, worker_id=OuterRef("id")))
    with transaction.atomic():
        workers = list(
            Worker.objects.alias(has_jobs=holding)
            .filter(silent | Q(declared_dead_at__isnull=False, has_jobs=True))
            .select_for_update(skip_locked=True)
            .order_by("last_heartbeat_at")[:limit]
        )
        if not workers:
            return 0
        now = db_now()
        newly_dead = [worker for worker in workers if worker.declared_dead_at is None]
        if newly_dead:
            Worker.objects.filter(id__in=[worker.id for worker in newly_dead]).update(
                declared_dead_at=now, last_declared_dead_at=now
            )
            events.record(events.worker_event("worker.stopped", w, now, reason="dead") for w in newly_dead)
        return recover_jobs(
            [worker.id for worker in workers],
            now,
            f"worker missed heartbeats for over {timeout}s and was declared dead",
            limit=limit,
        )


def prune_dead_workers(limit: int) -> int:
    """Delete rows of workers declared dead longer ago than ``RETENTION["dead_workers"]``."""
    keep = dt.timedelta(seconds=ojs_settings.RETENTION["dead_workers"])
    with transaction.atomic():
        ids = list(
            Worker.objects.filter(declared_dead_at__lt=TxNow() - Value(keep))
            .exclude(Exists(Job.objects.filter(state=JobState.ACTIVE, worker_id=OuterRef("id"))))
            .select_for_update(skip_locked=True)
            .values_list("id", flat=True)[:limit]
        )
        return Worker.objects.filter(id__in=ids).delete()[0] if ids else 0


def _lapsed(job: Any) -> Failure:
    holder = f" by worker {job.worker_id}" if job.worker_id else ""
    return Failure(
        type="visibility_timeout",
        message=f"the reservation{holder} expired without ACK or FAIL",
        retryable=True,
    )


def _timed_out(job: Any, now: dt.datetime) -> Failure:
    limit = job.timeout.total_seconds()
    elapsed = (now - job.started_at).total_seconds() if job.started_at else None
    return Failure(
        type="timeout",
        message=f"job execution exceeded its timeout of {limit:g} seconds",
        retryable=True,
        details={"timeout_kind": "execution", "limit_seconds": limit, "elapsed_seconds": elapsed},
    )


def _prune_events(before: dt.datetime, limit: int) -> int:
    """Delete the events written before ``before``, at most ``limit`` of each kind below.

    With ``OJS["EVENTS_KEPT_WITH_JOB"]`` (the default) a job's events go with
    the job (``_delete_jobs``), so here only events of no job (workers,
    queues, schedules: read on their own index, ``ojs_event_no_job``) and
    events whose job is gone by another way (deleted by hand, or before
    events went with their jobs). Without it, every stale event.

    The latter are read along the primary key, not by time: an event's ``seq``
    is taken as it is written and its ``time`` is its move's clock, at most that
    moment, so the lowest seqs hold the oldest events, and an index on ``time``
    (dropped in migration 0012: one more index entry per event, for this alone)
    is not needed. The window is bounded: a scan never walks the table looking
    for stale rows. An event stamped by a transaction that ran long may sit
    behind newer ones; it goes when they have gone -- never early, at worst late.
    """
    oldest = Event.objects.order_by("seq").values("seq")[:limit]
    stale = Event.objects.filter(seq__in=oldest, time__lt=before)
    if not ojs_settings.EVENTS_KEPT_WITH_JOB:
        return stale._raw_delete(Event.objects.db)
    no_job = Event.objects.filter(job_id__isnull=True).order_by("seq").values("seq")[:limit]
    pruned = Event.objects.filter(seq__in=no_job, time__lt=before)._raw_delete(Event.objects.db)
    orphans = stale.filter(job_id__isnull=False).exclude(Exists(Job.objects.filter(id=OuterRef("job_id"))))
    return pruned + orphans._raw_delete(Event.objects.db)


def _prune_workflows(before: dt.datetime, limit: int) -> int:
    """Delete workflows that ended before ``before``, their nodes first (no collector)."""
    with transaction.atomic():
        ids = list(
            Workflow.objects.select_for_update(skip_locked=True)
            .filter(state__in=sorted(DONE), finished_at__lt=before)
            .order_by("finished_at")
            .values_list("id", flat=True)[:limit]
        )
        if not ids:
            return 0
        WorkflowNode.objects.filter(workflow_id__in=ids)._raw_delete(WorkflowNode.objects.db)
        return Workflow.objects.filter(id__in=ids)._raw_delete(Workflow.objects.db)


def record_history(limit: int) -> int:
    """Count the minutes that closed into the statistics history, sum finished hours, prune old buckets.

    ``core/history.py`` says what is counted and from where. One reaper at a
    time: the history's cursor row is taken with SKIP LOCKED, so another
    reaper skips the duty this tick. At most ``limit`` minutes per call (a
    reaper back after a long stop catches up over a few); returns how many
    minutes it counted.
    """
    with transaction.atomic():
        now = db_now()
        cursor = history.cursor_for_update(now)
        if cursor is None:
            return 0
        history.add_mark(cursor, now)
        counted = history.count_minutes(cursor, now, limit)
        history.roll_up_hours(cursor)
        history.prune(now)
        cursor.save()
    return counted


# A reaper's row is pruned once it has been silent this long (by the reapers still ticking).
REAPER_ROW_RETENTION = dt.timedelta(days=1)
# How often a reaper records that it is ticking (its "tick" loop); the overview says
# "no reaper" once TICKS_MISSED of these have passed without one.
TICK_RECORD_INTERVAL = 5.0
TICKS_MISSED = 3


def record_reaper_tick(reaper_id: str, hostname: str, pid: int) -> int:
    """Record that the reaper ``reaper_id`` is ticking (``ReaperTick``), by the database clock.

    What the overview's "no reaper for N s" reads; rows of reapers silent for
    ``REAPER_ROW_RETENTION`` are deleted on the way. Returns 0: it moves no job.
    """
    with transaction.atomic():
        now = db_now()
        ReaperTick.objects.update_or_create(
            id=reaper_id,
            defaults={"last_tick_at": now, "hostname": hostname, "pid": pid},
            create_defaults={"last_tick_at": now, "started_at": now, "hostname": hostname, "pid": pid},
        )
        ReaperTick.objects.filter(last_tick_at__lt=now - REAPER_ROW_RETENTION).delete()
    return 0


def reapers_ticking(now: dt.datetime | None = None) -> int:
    """How many reapers recorded a tick within ``TICKS_MISSED`` tick intervals, by the database clock."""
    since = (now or db_now()) - dt.timedelta(seconds=TICKS_MISSED * TICK_RECORD_INTERVAL)
    return ReaperTick.objects.filter(last_tick_at__gte=since).count()


def last_reaper_tick() -> dt.datetime | None:
    """When any reaper last ticked; None if none ever did (or all rows were pruned)."""
    return ReaperTick.objects.aggregate(last=Max("last_tick_at"))["last"]
