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
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, JSONField, Q, Value, When

from ..models import Job, JobError
from ..protocol.durations import format_timestamp, to_millis
from ..protocol.failure import Failure
from ..protocol.printable import one_line
from ..protocol.retry import FailureDecision, RetryPolicy, decide
from ..protocol.states import JobState, Move, sources, target
from . import events, partitions
from .claimant import hold_claimant
from .clock import TxNow
from .dead_letter import KEPT_WORDS
from .engine import current as current_engine
from .refusal import refusal
from .row_movement import retried_on_row_movement
from .row_updates import update_rows
from .types import Lease, Settle, Settlement, Verdict
from .workflows import advance as advance_workflows
from .workflows import workflow_step

# The fate of every failed attempt, whichever door reported it (worker, HTTP FAIL, the reaper).
logger = logging.getLogger("django_ojs.jobs")

# Every column a failure may change; bulk writes list them once.
FAILURE_FIELDS = [
    "state", "releases", "worker_id", "lease_expires_at", "deadline_at", "started_at",
    "enqueued_at", "run_at", "retry_delay_ms", "completed_at", "finished_at",
    "dead_letter", "error",
]


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


@retried_on_row_movement
def ack(job_id: Any, *, result: Any = None, lease: Lease = Lease()) -> Job:
    """active -> completed in one conditional write; 409 if the job is not ours to ack."""
    engine = current_engine()
    if not connection.in_atomic_block:
        # One statement of its own, no BEGIN and no COMMIT, where the engine
        # has one -- for any job but a workflow step: a step's ACK must move
        # its workflow in the same transaction, as below.
        acked = engine.ack_alone(job_id, result, lease)
        if acked is not None:
            return acked
    with transaction.atomic():
        acked = engine.ack(job_id, result, lease)
        if acked is not None:
            if (acked.extra or {}).get("workflow_id"):
                advance_workflows({acked.seq: acked.state})
            return acked
        now_ = TxNow()
        changed = Job.objects.filter(Q(id=job_id, state__in=sources(Move.ACK)) & lease.q()).update(
            state=target(Move.ACK),
            completed_at=now_,
            finished_at=now_,
            result=result,
            error=None,
            lease_expires_at=None,
            deadline_at=None,
        )
        job = Job.objects.filter(id=job_id).first()
        if not changed or job is None:
            raise refusal(job, job_id, Move.ACK)
        assert job.completed_at is not None  # the UPDATE above set it
        duration = to_millis(job.completed_at - job.started_at) if job.started_at else None
        events.record([events.job_event("job.completed", job, job.completed_at, duration_ms=duration)])
        advance_workflows({job.seq: job.state})
    return job


