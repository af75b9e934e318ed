"""The values the core's operations take and give: who holds a job, what a worker reports, what the store did.

Plain data, shared by every door: the HTTP API and the in-process worker
build the same ``Lease`` and ``Settlement``, read the same ``Verdict`` and
``BeatReply``. Everything about a held job names its attempt (DESIGN
invariant 12).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from ..protocol.failure import Failure
from ..protocol.ratelimit import Budget, Limit, size_of
from ..protocol.states import WorkerState

if TYPE_CHECKING:
    from ..models import Job


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

    def holds(self, job: Any) -> bool:
        """Does this lease hold ``job`` (anything with ``worker_id`` and ``attempt``)?"""
        return (not self.worker_id or job.worker_id in (None, self.worker_id)) and (
            self.attempt is None or job.attempt == self.attempt
        )


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


class Settle(Enum):
    """How a failure is settled."""

    POLICY = "policy"  # the retry policy decides: retryable with backoff, or discarded
    REQUEUE = "requeue"  # back to available at once unless attempts are exhausted
    RELEASE = "release"  # back to available, the attempt not charged ("requeue": true)


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker says about itself (ojs-worker-protocol §3.1); None = not told."""

    hostname: str | None = None
    pid: int | None = None
    queues: list[str] | None = None
    concurrency: int | None = None
    labels: list[str] | None = None
    started_at: dt.datetime | None = None
    # The job types it has handlers for (the in-process worker); None: not declared, any type.
    handles: list[str] | None = None
    # Handlers still running though their job ended (``Worker.overrun_handlers``), sent with each beat.
    overrun_handlers: int | None = None

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
    # When an operator last set the directive (None: never): a Resume of a worker quiet
    # on its own sets "running" again, which only this time tells from the default.
    directive_set_at: dt.datetime | None = None


@dataclass
class LimitReport:
    """What held FETCH back, for the binding's rate limit headers (§10.4)."""

    key: str | None = None
    limit: int | None = None
    remaining: int | None = None
    reset_at: dt.datetime | None = None
    now: dt.datetime | None = None  # the database's time of the decision

    def note(self, key: str, limit: Limit, verdict: Budget, now: dt.datetime) -> None:
        """Keep the limit that allows the next start soonest."""
        sooner = verdict.retry_at is not None and (self.reset_at is None or verdict.retry_at < self.reset_at)
        if self.key is None or sooner:
            self.key, self.remaining, self.reset_at = key, verdict.remaining, verdict.retry_at
            self.limit = size_of(limit, verdict.strategy)
            self.now = now

    def seconds_to_wait(self, unknown: float) -> float:
        """How long until a held job may start; ``unknown`` when only a finishing job can tell
        (a concurrency limit)."""
        if self.reset_at is None or self.now is None:
            return unknown
        return max(0.0, (self.reset_at - self.now).total_seconds())


@dataclass
class ClaimOutcome:
    """What a one-statement claim of a queue did (``Engine.claim_queue``)."""

    jobs: list[Job]
    # False: the claimant is a dead worker; nothing was locked or claimed.
    alive: bool
    # False: a candidate needs the stepwise path; the candidates are locked, none claimed.
    plain: bool


@dataclass
class TurnOutcome:
    """What a one-statement worker turn did (``Engine.turn``)."""

    # False: nothing was written or claimed; the caller must run the turn stepwise.
    settled: bool
    jobs: list[Job]
    # False: the statement made no claim (it was not asked to, or its candidates
    # need the stepwise claim); the batch is written, the caller claims after it.
    claimed: bool
