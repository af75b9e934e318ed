"""FETCH: claim available jobs for a worker (ojs-core §7.2, ojs-worker-protocol §6).

One transaction. The fetching worker's row is held first (``hold_claimant``:
the reaper cannot declare it dead mid-claim, and a worker already declared
dead is revived before it claims). Then, for each requested queue in the
order given, the next jobs are locked with ``SELECT ... FOR UPDATE SKIP
LOCKED`` (priority high to low, then insertion order) from the partial
index of available jobs, and marked active in one UPDATE. A queue is
probed only while the claim is not yet full; when the first queue does not
fill it, the engine may say which of the other queues have work
(``Engine.queues_with_work``), so a worker listening on a thousand mostly
empty queues pays two probes, not a thousand. Jobs whose ``expires_at`` has
passed are discarded on the way, never run. Rows whose rate or concurrency
limit is reached are held back (``core/limits.py``): they stay available
and the probe goes on past them. ``types`` narrows the claim to jobs of those
types: the in-process worker names the types it has handlers for, so a job
no handler of it can run is never claimed by it and waits, ``available`` at
attempt 0, for a worker that can (an HTTP worker names no types: any job of
its queues).

A fair queue (its configuration names a ``fairness_key``) is claimed in
weighted round-robin across the key's values (``core/fairness.py``); on
PostgreSQL in one statement (``pg/fair_claim.py``), which writes the values'
turns itself when it is the claim's only queue; otherwise they are written
last, after every queue of the claim.

The PostgreSQL engine claims a queue without a rate or concurrency limit in
one statement (``Engine.claim_queue``: hold, lock, activate, record); the
stepwise claim below (``claim_from``) takes over when that statement finds
a dead claimant, a rate-keyed or an expired candidate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db import connection, transaction
from django.db.models import BooleanField, Case, Exists, F, QuerySet, Value, When
from django.db.models.expressions import RawSQL

from ..models import Job, Queue
from ..protocol.states import JobState, Move, target
from . import events, fairness, limits, maintenance_mode
from .claimant import hold_claimant
from .clock import TxNow
from .engine import current as current_engine
from .pg.claim import of_types_filter
from .queue_settings import settings_of
from .row_movement import retried_on_row_movement
from .settle import expire_rows
from .types import LimitReport


@retried_on_row_movement
def fetch(
    queues: Sequence[str],
    *,
    count: int = 1,
    worker_id: str | None = None,
    visibility_timeout: dt.timedelta | None = None,
    limit_report: LimitReport | None = None,
    types: Sequence[str] | None = None,
) -> list[Job]:
    """Claim up to ``count`` jobs (of ``types`` only, when given); an empty list when there is no work.

    ``visibility_timeout`` overrides each job's own reservation period.
    Paused queues yield nothing, and nothing is claimed in maintenance mode
    (``core/maintenance_mode.py``). ``limit_report`` learns which rate or
    concurrency limit held jobs back, if one did.
    """
    if count < 1 or not maintenance_mode.handing_out():
        return []
    if len(queues) == 1 and not connection.in_atomic_block:
        # One statement is a transaction of its own: no BEGIN, no COMMIT.
        # It claims all it returns or, when it has something to leave to
        # the stepwise path, nothing at all; that path then starts afresh.
        outcome = current_engine().claim_queue(
            queues[0], count, worker_id, visibility_timeout, hold=bool(worker_id), types=types
        )
        if outcome is not None and outcome.alive and outcome.plain:
            return outcome.jobs
    with transaction.atomic():
        return claim(queues, count, worker_id, visibility_timeout, limit_report, hold=bool(worker_id), types=types)


def claim(
    queues: Sequence[str],
    count: int,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
    limit_report: LimitReport | None = None,
    *,
    hold: bool = False,
    types: Sequence[str] | None = None,
) -> list[Job]:
    """Claim from ``queues`` in order, inside the caller's transaction;
    ``hold``: the worker's row is not held yet (``hold_claimant``); ``types``: only jobs of these."""
    engine = current_engine()
    claimed: list[Job] = []
    pending = list(dict.fromkeys(queues))
    narrowed = False
    turns = fairness.Turns()
    # A claim of several queues writes every fair queue's turns at its end, in one order; of one, its
    # one-statement claim writes them itself (pg/fair_claim.py).
    gathered = turns if len(pending) > 1 else None
    while pending and len(claimed) < count:
        queue, wanted = pending.pop(0), count - len(claimed)
        outcome = engine.claim_queue(queue, wanted, worker_id, visibility_timeout, hold=hold, types=types,
                                     turns=gathered)
        if outcome is not None and not outcome.alive:
            # Revived first, then claimed like any other worker.
            hold_claimant(worker_id)
            outcome = engine.claim_queue(queue, wanted, worker_id, visibility_timeout, hold=False, types=types,
                                         turns=gathered)
        if outcome is None:
            if hold:
                hold_claimant(worker_id)
            claimed.extend(claim_from(queue, wanted, worker_id, visibility_timeout, limit_report, types, turns))
        else:
            claimed.extend(outcome.jobs)
            if not outcome.plain:
                claimed.extend(claim_from(queue, wanted, worker_id, visibility_timeout, limit_report, types, turns))
        hold = False
        if len(claimed) < count and pending and not narrowed:
            pending = engine.queues_with_work(pending, types)
            narrowed = True
    if hold:
        hold_claimant(worker_id)  # no queue to claim from: revived all the same
    turns.write()
    return claimed


