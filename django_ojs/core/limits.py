"""Rate and concurrency limits, enforced at FETCH (ojs-rate-limiting §5, §8).

FETCH locks its candidate rows as always (``FOR UPDATE SKIP LOCKED``, in
order), then asks ``admit`` which of them may start. Only candidates that
carry a limit -- a job ``rate_key``, or a queue with limits -- cost anything.

**Correct across processes.** For each key in play, FETCH takes a
transaction-scoped advisory lock (``pg_try_advisory_xact_lock``) and only
then reads the key's usage, in a fresh statement that sees every claim
committed before the lock was granted; the claims it makes are committed
before the lock is released. So two FETCHes can never both take the last
slot. The lock is a *try*-lock: a key another FETCH is deciding right now is
skipped, exactly as SKIP LOCKED skips a row, and the next FETCH gets it. A
lock that never waits cannot close a wait cycle, so the limit locks add no
deadlock to the global order (worker row, then job rows by SKIP LOCKED).
On SQLite, writers are serialised and the locks are not needed.

**No hot row.** Usage is derived: active jobs are counted from the job
rows (``ojs_job_rate_key``, or the queue's ``(queue, state)`` index), and
starts inside a window from ``RateLimitStart``, an append-only log written
only by limited claims and pruned once no window reaches it. Nothing is
updated on ACK or FAIL: a finished job simply stops being active.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max, Min, Q

from ..models import Job, JobError, Queue, RateLimitOverride, RateLimitStart
from ..protocol.durations import format_timestamp
from ..protocol.failure import Failure
from ..protocol.ratelimit import Budget, Limit, Usage, budget, limit_from_dict, queue_key, size_of
from ..protocol.states import JobState, Move, target
from . import events, partitions
from .clock import db_now
from .overrides import with_override, with_overrides
from .queue_settings import forget, limit_of, settings_of
from .row_updates import update_rows
from .types import LimitReport
from .workflows import advance

# The advisory lock space of rate limit keys ("OJSR"): pg_try_advisory_xact_lock(int, int).
LOCK_CLASS = 0x4F4A5352
# A held-back key reports rate_limit.exceeded at most this often per process.
EXCEEDED_EVENT_INTERVAL = 1.0
# When a concurrency limit reschedules a job, it is due again after this long.
RESCHEDULE_WITHOUT_HINT = dt.timedelta(seconds=1)


@dataclass
class Admission:
    """``admit``'s answer: the rows to claim, and what to leave out of the next probe."""

    admitted: list[Job]
    held_seqs: list[int] = field(default_factory=list)
    blocked_keys: set[str] = field(default_factory=set)
    queue_exhausted: bool = False


class Held:
    """What FETCH leaves out of its next probe of a queue once limits held rows back.

    A held row is still locked by this transaction (SKIP LOCKED does not skip
    one's own locks), so it is excluded by ``seq``; a key with no budget left
    is excluded whole. The probes of one queue are bounded.
    """

    MAX_PROBES = 4

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.keys: set[str] = set()
        self.probes = 0

    def exclude(self, rows: Any) -> Any:
        if self.seqs:
            rows = rows.exclude(seq__in=self.seqs)
        if self.keys:
            rows = rows.exclude(rate_key__in=sorted(self.keys))
        return rows

    def add(self, admission: Admission) -> bool:
        """Record a probe's held rows; whether probing again may find startable jobs."""
        self.probes += 1
        self.seqs.extend(admission.held_seqs)
        self.keys |= admission.blocked_keys
        return bool(admission.held_seqs) and not admission.queue_exhausted and self.probes < self.MAX_PROBES


