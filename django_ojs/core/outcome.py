"""How an attempt ends: ACK, FAIL, and the server-side failures the reaper decides.

ACK is one conditional UPDATE whose WHERE clause is the whole check (state
``active``, and the reservation when the caller names one): there is no
window between check and write in which a reaped job could be completed by
its old worker (DESIGN invariant 1). FAIL needs the retry policy to decide,
so it locks the row (``SELECT ... FOR UPDATE``), decides, and writes before
the lock is released.

``settle_many`` writes a worker's finished attempts -- completions and
failures -- in one transaction that first locks every row of the batch in
``seq`` order (DESIGN invariant 11): two such batches, or a batch and a
reaper, can never lock the same rows in opposite orders.

``settle_failure`` is the one place that turns a failure into a new state;
FAIL, visibility expiry, execution timeouts and dead-worker recovery all use
it, so each records its error in the history and charges attempts the same
way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import Case, JSONField, Q, Value, When

from ..durations import format_timestamp, to_millis
from ..errors import InvalidTransition, NotFound
from ..failure import Failure
from ..retry import RetryPolicy, decide
from ..states import JobState, Move, sources, target
from . import events, fastack
from .clock import TxNow
from .workflows import advance as advance_workflows
from .workflows import workflow_step

if TYPE_CHECKING:
    from ..models import Job, JobError

# Every column a failure may change; bulk writes list them once.
FAILURE_FIELDS = [
    "state", "releases", "worker_id", "lease_expires_at", "deadline_at", "started_at",
    "enqueued_at", "run_at", "retry_delay_ms", "completed_at", "finished_at",
    "dead_letter", "error",
]


class Settle(Enum):
    """How a failure is settled."""

    POLICY = "policy"  # the retry policy decides: retryable with backoff, or discarded
    REQUEUE = "requeue"  # back to available at once unless attempts are exhausted
    RELEASE = "release"  # back to available, the attempt not charged ("requeue": true)


@dataclass(frozen=True)
class Lease:
    """Who may settle an active job: a worker id and/or the attempt it claimed.

    ``None`` parts are not checked, so a client that sends no worker id (the
    official SDKs do not) can still ACK; a worker id only conflicts with a
    claim that recorded a different one (DESIGN invariant 3).
    """

    worker_id: str | None = None
    attempt: int | None = None

    def q(self) -> Q:
        guard = Q()
        if self.worker_id:
            guard &= Q(worker_id=self.worker_id) | Q(worker_id__isnull=True)
        if self.attempt is not None:
            guard &= Q(attempt=self.attempt)
        return guard

    def holds(self, job: Job) -> bool:
        return (not self.worker_id or job.worker_id in (None, self.worker_id)) and (
            self.attempt is None or job.attempt == self.attempt
        )


@dataclass(frozen=True)
class _CompletedRow:
    """The attributes ``events.job_event`` reads, for a completion written without loading the job."""

    seq: int
    id: Any
    type: str
    queue: str
    attempt: int
    started_at: dt.datetime | None
    state: str


@dataclass(frozen=True)
class _Holder:
    """The two columns ``Lease.holds`` reads."""

    worker_id: str | None
    attempt: int


@dataclass(frozen=True)
class Settlement:
    """One finished attempt for ``settle_many``: a result, or a failure."""

    job_id: Any
    lease: Lease
    result: Any = None
    failure: Failure | None = None
    # A failure that releases the job without charging the attempt ("requeue": true).
    requeue: bool = False


class Verdict(str, Enum):
    """What the store did with a ``Settlement``."""

    COMPLETED = "completed"
    FAILED = "failed"
    # The attempt was no longer held (cancelled, recovered, claimed again): nothing written.
    REFUSED = "refused"


class OutcomeMixin:
    def ack(self, job_id: Any, *, result: Any = None, lease: Lease = Lease()) -> Job:
        """active -> completed in one conditional write; 409 if the job is not ours to ack."""
        if events.fast_paths_ok():
            # One statement (core/fastack.py). Outside a transaction it is one
            # of its own, no BEGIN and no COMMIT, for any job but a workflow
            # step: a step's ACK must move its workflow in the same
            # transaction, so the statement leaves steps (and refusals) to the
            # transaction below, where ACK and advance share one.
            if not connection.in_atomic_block:
                job = fastack.ack(self, job_id, result, lease, steps=False)
                if job is not None:
                    return job
            with transaction.atomic():
                job = fastack.ack(self, job_id, result, lease)
                if job is not None and (job.extra or {}).get("workflow_id"):
                    advance_workflows({job.seq: job.state})
            if job is None:
                raise refusal(self.filter(id=job_id).first(), job_id, Move.ACK)
            return job
        now_ = TxNow()
        with transaction.atomic():
            changed = self.filter(Q(id=job_id, state__in=sources(Move.ACK)) & lease.q()).update(
                state=target(Move.ACK),
                completed_at=now_,
                finished_at=now_,
                result=result,
                error=None,
                lease_expires_at=None,
                deadline_at=None,
            )
            job = self.filter(id=job_id).first()
            if not changed:
                raise refusal(job, job_id, Move.ACK)
            duration = to_millis(job.completed_at - job.started_at) if job.started_at else None
            events.record([events.job_event("job.completed", job, job.completed_at, duration_ms=duration)])
            advance_workflows({job.seq: job.state})
        return job

    def settle_many(self, settlements: Sequence[Settlement], *, holding: str | None = None) -> list[Verdict]:
        """Write many finished attempts in one transaction; a verdict for each, in order.

        For the in-process worker, which writes its outcomes in batches.
        Every row of the batch is locked first, in ``seq`` order, through
        the unique index on ``id`` (a lease condition in that WHERE clause
        would let the planner pick the partial index of active jobs by
        owner, whose dead entries -- every job the worker finished since the
        last vacuum -- it would walk on every batch). Attempts whose lease
        no longer holds are refused, exactly as a single ACK or FAIL would
        be. Completions are written in one UPDATE; failures are decided one
        by one and written together (``settle_rows``).

        ``holding``: a worker whose row is held first (DESIGN invariant 11),
        and revived if it was declared dead (``hold_claimant``); on PostgreSQL
        inside the lock statement. Nothing is held for an empty batch.
        """
        if not settlements:
            return []
        from .workers import hold_claimant  # workers imports this module
        # No savepoint of its own: inside settle_and_fetch's transaction (the
        # worker's every turn) a failure undoes the whole turn anyway.
        with transaction.atomic(savepoint=False):
            job_ids = list({str(s.job_id) for s in settlements})
            if events.fast_paths_ok():
                alive, locked = fastack.lock_settled(self, job_ids, holding=holding)
                if not alive:
                    # Declared dead: revived first, its jobs then locked like anyone's.
                    hold_claimant(holding)
                    _, locked = fastack.lock_settled(self, job_ids)
            else:
                if holding is not None:
                    hold_claimant(holding)
                locked = list(
                    self.select_for_update()
                    .filter(id__in=job_ids, state__in=sources(Move.ACK))
                    # Whether the job is a pending workflow step, read with the lock: most
                    # batches hold none, and advance_workflows then needs no probe of its own.
                    .annotate(db_now=TxNow(), step=workflow_step())
                    .order_by("seq")
                    .values_list("seq", "id", "type", "queue", "attempt", "started_at", "worker_id", "step", "db_now")
                )
            rows = {str(row[1]): row for row in locked}
            verdicts: list[Verdict] = []
            held: list[tuple[Settlement, tuple]] = []
            for settlement in settlements:
                key = str(settlement.job_id)
                row = rows.get(key)
                if row is None or not settlement.lease.holds(_Holder(row[6], row[4])):
                    verdicts.append(Verdict.REFUSED)
                    continue
                del rows[key]  # an attempt is settled once, even if the batch names it twice
                held.append((settlement, row))
                verdicts.append(Verdict.COMPLETED if settlement.failure is None else Verdict.FAILED)
            if held:
                now = held[0][1][-1]
                self._complete_rows([(s, row) for s, row in held if s.failure is None], now)
                failed = self._fail_rows([(s, row) for s, row in held if s.failure is not None], now)
                # One call for the whole batch, the job rows still locked (core/workflows.py).
                advance_workflows(
                    {row[0]: JobState.COMPLETED for s, row in held if s.failure is None}
                    | {job.seq: job.state for job in failed},
                    steps={row[0] for _, row in held if row[7]},
                )
        return verdicts

    def _complete_rows(self, held: list[tuple[Settlement, tuple]], now: dt.datetime) -> None:
        if not held:
            return
        seqs = [row[0] for _, row in held]
        if events.fast_paths_ok():
            fastack.complete_rows(
                self, seqs, [settlement.result for settlement, _ in held], now, [(row[3], row[2]) for _, row in held]
            )
            return
        results = [
            When(seq=row[0], then=Value(settlement.result, output_field=JSONField()))
            for settlement, row in held
            if settlement.result is not None
        ]
        self.filter(seq__in=seqs).update(
            state=target(Move.ACK),
            completed_at=now,
            finished_at=now,
            result=Case(*results, default=None, output_field=JSONField()) if results else None,
            error=None,
            lease_expires_at=None,
            deadline_at=None,
        )
        events.record_for_jobs(
            "job.completed",
            seqs,
            now,
            lambda: (
                events.job_event(
                    "job.completed",
                    _CompletedRow(*row[:6], state=JobState.COMPLETED),
                    now,
                    duration_ms=to_millis(now - row[5]) if row[5] else None,
                )
                for _, row in held
            ),
            with_duration=True,
        )

    def _fail_rows(self, held: list[tuple[Settlement, tuple]], now: dt.datetime) -> list[Job]:
        if not held:
            return []
        # Already locked above; the whole rows are read for the retry policy.
        jobs = {job.seq: job for job in self.filter(seq__in=[row[0] for _, row in held])}
        settle_rows(
            self,
            [
                (jobs[row[0]], s.failure, Settle.RELEASE if s.requeue else Settle.POLICY)
                for s, row in held
            ],
            now,
            advance=False,
        )
        return list(jobs.values())

    def fail(
        self,
        job_id: Any,
        failure: Failure,
        *,
        lease: Lease = Lease(),
        requeue: bool = False,
    ) -> Job:
        """Report a failed attempt: retryable, discarded, or (``requeue``) released."""
        from ..models import JobError

        with transaction.atomic():
            job = self.select_for_update().annotate(db_now=TxNow()).filter(id=job_id).first()
            if job is None or job.state != JobState.ACTIVE or not lease.holds(job):
                raise refusal(job, job_id, Move.FAIL)
            mode = Settle.RELEASE if requeue else Settle.POLICY
            entry, settled_events = settle_failure(job, failure, job.db_now, mode)
            job.save(update_fields=FAILURE_FIELDS)
            JobError.objects.bulk_create([entry])
            events.record(settled_events)
            advance_workflows({job.seq: job.state})
        return job


def refusal(job: Job | None, job_id: Any, move: Move) -> Exception:
    """The error for a move that did not happen: missing job, wrong state, or not our lease."""
    if job is None:
        return NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": str(job_id)})
    # An active job that refused an ACK or FAIL is held under another lease.
    if move in (Move.ACK, Move.FAIL) and job.state == JobState.ACTIVE:
        held_by = f"worker {job.worker_id!r}, attempt {job.attempt}"
        return InvalidTransition(
            f"job {job.id} is reserved by {held_by}; this {move.value} does not hold that reservation",
            job_id=str(job.id),
            current_state=job.state,
            details={"worker_id": job.worker_id, "attempt": job.attempt},
        )
    return InvalidTransition(
        f"cannot {move.value} job {job.id}: it is {job.state}",
        job_id=str(job.id),
        current_state=job.state,
        details={"expected_state": sorted(s.value for s in sources(move))},
    )


def settle_failure(job: Job, failure: Failure, now: dt.datetime, mode: Settle) -> tuple[JobError, list[Any]]:
    """Move a locked active job after a failed attempt; return its history entry and events.

    Changes only the attributes in ``FAILURE_FIELDS``; the caller writes them
    while it still holds the row lock.
    """
    from ..models import JobError

    stamp = format_timestamp(now)
    job.error = failure.as_dict(job.attempt, stamp)
    job.worker_id = None
    job.lease_expires_at = None
    job.deadline_at = None
    policy = RetryPolicy.from_dict(job.retry)
    charged = job.attempt - job.releases
    # ojs-events §3: job.failed for every failed attempt, then what follows:
    # job.retrying, job.discarded, or job.enqueued when it is back in its queue.
    failed = events.job_event(
        "job.failed",
        job,
        now,
        error={"code": failure.code or failure.type, "type": failure.type, "message": failure.message,
               "retryable": failure.retryable},
    )
    follow_up = None
    if mode is Settle.RELEASE:
        job.releases += 1
        _to_available(job, now)
        follow_up = events.job_event("job.enqueued", job, now, requeued=True)
    elif mode is Settle.REQUEUE and charged < max(policy.max_attempts, 1):
        _to_available(job, now)
        follow_up = events.job_event("job.enqueued", job, now, requeued=True)
    else:
        decision = decide(
            policy,
            max(charged, 1),
            error_types=failure.match_candidates,
            handler_code=failure.handler_code,
            retryable=failure.retryable if mode is Settle.POLICY else None,
        )
        if mode is Settle.POLICY and decision.retry:
            job.state = target(Move.RETRY)
            job.retry_delay_ms = to_millis(decision.delay)
            job.run_at = now + decision.delay
            follow_up = events.job_event(
                "job.retrying",
                job,
                now,
                max_attempts=job.max_attempts,
                next_retry_at=format_timestamp(job.run_at),
                error={"code": failure.code or failure.type, "message": failure.message},
            )
        else:
            job.state = target(Move.FAIL)
            job.completed_at = now
            job.finished_at = now
            job.run_at = None
            job.dead_letter = decision.dead_letter
            follow_up = events.job_event(
                "job.discarded",
                job,
                now,
                total_attempts=job.attempt,
                dead_letter=job.dead_letter,
                last_error={"code": failure.code or failure.type, "message": failure.message},
            )
    entry = JobError(
        job_id=job.seq,
        attempt=job.attempt,
        type=failure.type,
        code=failure.code,
        message=failure.message,
        backtrace=failure.backtrace,
        details=failure.details,
        retryable=failure.retryable,
        occurred_at=now,
    )
    # The failed event reports the state the job lands in.
    failed.data["state"] = job.state
    return entry, [failed] + ([follow_up] if follow_up else [])


def _to_available(job: Job, now: dt.datetime) -> None:
    job.state = target(Move.REQUEUE)
    job.enqueued_at = now
    # ojs-core §6.3: a timed-out job returns with started_at cleared.
    job.started_at = None
    job.run_at = None


def settle_rows(
    manager: Any, failed: Sequence[tuple[Job, Failure, Settle]], now: dt.datetime, *, advance: bool = True
) -> int:
    """Settle locked jobs, each with its failure and mode, in one UPDATE plus one INSERT of history.

    Then their workflows advance, unless the caller (``settle_many``) does it for a larger batch.
    """
    from ..models import JobError

    if not failed:
        return 0
    entries, batch_events = [], []
    for job, failure, mode in failed:
        entry, settled_events = settle_failure(job, failure, now, mode)
        entries.append(entry)
        batch_events.extend(settled_events)
    manager.bulk_update([job for job, _, _ in failed], FAILURE_FIELDS)
    JobError.objects.bulk_create(entries)
    events.record(batch_events)
    if advance:
        advance_workflows({job.seq: job.state for job, _, _ in failed})
    return len(failed)


def expire_rows(manager: Any, jobs: list[Job], now: dt.datetime) -> int:
    """Discard locked waiting jobs whose ``expires_at`` passed (ojs-core §5.2).

    They never ran, so ``completed_at`` stays empty (README, "Decisions");
    the error says why, with the type ojs-timeouts §8 names.
    """
    from ..models import JobError

    if not jobs:
        return 0
    stamp = format_timestamp(now)
    entries, batch_events = [], []
    for job in jobs:
        failure = Failure(
            type="enqueue_ttl_expired",
            message=f"expires_at {format_timestamp(job.expires_at)} passed before the job started",
            retryable=False,
        )
        job.state = target(Move.EXPIRE)
        job.finished_at = now
        job.run_at = None
        job.error = failure.as_dict(job.attempt, stamp)
        entries.append(
            JobError(
                job_id=job.seq,
                attempt=job.attempt,
                type=failure.type,
                message=failure.message,
                retryable=False,
                occurred_at=now,
            )
        )
        batch_events.append(
            events.job_event(
                "job.expired",
                job,
                now,
                created_at=format_timestamp(job.created_at),
                expired_at=format_timestamp(job.expires_at),
                ttl_ms=to_millis(job.expires_at - job.created_at),
            )
        )
    manager.bulk_update(jobs, ["state", "finished_at", "run_at", "error"])
    JobError.objects.bulk_create(entries)
    events.record(batch_events)
    advance_workflows({job.seq: job.state for job in jobs})
    return len(jobs)