@retried_on_row_movement
def settle_many(settlements: Sequence[Settlement], *, holding: str | None = None) -> list[Verdict]:
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
    and revived if it was declared dead (``hold_claimant``); with the
    PostgreSQL engine inside the lock statement. Nothing is held for an
    empty batch.
    """
    if not settlements:
        return []
    # No savepoint of its own: inside settle_and_fetch's transaction (the
    # worker's every turn) a failure undoes the whole turn anyway.
    with transaction.atomic(savepoint=False):
        job_ids = list({str(s.job_id) for s in settlements})
        locked = _lock_settled(job_ids, holding)
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
            _complete_rows([(s, row) for s, row in held if s.failure is None], now)
            failed = _fail_rows([(s, row) for s, row in held if s.failure is not None], now)
            # One call for the whole batch, the job rows still locked (core/workflows.py).
            advance_workflows(
                {row[0]: JobState.COMPLETED for s, row in held if s.failure is None}
                | {job.seq: job.state for job in failed},
                steps={row[0] for _, row in held if row[7]},
            )
    return verdicts


def written_before(settlements: Sequence[Settlement]) -> list[bool]:
    """For each settlement ``settle_many`` refused: is its outcome in the store already, written
    under its own lease? A turn whose COMMIT went through while its reply was lost (the connection
    dropped, the pooler restarted) is sent again and refused -- the attempt is no longer held,
    because that very settlement settled it. A completion: the job completed at that attempt by
    that worker. A failure: the attempt's error, recorded with that worker's id. A release charges
    no attempt and leaves no error: it cannot be told from a recovery, and reads as not written."""
    if not settlements:
        return []
    jobs = {str(job.id): job for job in Job.objects.filter(id__in=[s.job_id for s in settlements])
            .only("id", "seq", "state", "attempt", "worker_id")}
    failed = {(seq, attempt, (details or {}).get("worker_id"))
              for seq, attempt, details in JobError.objects.filter(job_id__in=[job.seq for job in jobs.values()])
              .values_list("job_id", "attempt", "details")}
    found = []
    for settlement in settlements:
        job, lease = jobs.get(str(settlement.job_id)), settlement.lease
        if job is None or settlement.requeue:
            found.append(False)
        elif settlement.failure is None:
            found.append(job.state == JobState.COMPLETED and job.attempt == lease.attempt
                         and job.worker_id == lease.worker_id)
        else:
            found.append((job.seq, lease.attempt, lease.worker_id) in failed)
    return found


def ack_many(settlements: Sequence[Settlement]) -> list[Exception | None]:
    """ACK many attempts in one transaction: for each, None if it completed, else the error a
    single ``ack`` of it would have raised (404, or 409 naming the state or the lease).

    One refused attempt does not stop the others. A job named twice is completed once; the
    second names it as completed, as a second ACK would.
    """
    return refusals(settlements, settle_many(settlements))


def refusals(settlements: Sequence[Settlement], verdicts: Sequence[Verdict]) -> list[Exception | None]:
    """For each completion written: None if it completed, else the error a single ``ack`` of it would
    have raised (404, or 409 naming the state or the lease), read as the job stands now."""
    refused = [s.job_id for s, verdict in zip(settlements, verdicts) if verdict is Verdict.REFUSED]
    # Read once the batch is settled: why each was refused, as the job stands now.
    jobs = {str(job.id): job for job in Job.objects.filter(id__in=refused)} if refused else {}
    return [
        None if verdict is not Verdict.REFUSED else refusal(jobs.get(str(s.job_id)), s.job_id, Move.ACK)
        for s, verdict in zip(settlements, verdicts)
    ]


def _lock_settled(job_ids: list[str], holding: str | None) -> list[tuple]:
    """The batch's rows that may be settled, locked in ``seq`` order, ``holding``'s row held first:
    (seq, id, type, queue, attempt, started_at, worker_id, is a pending workflow step, the clock)."""
    engine = current_engine()
    answer = engine.lock_settled(job_ids, holding=holding)
    if answer is not None:
        alive, locked = answer
        if alive or holding is None:
            return locked
        # Declared dead: revived first, its jobs then locked like anyone's.
        hold_claimant(holding)
        answer = engine.lock_settled(job_ids, holding=None)
        assert answer is not None  # the engine that locked once locks again
        return answer[1]
    if holding is not None:
        hold_claimant(holding)
    return list(
        Job.objects.select_for_update()
        .filter(id__in=job_ids, state__in=sources(Move.ACK))
        # Whether the job is a pending workflow step, read with the lock: most
        # batches hold none, and advance_workflows then needs no probe of its own.
        .annotate(db_now=TxNow(), step=workflow_step())
        .order_by("seq")
        .values_list("seq", "id", "type", "queue", "attempt", "started_at", "worker_id", "step", "db_now")
    )


def _complete_rows(held: list[tuple[Settlement, tuple]], now: dt.datetime) -> None:
    if not held:
        return
    seqs = [row[0] for _, row in held]
    if current_engine().complete_rows(
        seqs, [settlement.result for settlement, _ in held], now, [(row[3], row[2]) for _, row in held]
    ):
        return
    results = [
        When(seq=row[0], then=Value(settlement.result, output_field=JSONField()))
        for settlement, row in held
        if settlement.result is not None
    ]
    Job.objects.filter(seq__in=seqs).update(
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
                _CompletedRow(row[0], row[1], row[2], row[3], row[4], row[5], state=JobState.COMPLETED),
                now,
                duration_ms=to_millis(now - row[5]) if row[5] else None,
            )
            for _, row in held
        ),
        with_duration=True,
    )


def _fail_rows(held: list[tuple[Settlement, tuple]], now: dt.datetime) -> list[Job]:
    if not held:
        return []
    # Already locked above; the whole rows are read for the retry policy.
    jobs = {job.seq: job for job in Job.objects.filter(seq__in=[row[0] for _, row in held])}
    settle_rows(
        [
            (jobs[row[0]], s.failure, Settle.RELEASE if s.requeue else Settle.POLICY)
            for s, row in held
            if s.failure is not None
        ],
        now,
        advance=False,
    )
    return list(jobs.values())


@retried_on_row_movement
def fail(job_id: Any, failure: Failure, *, lease: Lease = Lease(), requeue: bool = False) -> Job:
    """Report a failed attempt: retryable, discarded, or (``requeue``) released."""
    with transaction.atomic():
        # Locked in the live partition only: never planned over history, nor waiting on an
        # operator's lock of a day partition there (partitions.live_jobs).
        job = partitions.live_jobs().select_for_update().annotate(db_now=TxNow()).filter(id=job_id).first()
        if job is None or job.state != JobState.ACTIVE or not lease.holds(job):
            # A finished job is in history: the refusal says why from its row, read unlocked.
            raise refusal(job or Job.objects.filter(id=job_id).first(), job_id, Move.FAIL)
        mode = Settle.RELEASE if requeue else Settle.POLICY
        entry, settled_events = settle_failure(job, failure, job.db_now, mode)
        update_rows(partitions.live_jobs(), [job], FAILURE_FIELDS)
        JobError.objects.bulk_create([entry])
        events.record(settled_events)
        advance_workflows({job.seq: job.state})
    return job


def settle_failure(job: Job, failure: Failure, now: dt.datetime, mode: Settle) -> tuple[JobError, list[Any]]:
    """Move a locked active job after a failed attempt; return its history entry and events.

    Changes only the attributes in ``FAILURE_FIELDS``; the caller writes them
    while it still holds the row lock.
    """
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
    decision: FailureDecision | None = None
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
        if mode is Settle.POLICY and decision.retry and decision.delay is not None:
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
    failed.state = job.state
    if mode is Settle.RELEASE:
        _log_release(job, failure)
    else:
        _log_failure(job, failure, decision if job.state == JobState.DISCARDED else None)
    return entry, [failed] + ([follow_up] if follow_up else [])


# Why a failure ended its job, in the log line's words (protocol/retry.py FailureDecision.reason).
GAVE_UP = {
    "exhausted": "exhausted",
    "non_retryable": "not retryable (non_retryable_errors)",
    "not_retryable_flag": "not retryable (the failure said so)",
    "handler_discard": "the handler said DISCARD",
    "handler_fail": "the handler said FAIL",
    "handler_dead_letter": "the handler said DEAD_LETTER",
}


# The most of an error message a log line carries: the rest (messages run to
# kilobytes: a rendered template, a response body) is on the job, in its history.
LOG_MESSAGE_CHARS = 500


def _log_excerpt(message: str) -> str:
    if len(message) > LOG_MESSAGE_CHARS:
        message = f"{message[:LOG_MESSAGE_CHARS]}… ({len(message):,} characters; the whole message is in the job's errors)"
    return one_line(message)


def _log_failure(job: Job, failure: Failure, ended: FailureDecision | None) -> None:
    """One line per failed attempt, once its transaction commits (a rolled-back settle logs nothing).

    INFO while the job will run again, with when; WARNING for the failure that
    ends it, with what it is kept as and until when, so the last failure does
    not read like any retry.
    """
    # Releases and snoozes run the job again without charging the attempt: past one, "attempt 3/2
    # failed; retry at" read as a broken policy. Then the attempts charged are said beside it.
    charged = f"/{job.max_attempts}" if not job.releases else (
        f" ({job.attempt - job.releases}/{job.max_attempts} charged)")
    head = (f"job {job.id} ({job.type}) attempt {job.attempt}{charged} failed: {one_line(failure.type)}: "
            f"{_log_excerpt(failure.message)}")
    if ended is not None:
        until = format_timestamp(job.kept_until) if job.kept_until else "-"
        line = f"{head}; {GAVE_UP.get(ended.reason, ended.reason)} → {KEPT_WORDS[job.dead_letter]}, kept until {until}"
        transaction.on_commit(lambda: logger.warning("%s", line))
    else:
        then = f"retry at {format_timestamp(job.run_at)}" if job.state == JobState.RETRYABLE else "back in its queue now"
        transaction.on_commit(lambda: logger.info("%s; %s", head, then))


def _log_release(job: Job, failure: Failure) -> None:
    """One line per attempt released uncharged (a shutdown's ``ShutdownError``, a NACK's requeue), in
    the word the worker's summary counts it by: which jobs its "3 released" were."""
    line = (f"job {job.id} ({job.type}) attempt {job.attempt} released: {one_line(failure.type)}: "
            f"{_log_excerpt(failure.message)}; back in its queue now, the attempt not charged")
    transaction.on_commit(lambda: logger.info("%s", line))