def admit(queue: str, rows: list[Job], now: dt.datetime, report: LimitReport | None = None) -> Admission:
    """Split locked candidate ``rows`` of ``queue`` into those that may start now and the rest."""
    if not rows:
        return Admission(rows)
    queue_limit = settings_of(queue).limit
    if queue_limit is None and not any(row.rate_key for row in rows):
        return Admission(rows)
    limits: dict[str, Limit] = {}
    for row in rows:
        if row.rate_key and row.rate_key not in limits:
            # Jobs sharing a key should share its policy; the first one seen decides.
            limits[row.rate_key] = limit_from_dict({**(row.rate_limit or {}), "key": row.rate_key})
    limits = with_overrides(limits)
    if queue_limit is not None:
        limits[queue_limit.key] = _tightest(queue_limit, limits.get(queue_limit.key))
    locked = _try_lock(sorted(limits))
    usages = {key: _usage(limits[key], queue, now) for key in locked}
    budgets = {key: budget(limits[key], usages[key], now) for key in locked}
    result = Admission([])
    aside: list[tuple[Job, Limit, Budget]] = []
    for row in rows:
        keys = [key for key in (queue_limit and queue_limit.key, row.rate_key) if key]
        blocking = next((key for key in keys if key not in locked or budgets[key].remaining == 0), None)
        if blocking is None:
            result.admitted.append(row)
            for key in keys:
                # Count this start as the store will, so the next row (and
                # the reported retry time) see it.
                usages[key] = _started(usages[key], now)
                budgets[key] = budget(limits[key], usages[key], now)
            continue
        result.held_seqs.append(row.seq)
        result.blocked_keys.add(blocking)
        if queue_limit is not None and blocking == queue_limit.key:
            result.queue_exhausted = True
        if blocking in budgets:
            if report is not None:
                report.note(blocking, limits[blocking], budgets[blocking], now)
            if blocking == row.rate_key and limits[blocking].on_limit != "wait":
                aside.append((row, limits[blocking], budgets[blocking]))
    _log_starts(result.admitted, queue_limit, limits, now)
    _set_aside(aside, now)
    _report_exceeded(queue, {key: budgets[key] for key in result.blocked_keys if key in budgets}, limits, now)
    return result


def _started(usage: Usage, now: dt.datetime) -> Usage:
    return Usage(
        active=usage.active + 1,
        starts_in_window=usage.starts_in_window + 1,
        oldest_start_in_window=usage.oldest_start_in_window or now,
        last_start=now,
    )


def usage_of(limit: Limit, now: dt.datetime) -> Usage:
    """A key's usage now, for inspection (§10.1)."""
    queue = limit.key.removeprefix("queue:") if limit.key.startswith("queue:") else None
    return _usage(limit, queue, now)


def _tightest(queue_limit: Limit, job_limit: Limit | None) -> Limit:
    """A job key spelled ``queue:<name>`` and the queue's own limit are one key: both bind."""
    if job_limit is None:
        return queue_limit

    def low(a: Any, b: Any, measure: Any = lambda w: w) -> Any:
        if a is None or b is None:
            return a if b is None else b
        return min(a, b, key=measure)

    return Limit(
        key=queue_limit.key,
        concurrency=low(queue_limit.concurrency, job_limit.concurrency),
        rate=low(queue_limit.rate, job_limit.rate, lambda w: w.limit / w.period.total_seconds()),
        throttle=low(queue_limit.throttle, job_limit.throttle, lambda w: w.limit / w.period.total_seconds()),
        on_limit=job_limit.on_limit,
    )


def _try_lock(keys: Sequence[str]) -> set[str]:
    """The keys whose advisory lock this transaction now holds (all of them on SQLite)."""
    if connection.vendor != "postgresql" or not keys:
        return set(keys)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k FROM unnest(%s::text[]) AS k WHERE pg_try_advisory_xact_lock(%s, hashtext(k))",
            [list(keys), LOCK_CLASS],
        )
        return {row[0] for row in cursor.fetchall()}


def _usage(limit: Limit, queue: str | None, now: dt.datetime) -> Usage:

    active = 0
    if limit.concurrency is not None:
        if limit.key == queue_key(queue or ""):
            active = Job.objects.filter(queue=queue, state=JobState.ACTIVE).count()
        else:
            active = Job.objects.filter(rate_key=limit.key, state=JobState.ACTIVE).count()
    if not limit.counts_starts:
        return Usage(active=active)
    window_start = now - limit.rate.period if limit.rate else now
    starts = RateLimitStart.objects.filter(key=limit.key, started_at__gt=now - limit.longest_period).aggregate(
        in_window=Count("seq", filter=Q(started_at__gt=window_start)),
        oldest=Min("started_at", filter=Q(started_at__gt=window_start)),
        last=Max("started_at"),
    )
    return Usage(active, starts["in_window"], starts["oldest"], starts["last"])