def claim_from(
    queue: str,
    count: int,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
    limit_report: LimitReport | None = None,
    types: Sequence[str] | None = None,
    turns: fairness.Turns | None = None,
) -> list[Job]:
    """The stepwise claim of one queue: lock candidates (round-robin across a fair queue's values),
    expire, admit under limits, activate; ``turns`` gathers the values served (written here when None)."""
    configured = settings_of(queue)
    fair_path = configured.fairness_key
    if fair_path is not None:
        fairness.mend(queue, fair_path, configured.changed_at)
    # Uncorrelated on purpose: PostgreSQL checks it once (a one-time
    # filter) and keeps the index scan. Correlated on job.queue, it
    # became an anti-join that read and sorted the whole backlog.
    paused = Exists(Queue.objects.filter(name=queue, paused=True))
    available = Job.objects.filter(state=JobState.AVAILABLE, queue=queue)
    if types is not None:
        available = of_types(available, types)
    claimed: list[Job] = []
    held = limits.Held()
    own_turns = turns is None
    turns = fairness.Turns() if turns is None else turns
    while len(claimed) < count:
        claimable = held.exclude(available.select_for_update(skip_locked=True).exclude(paused)).annotate(db_now=TxNow())
        if fair_path is None:
            rows = list(claimable.order_by("-priority", "seq")[: count - len(claimed)])
        else:
            rows = fairness.candidates(queue, claimable, count - len(claimed))
        if not rows:
            break
        now = rows[0].db_now
        expired = [job for job in rows if job.expires_at is not None and job.expires_at <= now]
        if expired:
            expire_rows(expired, now)
        fresh = [job for job in rows if job.expires_at is None or job.expires_at > now]
        # Rate and concurrency limits (core/limits.py): rows held back stay available.
        admission = limits.admit(queue, fresh, now, limit_report)
        mark_claimed(admission.admitted, now, worker_id, visibility_timeout)
        claimed.extend(admission.admitted)
        turns.add(admission.admitted, now)
        if not expired and not held.add(admission):
            break
    if own_turns:
        turns.write()
    return claimed


def of_types(jobs: QuerySet[Job], types: Sequence[str]) -> QuerySet[Job]:
    """``jobs`` of these types, as a filter on the rows the index of available jobs yields.

    On PostgreSQL not ``type IN (...)``, which the planner may answer from the index of
    types when the statistics call a type rare, reading every job of it ever run
    (``pg/claim.of_types_filter`` says why); elsewhere the plain filter.
    """
    if connection.vendor != "postgresql":
        return jobs.filter(type__in=list(types))
    column = f"{connection.ops.quote_name(Job._meta.db_table)}.{connection.ops.quote_name('type')}"
    return jobs.filter(RawSQL(of_types_filter(column, "%s"), [list(types)], output_field=BooleanField()))


def mark_claimed(
    jobs: list[Job],
    now: dt.datetime,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
) -> None:
    """Mark locked jobs active in one statement, and mirror it on the objects."""
    if not jobs:
        return
    lease = Value(visibility_timeout) if visibility_timeout is not None else F("visibility_timeout")
    Job.objects.filter(seq__in=[job.seq for job in jobs]).update(
        state=target(Move.CLAIM),
        attempt=F("attempt") + 1,
        started_at=now,
        worker_id=worker_id,
        lease_expires_at=Value(now) + lease,
        deadline_at=Case(When(timeout__isnull=False, then=Value(now) + F("timeout")), default=None),
    )
    for job in jobs:
        job.state = target(Move.CLAIM)
        job.attempt += 1
        job.started_at = now
        job.worker_id = worker_id
        job.lease_expires_at = now + (visibility_timeout or job.visibility_timeout)
        job.deadline_at = now + job.timeout if job.timeout else None
    events.record_for_jobs(
        "job.started",
        [job.seq for job in jobs],
        now,
        lambda: (events.job_event("job.started", job, now, worker_id=worker_id) for job in jobs),
        data={"worker_id": worker_id},
        live=True,
    )
