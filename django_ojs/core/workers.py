"""Workers: registration, heartbeats (BEAT), directives, and the recovery of a worker's jobs.

Lock order (DESIGN invariant 11). A transaction that touches a worker row
and job rows takes the worker row first, then the job rows, and takes job
rows either in ``seq`` order or with SKIP LOCKED:

- FETCH holds the fetching worker's row ``FOR KEY SHARE`` (``core/claimant.py``)
  while it claims, so the reaper cannot declare the worker dead in the
  middle of a claim, and a worker already declared dead is revived before
  it claims (invariant 13);
- BEAT locks its own row ``FOR NO KEY UPDATE`` (which a claim's KEY SHARE
  does not block) and extends leases only on job rows nobody else holds
  (SKIP LOCKED): a heartbeat never waits on a job row, so a worker writing
  its ACKs and FAILs can never deadlock with its own heartbeat. A row it
  skips is being settled or recovered right now; its lease is extended at
  the next beat if it is still held;
- the reaper (``core/maintenance.py``) takes worker rows ``FOR UPDATE SKIP LOCKED`` and their jobs
  with SKIP LOCKED: it never waits at all.

A worker exists for the reaper once it has registered or sent a heartbeat;
a client that only FETCHes is protected by the visibility timeout alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Value

from ..conf import ojs_settings
from ..models import Job, Worker
from ..protocol.failure import Failure
from ..protocol.states import JobState, WorkerState
from . import events
from .clock import TxNow, db_now
from .row_movement import retried_on_row_movement
from .settle import settle_rows
from .types import BeatReply, HeldJob, Settle, WorkerInfo

# What every surface says a worker is (the admin, manage.py ojs workers, the admin API,
# the metrics), derived from facts by ``shown_state``:
RUNNING = "running"  # heartbeating and fetching
QUIET = "quiet"  # heartbeating, not fetching (SIGTSTP or an operator's quiet): finishing what it holds
DRAINING = "draining"  # shutting down (SIGTERM, a terminate directive): finishing its jobs, then exiting
DEAD = "dead"  # declared dead by the reaper, or silent past HEARTBEAT_TIMEOUT; its jobs are (or will be) recovered
SHOWN_STATES = (RUNNING, QUIET, DRAINING, DEAD)


def shown_state(worker: Worker, now: dt.datetime) -> str:
    """The state of ``worker`` at ``now`` (the database clock), from facts, not from its last word.

    Dead once the reaper declared it so, or once it has been silent past
    ``HEARTBEAT_TIMEOUT`` (ojs-admin-api's "stale"), whatever its last
    heartbeat said; draining while it reports ``terminate``; otherwise what it
    reported, running or quiet. A worker that stopped cleanly deregistered:
    its row is gone.
    """
    silent = now - worker.last_heartbeat_at > dt.timedelta(seconds=ojs_settings.HEARTBEAT_TIMEOUT)
    if worker.declared_dead_at is not None or silent:
        return DEAD
    if worker.state == WorkerState.TERMINATE:
        return DRAINING
    return QUIET if worker.state == WorkerState.QUIET else RUNNING


def overrun_shown(worker: Worker, now: dt.datetime) -> int:
    """The slots of ``worker`` held by handlers whose job ended, as every surface says it: its last
    heartbeat's count while it lives; none once dead (its process, and their threads, are gone)."""
    return 0 if shown_state(worker, now) == DEAD else worker.overrun_handlers


@dataclass(frozen=True)
class Deaths:
    """Workers the reaper declared dead in a window, and how many of those came back since."""

    declared: int
    came_back: int


# "Declared dead in the last hour": the overview's note and the metrics' gauge.
RECENT_DEATHS = dt.timedelta(hours=1)


def recent_deaths(now: dt.datetime) -> Deaths:
    """The workers last declared dead within ``RECENT_DEATHS`` of ``now``, from ``last_declared_dead_at``:
    one that was frozen and came back counts (it was dead, its jobs given to others), once however often
    it died. A worker whose row is gone (it stopped cleanly since, or was deregistered) is not counted."""
    rows = Worker.objects.filter(last_declared_dead_at__gte=now - RECENT_DEATHS).aggregate(
        declared=Count("pk"), came_back=Count("pk", filter=Q(declared_dead_at__isnull=True))
    )
    return Deaths(rows["declared"], rows["came_back"])


def held_counts(worker_ids: Sequence[str]) -> dict[str, int]:
    """The jobs each worker holds now: rows ``active`` and claimed by it (the partial index of held
    jobs), not the number its last heartbeat reported -- a dead worker's jobs, once recovered, are 0."""
    rows = (
        Job.objects.filter(state=JobState.ACTIVE, worker_id__in=list(worker_ids))
        .values_list("worker_id").annotate(n=Count("seq")).order_by()
    )
    return {worker_id: n for worker_id, n in rows}


def register(worker_id: str, info: WorkerInfo = WorkerInfo()) -> Worker:
    """Create or replace the worker's row (ojs-worker-protocol §3.1); revives a dead one."""
    with transaction.atomic():
        now = db_now()
        worker, created = Worker.objects.update_or_create(
            id=worker_id,
            defaults={
                **info.fields(),
                "state": WorkerState.RUNNING,
                "last_heartbeat_at": now,
                "declared_dead_at": None,
            },
            create_defaults={
                **info.fields(),
                "state": WorkerState.RUNNING,
                "directive": WorkerState.RUNNING,
                "registered_at": now,
                "last_heartbeat_at": now,
            },
        )
        if created:
            events.record([events.worker_event("worker.started", worker, now)])
    return worker


@retried_on_row_movement
def beat(
    worker_id: str,
    *,
    state: WorkerState | None = None,
    held: Sequence[HeldJob] = (),
    visibility_timeout: dt.timedelta | None = None,
    info: WorkerInfo = WorkerInfo(),
) -> BeatReply:
    """Record a heartbeat, extend the leases of the attempts it names, answer the directive."""
    held = list(dict.fromkeys(held))
    with transaction.atomic():
        found = Worker.objects.select_for_update(no_key=True).annotate(db_now=TxNow()).filter(id=worker_id).first()
        now = found.db_now if found else db_now()
        revived = False
        worker = _create_on_beat(worker_id, info, now) if found is None else found
        if found is not None and worker.declared_dead_at is not None:
            revived = True
            worker.declared_dead_at = None
            events.record([events.worker_event("worker.started", worker, now, revived=True)])
        worker.last_heartbeat_at = now
        worker.state = state or worker.state or WorkerState.RUNNING
        worker.active_job_ids = list(dict.fromkeys(job.job_id for job in held))
        worker.active_jobs = len(worker.active_job_ids)
        for name, value in info.fields().items():
            setattr(worker, name, value)
        worker.save()
        extended, cancelled, lost, hints = _extend_leases(worker_id, held, now, visibility_timeout)
    directive = WorkerState(worker.directive)
    if ojs_settings.TEST_HOOKS and hints:
        directive = hints[0]
    return BeatReply(
        directive=directive,
        server_time=now,
        jobs_extended=extended,
        jobs_cancelled=cancelled,
        jobs_lost=lost,
        revived=revived,
        directive_set_at=worker.directive_set_at,
    )


def _create_on_beat(worker_id: str, info: WorkerInfo, now: dt.datetime) -> Worker:
    """A heartbeat from an unknown worker registers it (ojs-worker-protocol §3.1 is a SHOULD)."""
    try:
        with transaction.atomic():
            worker = Worker.objects.create(
                id=worker_id,
                state=WorkerState.RUNNING,
                registered_at=now,
                last_heartbeat_at=now,
                **info.fields(),
            )
    except IntegrityError:
        # Two first heartbeats raced; the other one created the row.
        return Worker.objects.select_for_update(no_key=True).get(id=worker_id)
    events.record([events.worker_event("worker.started", worker, now)])
    return worker


def deregister(worker_id: str) -> bool:
    """Remove a worker that shut down (§3.4); jobs it still holds are recovered now."""
    with transaction.atomic():
        worker = Worker.objects.select_for_update().filter(id=worker_id).first()
        if worker is None:
            return False
        now = db_now()
        recover_jobs([worker_id], now, "worker deregistered while holding the job", wait=True)
        worker.delete()
        events.record([events.worker_event("worker.stopped", worker, now, reason="deregistered")])
    return True


def set_directive(worker_ids: Iterable[str], directive: WorkerState) -> int:
    """An operator asks workers to go quiet, terminate, or run again (next BEAT)."""
    return Worker.objects.filter(id__in=list(worker_ids)).update(
        directive=WorkerState(directive), directive_set_at=TxNow()
    )


def recover_jobs(
    worker_ids: list[str], now: dt.datetime, message: str, *, limit: int | None = None, wait: bool = False
) -> int:
    """Return the active jobs these workers hold to the queue (``worker_death``).

    In ``seq`` order, skipping rows another transaction holds unless ``wait``
    (deregistration, when the worker's own transactions are over).
    """
    # The reservation owner covers the last reported active_job_ids and any
    # job claimed after that heartbeat.
    held = Job.objects.select_for_update(skip_locked=not wait).filter(
        state=JobState.ACTIVE, worker_id__in=worker_ids
    ).order_by("seq")
    jobs = list(held[:limit] if limit else held)
    failure = Failure(type="worker_death", message=message, retryable=True)
    return settle_rows([(job, failure, Settle.REQUEUE) for job in jobs], now)


def _extend_leases(
    worker_id: str, held: list[HeldJob], now: dt.datetime, visibility_timeout: dt.timedelta | None
) -> tuple[list[HeldJob], list[HeldJob], list[HeldJob], list[WorkerState]]:
    """Extend the leases of the attempts this worker still holds; sort the rest.

    Returns (extended, cancelled, lost, directive hints). Rows are taken
    with SKIP LOCKED: a heartbeat never waits on a job row (module
    docstring). Unowned jobs (fetched without a worker id) are adopted by
    the worker that reports them, so its death recovers them too.
    """
    extended: list[HeldJob] = []
    cancelled: list[HeldJob] = []
    lost: list[HeldJob] = []
    hints: list[WorkerState] = []
    if not held:
        return extended, cancelled, lost, hints
    ids = list(dict.fromkeys(job.job_id for job in held))
    columns = ["seq", "id", "attempt", "worker_id", "state"] + (["meta"] if ojs_settings.TEST_HOOKS else [])
    # Matched on the unique id index; state, owner and attempt are checked
    # here, not in SQL, so the planner has one index to choose: a state
    # condition let it walk an index of states whose statistics predate the
    # backlog (every finished job, per heartbeat; tests/core/test_query_plans.py).
    lockable = {
        str(row[1]): row
        for row in Job.objects.select_for_update(skip_locked=True)
        .filter(id__in=ids)
        .order_by("seq")
        .values_list(*columns)
        if row[4] == JobState.ACTIVE
    }
    ours = []
    for job in held:
        row = lockable.get(job.job_id)
        if row and row[3] in (None, worker_id) and job.attempt in (None, row[2]):
            ours.append(row[0])
            extended.append(job)
            hint = (row[5] or {}).get("test_directive") if len(row) > 5 else None
            if isinstance(hint, str) and hint in WorkerState._value2member_map_:
                hints.append(WorkerState(hint))
    if ours:
        lease = Value(visibility_timeout) if visibility_timeout else F("visibility_timeout")
        Job.objects.filter(seq__in=ours).update(lease_expires_at=Value(now) + lease, worker_id=worker_id)
    rest = [job for job in held if job not in extended]
    if rest:
        now_rows = {
            str(job_id): (state, attempt, owner)
            for job_id, state, attempt, owner in Job.objects.filter(
                id__in=[job.job_id for job in rest]
            ).values_list("id", "state", "attempt", "worker_id")
        }
        for job in rest:
            state, attempt, owner = now_rows.get(job.job_id, (None, None, None))
            same_attempt = job.attempt in (None, attempt)
            if state == JobState.CANCELLED and same_attempt:
                cancelled.append(job)
            elif state == JobState.ACTIVE and same_attempt and owner in (None, worker_id):
                continue  # busy: being settled (or recovered) right now; neither kept nor lost yet
            else:
                lost.append(job)
    return extended, cancelled, lost, hints