def _log_starts(admitted: Iterable[Job], queue_limit: Limit | None, limits: dict[str, Limit], now: dt.datetime) -> None:

    entries = []
    for row in admitted:
        keys = {key for key in (queue_limit and queue_limit.key, row.rate_key) if key}
        for key in keys:
            limit = limits[key]
            if limit.counts_starts:
                entries.append(RateLimitStart(key=key, started_at=now, expires_at=now + limit.longest_period))
    if entries:
        RateLimitStart.objects.bulk_create(entries)


def _set_aside(aside: list[tuple[Job, Limit, Budget]], now: dt.datetime) -> None:
    """``on_limit`` "reschedule" (-> scheduled when the limit allows) and "drop" (-> discarded)."""

    if not aside:
        return
    stamp = format_timestamp(now)
    history, batch_events = [], []
    for job, limit, verdict in aside:
        if limit.on_limit == "reschedule":
            job.state = target(Move.DEFER)
            job.run_at = verdict.retry_at or now + RESCHEDULE_WITHOUT_HINT
            job.scheduled_at = job.run_at
            if job.unique_states and f",{JobState.AVAILABLE}," not in job.unique_states:
                # It left its holding set (scheduled/pending only) when it became
                # available; coming back must not claim the key again (unique.py).
                job.unique_states = None
            batch_events.append(
                events.job_event("job.scheduled", job, now, scheduled_at=format_timestamp(job.run_at), rate_limit_key=limit.key)
            )
            continue
        failure = Failure(type="rate_limited", message=f"dropped: rate limit {limit.key!r} reached", retryable=False)
        job.state = target(Move.DISCARD)
        job.finished_at = now
        job.error = failure.as_dict(job.attempt, stamp)
        history.append(
            JobError(job_id=job.seq, attempt=job.attempt, type=failure.type, message=failure.message,
                     retryable=False, occurred_at=now)
        )
        batch_events.append(
            events.other_event("rate_limit.dropped", now, queue=job.queue, key=limit.key, job_id=str(job.id), job_type=job.type)
        )
    update_rows(partitions.live_jobs(), [job for job, _, _ in aside], ["state", "run_at", "scheduled_at", "finished_at", "error", "unique_states"])
    JobError.objects.bulk_create(history)
    events.record(batch_events)
    # A dropped workflow step fails its step (its job row is locked).
    advance({job.seq: job.state for job, _, _ in aside})


_last_exceeded: dict[str, float] = {}
_exceeded_lock = threading.Lock()


def _report_exceeded(queue: str, held: dict[str, Budget], limits: dict[str, Limit], now: dt.datetime) -> None:
    """``rate_limit.exceeded`` (§11.1), at most once a second per key and process:
    an idle worker polling a held key would otherwise write one per poll."""
    due = []
    clock = time.monotonic()
    with _exceeded_lock:
        for key in held:
            if _last_exceeded.get(key, 0.0) + EXCEEDED_EVENT_INTERVAL <= clock:
                _last_exceeded[key] = clock
                due.append(key)
    events.record(
        events.other_event(
            "rate_limit.exceeded",
            now,
            queue=queue,
            key=key,
            strategy=held[key].strategy,
            limit=size_of(limits[key], held[key].strategy),
        )
        for key in due
    )


# -- inspection and overrides (§10) ------------------------------------------------

MAX_LISTED_KEYS = 10_000


