"""Workers: registration, heartbeats (BEAT), directives, and dead-worker recovery.

Lock order (DESIGN invariant 11). A transaction that touches a worker row
and job rows takes the worker row first, then the job rows, and takes job
rows either in ``seq`` order or with SKIP LOCKED:

- FETCH holds the fetching worker's row ``FOR KEY SHARE`` (``hold_claimant``)
  while it claims, so the reaper cannot declare the worker dead in the
  middle of a claim, and a worker already declared dead is revived before
  it claims (invariant 13);
- BEAT locks its own row ``FOR NO KEY UPDATE`` (which a claim's KEY SHARE
  does not block) and extends leases only on job rows nobody else holds
  (SKIP LOCKED): a heartbeat never waits on a job row, so a worker writing
  its ACKs and FAILs can never deadlock with its own heartbeat. A row it
  skips is being settled or recovered right now; its lease is extended at
  the next beat if it is still held;
- the reaper takes worker rows ``FOR UPDATE SKIP LOCKED`` and their jobs
  with SKIP LOCKED: it never waits at all.

A worker exists for the reaper once it has registered or sent a heartbeat;
a client that only FETCHes is protected by the visibility timeout alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Exists, F, OuterRef, Q, Value

from ..conf import ojs_settings
from ..failure import Failure
from ..states import JobState, WorkerState
from . import events, prepared
from .clock import TxNow, db_now, restarted_within
from .outcome import Settle, settle_rows

if TYPE_CHECKING:
    from ..models import Worker


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker says about itself (ojs-worker-protocol §3.1); None = not told."""

    hostname: str | None = None
    pid: int | None = None
    queues: list[str] | None = None
    concurrency: int | None = None
    labels: list[str] | None = None
    started_at: dt.datetime | None = None

    def fields(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class HeldJob:
    """One attempt of a job, as a worker holds it (DESIGN invariant 12).

    ``attempt`` is None when the worker names the job only (the binding's
    heartbeat sends ids): the job's current attempt is meant.
    """

    job_id: str
    attempt: int | None = None


@dataclass(frozen=True)
class BeatReply:
    directive: WorkerState
    server_time: dt.datetime
    # Each list names the attempts as the heartbeat named them.
    jobs_extended: list[HeldJob] = field(default_factory=list)
    # Attempts that were cancelled meanwhile: the worker should stop them.
    jobs_cancelled: list[HeldJob] = field(default_factory=list)
    # Attempts the worker no longer holds (recovered, finished, or claimed
    # again by another worker or as a later attempt): finishing them will be
    # refused. A held job whose row was busy (being settled) is in no list.
    jobs_lost: list[HeldJob] = field(default_factory=list)
    # The worker had been declared dead and this heartbeat revived it.
    revived: bool = False


class WorkerManager(models.Manager):
    def register(self, worker_id: str, info: WorkerInfo = WorkerInfo()) -> Worker:
        """Create or replace the worker's row (ojs-worker-protocol §3.1); revives a dead one."""
        with transaction.atomic():
            now = db_now()
            worker, created = self.update_or_create(
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

    def beat(
        self,
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
            worker = self.select_for_update(no_key=True).annotate(db_now=TxNow()).filter(id=worker_id).first()
            now = worker.db_now if worker else db_now()
            revived = False
            if worker is None:
                worker = self._create_on_beat(worker_id, info, now)
            elif worker.declared_dead_at is not None:
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
        )

    def _create_on_beat(self, worker_id: str, info: WorkerInfo, now: dt.datetime) -> Worker:
        """A heartbeat from an unknown worker registers it (ojs-worker-protocol §3.1 is a SHOULD)."""
        try:
            with transaction.atomic():
                worker = self.create(
                    id=worker_id,
                    state=WorkerState.RUNNING,
                    registered_at=now,
                    last_heartbeat_at=now,
                    **info.fields(),
                )
        except IntegrityError:
            # Two first heartbeats raced; the other one created the row.
            return self.select_for_update(no_key=True).get(id=worker_id)
        events.record([events.worker_event("worker.started", worker, now)])
        return worker

    def deregister(self, worker_id: str) -> bool:
        """Remove a worker that shut down (§3.4); jobs it still holds are recovered now."""
        with transaction.atomic():
            worker = self.select_for_update().filter(id=worker_id).first()
            if worker is None:
                return False
            now = db_now()
            _recover_jobs([worker_id], now, "worker deregistered while holding the job", wait=True)
            worker.delete()
            events.record([events.worker_event("worker.stopped", worker, now, reason="deregistered")])
        return True

    def set_directive(self, worker_ids: Iterable[str], directive: WorkerState) -> int:
        """An operator asks workers to go quiet, terminate, or run again (next BEAT)."""
        return self.filter(id__in=list(worker_ids)).update(
            directive=WorkerState(directive), directive_set_at=TxNow()
        )

    def reap_dead(self, limit: int) -> int:
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
        from ..models import Job

        timeout = ojs_settings.HEARTBEAT_TIMEOUT
        silent = Q(declared_dead_at__isnull=True, last_heartbeat_at__lt=TxNow() - Value(dt.timedelta(seconds=timeout)))
        if restarted_within(timeout):
            silent = Q(pk__in=[])
        holding = Exists(Job.objects.filter(state=JobState.ACTIVE, worker_id=OuterRef("id")))
        with transaction.atomic():
            workers = list(
                self.alias(has_jobs=holding)
                .filter(silent | Q(declared_dead_at__isnull=False, has_jobs=True))
                .select_for_update(skip_locked=True)
                .order_by("last_heartbeat_at")[:limit]
            )
            if not workers:
                return 0
            now = db_now()
            newly_dead = [worker for worker in workers if worker.declared_dead_at is None]
            if newly_dead:
                self.filter(id__in=[worker.id for worker in newly_dead]).update(declared_dead_at=now)
                events.record(events.worker_event("worker.stopped", w, now, reason="dead") for w in newly_dead)
            return _recover_jobs(
                [worker.id for worker in workers],
                now,
                f"worker missed heartbeats for over {timeout}s and was declared dead",
                limit=limit,
            )

    def prune_dead(self, limit: int) -> int:
        """Delete rows of workers declared dead longer ago than ``RETENTION["dead_workers"]``."""
        from ..models import Job

        keep = dt.timedelta(seconds=ojs_settings.RETENTION["dead_workers"])
        with transaction.atomic():
            ids = list(
                self.filter(declared_dead_at__lt=TxNow() - Value(keep))
                .exclude(Exists(Job.objects.filter(state=JobState.ACTIVE, worker_id=OuterRef("id"))))
                .select_for_update(skip_locked=True)
                .values_list("id", flat=True)[:limit]
            )
            return self.filter(id__in=ids).delete()[0] if ids else 0


def hold_claimant(worker_id: str) -> None:
    """Make sure a worker that is claiming jobs is one the reaper will watch.

    Called first in FETCH's transaction. Locks the worker's row ``FOR KEY
    SHARE`` until the claim commits, so the reaper (``FOR UPDATE SKIP
    LOCKED``) cannot declare it dead halfway through; a heartbeat's ``FOR NO
    KEY UPDATE`` is not blocked. A worker already declared dead -- frozen,
    or cut off from the database for longer than the heartbeat timeout --
    is revived with a fresh heartbeat time: whatever it claims now is
    recovered as quickly as its death was if it dies again (DESIGN invariant
    13). An id the store has never seen (a client that only FETCHes) is left
    alone: the visibility timeout protects its jobs.
    """
    from ..models import Worker

    table = connection.ops.quote_name(Worker._meta.db_table)
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    with prepared.cursor(connection) as cursor:
        cursor.execute(f"SELECT declared_dead_at FROM {table} WHERE id = %s{lock}", [worker_id])
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return
    now = db_now()
    Worker.objects.filter(id=worker_id).update(declared_dead_at=None, last_heartbeat_at=now)
    worker = Worker.objects.get(id=worker_id)
    events.record([events.worker_event("worker.started", worker, now, revived=True)])


def _recover_jobs(
    worker_ids: list[str], now: dt.datetime, message: str, *, limit: int | None = None, wait: bool = False
) -> int:
    """Return the active jobs these workers hold to the queue (``worker_death``).

    In ``seq`` order, skipping rows another transaction holds unless ``wait``
    (deregistration, when the worker's own transactions are over).
    """
    from ..models import Job

    # The reservation owner covers the last reported active_job_ids and any
    # job claimed after that heartbeat.
    jobs = Job.objects.select_for_update(skip_locked=not wait).filter(
        state=JobState.ACTIVE, worker_id__in=worker_ids
    ).order_by("seq")
    jobs = list(jobs[:limit] if limit else jobs)
    failure = Failure(type="worker_death", message=message, retryable=True)
    return settle_rows(Job.objects, [(job, failure, Settle.REQUEUE) for job in jobs], now)


def _extend_leases(
    worker_id: str, held: list[HeldJob], now: dt.datetime, visibility_timeout: dt.timedelta | None
) -> tuple[list[HeldJob], list[HeldJob], list[HeldJob], list[WorkerState]]:
    """Extend the leases of the attempts this worker still holds; sort the rest.

    Returns (extended, cancelled, lost, directive hints). Rows are taken
    with SKIP LOCKED: a heartbeat never waits on a job row (module
    docstring). Unowned jobs (fetched without a worker id) are adopted by
    the worker that reports them, so its death recovers them too.
    """
    from ..models import Job

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