def _to_available(job: Job, now: dt.datetime) -> None:
    job.state = target(Move.REQUEUE)
    job.enqueued_at = now
    # ojs-core §6.3: a timed-out job returns with started_at cleared.
    job.started_at = None
    job.run_at = None


def settle_rows(
    failed: Sequence[tuple[Job, Failure, Settle]], now: dt.datetime, *, advance: bool = True
) -> int:
    """Settle locked jobs, each with its failure and mode, in one UPDATE plus one INSERT of history.

    Then their workflows advance, unless the caller (``settle_many``) does it for a larger batch.
    """
    if not failed:
        return 0
    entries, batch_events = [], []
    for job, failure, mode in failed:
        entry, settled_events = settle_failure(job, failure, now, mode)
        entries.append(entry)
        batch_events.extend(settled_events)
    update_rows(partitions.live_jobs(), [job for job, _, _ in failed], FAILURE_FIELDS)
    JobError.objects.bulk_create(entries)
    events.record(batch_events)
    if advance:
        advance_workflows({job.seq: job.state for job, _, _ in failed})
    return len(failed)


def expire_rows(jobs: list[Job], now: dt.datetime) -> int:
    """Discard locked waiting jobs whose ``expires_at`` passed (ojs-core §5.2).

    They never ran, so ``completed_at`` stays empty (docs/explanation/decisions.md);
    the error says why, with the type ojs-timeouts §8 names.
    """
    if not jobs:
        return 0
    stamp = format_timestamp(now)
    entries, batch_events = [], []
    for job in jobs:
        assert job.expires_at is not None  # an expired job has an expiry
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
    update_rows(partitions.live_jobs(), jobs, ["state", "finished_at", "run_at", "error"])
    JobError.objects.bulk_create(entries)
    events.record(batch_events)
    advance_workflows({job.seq: job.state for job in jobs})
    return len(jobs)