def known_limit(key: str) -> Limit | None:
    """A key's limit as FETCH would apply it now, or None for a key nothing limits.

    A queue key (``queue:<name>``) is the queue's configuration; any other
    key takes the policy of its oldest live job. Overrides lie on top.
    """

    base: Limit | None = None
    if key.startswith("queue:"):
        queue = Queue.objects.filter(name=key.removeprefix("queue:")).first()
        base = limit_of(queue) if queue is not None else None
    if base is None:
        stored = Job.objects.filter(rate_key=key).exclude(state__in=_FINISHED).order_by("seq").values_list(
            "rate_limit", flat=True
        ).first()
        base = limit_from_dict({**stored, "key": key}) if stored else None
    return with_override(key, base)


def inspect(key: str) -> dict[str, Any] | None:
    """The state of one key (§10.1): its limits with their usage, and its waiting jobs."""

    limit = known_limit(key)
    if limit is None:
        return None
    now = db_now()
    usage = usage_of(limit, now)
    verdict = budget(limit, usage, now)
    out: dict[str, Any] = {"key": key, "on_limit": limit.on_limit}
    if limit.concurrency is not None:
        out["concurrency"] = {
            "limit": limit.concurrency,
            "active": usage.active,
            "available": max(0, limit.concurrency - usage.active),
        }
    if limit.rate is not None:
        out["rate"] = {
            **limit.rate.to_dict(),
            "current_count": usage.starts_in_window,
            "window_resets_at": format_timestamp(
                usage.oldest_start_in_window + limit.rate.period if usage.oldest_start_in_window else None
            ),
        }
    if limit.throttle is not None:
        next_at = usage.last_start + limit.throttle.interval if usage.last_start else None
        out["throttle"] = {**limit.throttle.to_dict(), "next_allowed_at": format_timestamp(max(next_at, now) if next_at else now)}
    waiting = Job.objects.filter(state=JobState.AVAILABLE)
    waiting = waiting.filter(queue=key.removeprefix("queue:")) if key.startswith("queue:") else waiting.filter(rate_key=key)
    out["waiting_count"] = waiting.count()
    out["remaining"] = verdict.remaining
    out["retry_at"] = format_timestamp(verdict.retry_at)
    override = RateLimitOverride.objects.filter(key=key).first()
    if override is not None:
        out["override"] = {**override.limits, "expires_at": format_timestamp(override.expires_at)}
    return out


def keys() -> list[str]:
    """Every key something limits: live jobs' keys, configured queues, overrides (sorted)."""

    found = set(
        Job.objects.filter(rate_key__isnull=False)
        .exclude(state__in=_FINISHED)
        .values_list("rate_key", flat=True)
        .distinct()[:MAX_LISTED_KEYS]
    )
    limited = Queue.objects.filter(
        Q(concurrency__isnull=False) | Q(rate_limit__isnull=False) | Q(throttle__isnull=False)
    )
    found |= {queue_key(name) for name in limited.values_list("name", flat=True)}
    found |= set(RateLimitOverride.objects.values_list("key", flat=True))
    return sorted(key for key in found if key)


def set_override(key: str, limits: dict[str, Any], expires_at: dt.datetime | None) -> None:
    """Store an operator's override of ``key`` (validated by ``parse_limit_fields``)."""

    with transaction.atomic():
        now = db_now()
        RateLimitOverride.objects.update_or_create(
            key=key, defaults={"limits": limits, "expires_at": expires_at, "updated_at": now}
        )
        events.record(
            [events.other_event("rate_limit.overridden", now, key=key, expires_at=format_timestamp(expires_at), **limits)]
        )
    _forget_queue(key)


def clear_override(key: str) -> bool:

    deleted, _ = RateLimitOverride.objects.filter(key=key).delete()
    _forget_queue(key)
    return bool(deleted)


def prune_starts(now: dt.datetime, limit: int) -> int:
    """Delete up to ``limit`` start records no window can reach any more (the reaper's prune loop)."""

    seqs = list(RateLimitStart.objects.filter(expires_at__lt=now).order_by("expires_at").values_list("seq", flat=True)[:limit])
    deleted, _ = RateLimitStart.objects.filter(seq__in=seqs).delete() if seqs else (0, None)
    return deleted


def _forget_queue(key: str) -> None:

    if key.startswith("queue:"):
        forget(key.removeprefix("queue:"))


_FINISHED = sorted(state.value for state in (JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED))
