"""The job store: jobs, their error history, workers, queues, cron, events, API keys.

Rows change state only through the operations of ``django_ojs.core``, each
one transaction, each guarded by the transition table in
``protocol/states.py``. The managers below offer them as methods
(``Job.objects.push()``, ``.fetch()``, ``.ack()``, ...): thin delegations,
kept together here, so the state machine is reached through the models and
its code is one step away.

Indexes are shaped like the questions the core asks (DESIGN invariant 8):
every hot query reads a partial index holding only the rows in the state it
looks for, so a backlog of millions of finished jobs costs FETCH and the
reaper nothing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Concat, StrIndex
from django.db.models.lookups import GreaterThan

from .conf import ojs_settings
from .keys import ApiKeyManager, key_status
from .protocol.cron import MAX_EXPRESSION_LENGTH
from .protocol.states import TERMINAL, WAITING, JobState, WorkerState

if TYPE_CHECKING:
    from .core.types import BeatReply, HeldJob, Lease, LimitReport, Settlement, Verdict, WorkerInfo
    from .protocol.cron_jobs import CronSpec
    from .protocol.envelope import JobSpec
    from .protocol.failure import Failure


def _core() -> ModuleType:
    """The core's operation modules (``core/operations.py``), on first use: they import these
    models at their top, so the models reach them at call time. The one place the package
    imports the core lazily."""
    from .core import operations  # the core imports these models: reached at call time

    return operations


class JobManager(models.Manager["Job"]):
    """``Job.objects``: Django's queries, and the OJS operations on jobs (``django_ojs.core``)."""

    def push(self, spec: JobSpec) -> Job:
        """PUSH one job (``core.push.push``)."""
        return _core().push.push(spec)

    def push_many(self, specs: Sequence[JobSpec]) -> list[Job]:
        """PUSH a batch atomically (``core.push.push_many``)."""
        return _core().push.push_many(specs)

    def fetch(
        self,
        queues: Sequence[str],
        *,
        count: int = 1,
        worker_id: str | None = None,
        visibility_timeout: dt.timedelta | None = None,
        limit_report: LimitReport | None = None,
        types: Sequence[str] | None = None,
    ) -> list[Job]:
        """FETCH: claim up to ``count`` jobs, of ``types`` only when given (``core.claim.fetch``)."""
        return _core().claim.fetch(
            queues, count=count, worker_id=worker_id, visibility_timeout=visibility_timeout,
            limit_report=limit_report, types=types,
        )

    def settle_and_fetch(
        self,
        worker_id: str,
        settlements: Sequence[Settlement],
        queues: Sequence[str],
        count: int,
        limit_report: LimitReport | None = None,
        types: Sequence[str] | None = None,
    ) -> tuple[list[Verdict], list[Job]]:
        """The in-process worker's turn (``core.turn.settle_and_fetch``)."""
        return _core().turn.settle_and_fetch(worker_id, settlements, queues, count, limit_report, types)

    def ack(self, job_id: Any, *, result: Any = None, lease: Lease | None = None) -> Job:
        """ACK: active -> completed (``core.settle.ack``)."""
        core = _core()
        return core.settle.ack(job_id, result=result, lease=lease or core.types.Lease())

    def settle_many(self, settlements: Sequence[Settlement], *, holding: str | None = None) -> list[Verdict]:
        """Write a batch of finished attempts (``core.settle.settle_many``)."""
        return _core().settle.settle_many(settlements, holding=holding)

    def fail(self, job_id: Any, failure: Failure, *, lease: Lease | None = None, requeue: bool = False) -> Job:
        """FAIL an attempt (``core.settle.fail``)."""
        core = _core()
        return core.settle.fail(job_id, failure, lease=lease or core.types.Lease(), requeue=requeue)

    def snooze(self, job_id: Any, delay: dt.timedelta, *, lease: Lease | None = None) -> Job:
        """Put a held job back for ``delay``, no attempt spent (``core.waits.snooze``)."""
        core = _core()
        return core.waits.snooze(job_id, delay, lease=lease or core.types.Lease())

    def wait(self, job_id: Any, name: str, timeout: dt.timedelta, *, lease: Lease | None = None) -> Any:
        """Wait for signal ``name``: (job, WaitOutcome) (``core.waits.wait``)."""
        core = _core()
        return core.waits.wait(job_id, name, timeout, lease=lease or core.types.Lease())

    def signal(self, job_id: Any, name: str, payload: Any = None) -> Job:
        """Deliver a signal to a job (``core.waits.signal``)."""
        return _core().waits.signal(job_id, name, payload)

    def cancel(self, job_id: Any) -> tuple[Job, str | None]:
        """CANCEL (``core.control.cancel``)."""
        return _core().control.cancel(job_id)

    def activate(self, job_id: Any) -> Job:
        """pending -> available (``core.control.activate``)."""
        return _core().control.activate(job_id)

    def resurrect(self, job_id: Any) -> Job:
        """Retry from the dead letter (``core.control.resurrect``)."""
        return _core().control.resurrect(job_id)

    def discard(self, job_id: Any) -> Job:
        """Give up on a waiting job (``core.control.discard``)."""
        return _core().control.discard(job_id)

    def purge_dead(self, job_id: Any) -> None:
        """Delete a discarded job for good (``core.control.purge_dead``)."""
        _core().control.purge_dead(job_id)

    def dead_letter_stats(self) -> dict[str, Any]:
        """The dead letter's figures (``core.stats.dead_letter_stats``)."""
        return _core().stats.dead_letter_stats()

    def promote_due(self, limit: int) -> int:
        """The reaper's promotion of due jobs (``core.maintenance.promote_due``)."""
        return _core().maintenance.promote_due(limit)

    def expire_overdue(self, limit: int) -> int:
        """The reaper's expiry (``core.maintenance.expire_overdue``)."""
        return _core().maintenance.expire_overdue(limit)

    def requeue_lapsed(self, limit: int) -> int:
        """The reaper's recovery of lapsed leases (``core.maintenance.requeue_lapsed``)."""
        return _core().maintenance.requeue_lapsed(limit)

    def fail_timed_out(self, limit: int) -> int:
        """The reaper's execution timeouts (``core.maintenance.fail_timed_out``)."""
        return _core().maintenance.fail_timed_out(limit)

    def prune(self, limit: int) -> dict[str, int]:
        """The reaper's retention (``core.maintenance.prune``)."""
        return _core().maintenance.prune(limit)


class WorkerManager(models.Manager["Worker"]):
    """``Worker.objects``: Django's queries, and the worker protocol's operations (``django_ojs.core``)."""

    def register(self, worker_id: str, info: WorkerInfo | None = None) -> Worker:
        """Register a worker (``core.workers.register``)."""
        core = _core()
        return core.workers.register(worker_id, info or core.types.WorkerInfo())

    def beat(
        self,
        worker_id: str,
        *,
        state: WorkerState | None = None,
        held: Sequence[HeldJob] = (),
        visibility_timeout: dt.timedelta | None = None,
        info: WorkerInfo | None = None,
    ) -> BeatReply:
        """BEAT (``core.workers.beat``)."""
        core = _core()
        return core.workers.beat(
            worker_id, state=state, held=held, visibility_timeout=visibility_timeout, info=info or core.types.WorkerInfo()
        )

    def deregister(self, worker_id: str) -> bool:
        """Deregister a worker that shut down (``core.workers.deregister``)."""
        return _core().workers.deregister(worker_id)

    def set_directive(self, worker_ids: Iterable[str], directive: WorkerState) -> int:
        """Ask workers to go quiet, terminate or run (``core.workers.set_directive``)."""
        return _core().workers.set_directive(worker_ids, directive)

    def reap_dead(self, limit: int) -> int:
        """The reaper's dead-worker recovery (``core.maintenance.reap_dead_workers``)."""
        return _core().maintenance.reap_dead_workers(limit)

    def prune_dead(self, limit: int) -> int:
        """Delete old tombstones of dead workers (``core.maintenance.prune_dead_workers``)."""
        return _core().maintenance.prune_dead_workers(limit)


class QueueManager(models.Manager["Queue"]):
    """``Queue.objects``: Django's queries, and pause, resume and statistics (``django_ojs.core``)."""

    def pause(self, name: str) -> Queue:
        """Pause a queue (``core.queues.pause``)."""
        return _core().queues.pause(name)

    def resume(self, name: str) -> Queue:
        """Resume a queue (``core.queues.resume``)."""
        return _core().queues.resume(name)

    def stats(self, name: str) -> dict[str, Any]:
        """A queue's statistics (``core.stats.queue_stats``)."""
        return _core().stats.queue_stats(name)


class CronJobManager(models.Manager["CronJob"]):
    """``CronJob.objects``: Django's queries, and registration and firing (``django_ojs.core.schedules``)."""

    def register(self, spec: CronSpec) -> tuple[CronJob, bool]:
        return _core().schedules.register(spec)

    def sync_from_code(self, specs: Sequence[CronSpec]) -> dict[str, list[str]]:
        return _core().schedules.sync_from_code(specs)

    def unregister(self, name: str) -> CronJob:
        return _core().schedules.unregister(name)

    def fire_due(self, limit: int) -> int:
        return _core().schedules.fire_due(limit)

    def set_enabled(self, name: str, enabled: bool) -> CronJob | None:
        return _core().schedules.set_enabled(name, enabled)

    def fire_now(self, name: str) -> CronJob | None:
        return _core().schedules.fire_now(name)


def _holds_unique_key() -> GreaterThan:
    """``strpos(unique_states, ',' || state || ',') > 0``: the state is in the job's holding set.

    Built from immutable functions, so PostgreSQL and SQLite accept it in an
    index predicate.
    """
    return GreaterThan(StrIndex("unique_states", Concat(Value(","), "state", Value(","))), 0)


# Plain sorted strings: migrations must not depend on set order or on the enum.
_TERMINAL = sorted(s.value for s in TERMINAL)
_WAITING = sorted(s.value for s in WAITING)
_ACTIVE = JobState.ACTIVE.value


def discarded_kept_until(dead_letter: bool, finished_at: dt.datetime) -> dt.datetime:
    """When retention prunes a job discarded at ``finished_at``, kept as a dead letter or not."""
    return finished_at + dt.timedelta(seconds=ojs_settings.RETENTION["dead_letter" if dead_letter else "discarded"])


class Job(models.Model):
    # Insertion order: the FIFO tie-break after priority (DESIGN invariant 5).
    # UUIDv7's random bits do not order jobs created in the same millisecond.
    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(unique=True, editable=False)

    type = models.CharField(max_length=255)
    queue = models.CharField(max_length=128)
    args = models.JSONField(default=list)
    meta = models.JSONField(default=dict)
    priority = models.SmallIntegerField(default=0)
    state = models.CharField(max_length=16, choices=[(s.value, s.value) for s in JobState])

    # Attempts are charged at claim and only there (DESIGN invariant 2).
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    # Explicit releases ("requeue": true on NACK) return a job without
    # spending an attempt; retry decisions use attempt - releases.
    releases = models.PositiveIntegerField(default=0)
    # Snoozes (docs/how-to/snooze-signals-timers.md): each is also a release,
    # so it spends no attempt; counted apart to bound them (OJS["MAX_SNOOZES"]).
    # A default in the database too: during a rolling deploy, processes still
    # running the code before migration 0019 insert jobs without naming it.
    snoozes = models.PositiveIntegerField(default=0, db_default=0)
    # Signals delivered to the job, by name: {"payload": ..., "received_at": ...}.
    # The first of a name is kept; a handler's wait_for_signal reads them. None: none yet.
    signals = models.JSONField(null=True, blank=True)
    # Every wait a handler declared, by name: {"since": ..., "until": ...}, so a
    # re-run handler's wait keeps the deadline of its first run.
    waits = models.JSONField(null=True, blank=True)
    # The name of the wait the job is parked on (scheduled until a signal or
    # its deadline); None when it waits for nothing.
    waiting_for = models.CharField(max_length=255, null=True, blank=True)
    retry = models.JSONField(default=dict, help_text="Effective retry policy (ojs-retry §2).")
    # Unique jobs (ojs-unique-jobs, docs/how-to/unique-jobs.md): the policy as
    # normalised, its key (SHA-256 hex), the states in which this job holds
    # the key (",active,available,...": the unique index's predicate reads
    # it; NULL = released), and when a period-bound key lapses.
    unique = models.JSONField(null=True, blank=True)
    unique_key = models.CharField(max_length=64, null=True, blank=True)
    unique_states = models.CharField(max_length=96, null=True, blank=True)
    unique_expires_at = models.DateTimeField(null=True, blank=True)
    # The job's own rate limit (ojs-rate-limiting §6) and its key.
    rate_limit = models.JSONField(null=True, blank=True)
    rate_key = models.CharField(max_length=255, null=True, blank=True)
    # Its value of the queue's fairness key (protocol/fairness.py), read at PUSH;
    # NULL while the queue has none, so unfair queues keep it out of every index.
    fair_key = models.CharField(max_length=255, null=True, blank=True)
    timeout = models.DurationField(null=True, blank=True, help_text="Execution timeout; empty = none.")
    visibility_timeout = models.DurationField()
    tags = models.JSONField(default=list, blank=True)
    schema = models.CharField(max_length=2048, blank=True, default="")
    # Attributes OJS does not define, kept and returned as given (ojs-core §5.5 rule 4).
    extra = models.JSONField(default=dict, blank=True)
    # Timestamps as the client wrote them, echoed back verbatim (ojs-json-format §5.3 rule 3).
    given_times = models.JSONField(default=dict, blank=True)
    cron_name = models.CharField(max_length=255, null=True, blank=True)

    created_at = models.DateTimeField()
    enqueued_at = models.DateTimeField(null=True, blank=True)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # When a scheduled or retryable job becomes due.
    run_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # When the job reached any terminal state: pruning and the dead letter order by it.
    finished_at = models.DateTimeField(null=True, blank=True)

    # The reservation: who holds the job and until when (ojs-worker-protocol §5).
    worker_id = models.CharField(max_length=255, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True, help_text="Execution timeout deadline.")

    result = models.JSONField(null=True, blank=True)
    # The latest progress report of one attempt (django_ojs/progress.py reads it).
    progress = models.JSONField(null=True, blank=True)
    # The latest checkpoint (ojs-progress §6.4) of any attempt: {"attempt", "state", "updated_at"}.
    # Unlike progress it outlives its attempt: a retry resumes from it (core/durable.py).
    checkpoint = models.JSONField(null=True, blank=True)
    # How many durable steps it has recorded (JobStep rows): a FETCH reads the steps of
    # the jobs that have some, and of no other, so a job that uses none pays nothing.
    # A database default too: an INSERT that names no such column (code of the release
    # before, during a rolling deploy) still stores a job.
    step_count = models.PositiveIntegerField(default=0, db_default=0)
    error = models.JSONField(null=True, blank=True, help_text="The most recent error.")
    retry_delay_ms = models.BigIntegerField(null=True, blank=True)
    # A discarded job kept for operators (on_exhaustion "dead_letter").
    dead_letter = models.BooleanField(default=False)

    objects = JobManager()

    # What a push did with this job, on the instance it returns (never
    # stored): True when a unique job's existing holder was returned instead
    # of storing a new one (on_conflict "ignore"); the id of the job a new
    # one replaced (on_conflict "replace"). Defined on every instance, so
    # `job.deduplicated` reads False on a job stored anew or loaded later.
    deduplicated: bool = False
    replaced_job_id: uuid.UUID | None = None

    class Meta:
        indexes = [
            # FETCH: next job of a queue, priority high to low, then FIFO.
            models.Index(
                fields=["queue", "-priority", "seq"],
                name="ojs_job_available",
                condition=Q(state=JobState.AVAILABLE.value),
            ),
            # FETCH of a fair queue: the tenants waiting (a skip scan of the
            # keys), then each tenant's next job. Only keyed jobs: an unfair
            # queue's claim cannot choose this index, nor its PUSH pay for it.
            models.Index(
                fields=["queue", "fair_key", "-priority", "seq"],
                name="ojs_job_fair",
                condition=Q(state=JobState.AVAILABLE.value, fair_key__isnull=False),
            ),
            # Reaper: scheduled and retryable jobs that came due.
            models.Index(
                fields=["run_at"],
                name="ojs_job_due",
                condition=Q(state__in=sorted([JobState.SCHEDULED.value, JobState.RETRYABLE.value])),
            ),
            # Reaper: expired visibility leases and execution deadlines; BEAT and
            # dead-worker recovery find a worker's jobs by owner.
            models.Index(
                fields=["lease_expires_at"], name="ojs_job_lease", condition=Q(state=_ACTIVE)
            ),
            models.Index(
                fields=["deadline_at"],
                name="ojs_job_deadline",
                condition=Q(state=_ACTIVE, deadline_at__isnull=False),
            ),
            models.Index(fields=["worker_id"], name="ojs_job_owner", condition=Q(state=_ACTIVE)),
            # Reaper: jobs whose expires_at passed before they ran.
            models.Index(
                fields=["expires_at"],
                name="ojs_job_expiry",
                condition=Q(state__in=_WAITING, expires_at__isnull=False),
            ),
            # Pruning, the failed jobs and throughput figures.
            models.Index(
                fields=["state", "finished_at"], name="ojs_job_finished", condition=Q(state__in=_TERMINAL)
            ),
            # The dead letter (core/dead_letter.py): its list, counts and cap read only its own jobs.
            models.Index(
                fields=["finished_at"],
                name="ojs_job_dead_letter",
                condition=Q(state=JobState.DISCARDED.value, dead_letter=True),
            ),
            # Queue statistics and the admin's filters count by queue and state.
            # Available jobs are left out: ojs_job_available serves them, and
            # FETCH must have no other index to choose. With statistics that
            # predate a queue's backlog, PostgreSQL took this one and sorted
            # the whole backlog on every claim.
            models.Index(
                fields=["queue", "state"],
                name="ojs_job_queue_state",
                condition=~Q(state=JobState.AVAILABLE.value),
            ),
            # The admin: a type filter or search lists newest first straight from
            # this index, and the type filter's choices are read from it without
            # a scan. (meta search has a GIN index, PostgreSQL only: migration 0003.)
            models.Index(fields=["type", "seq"], name="ojs_job_type"),
            # Cron overlap policy: is an earlier instance still unfinished?
            models.Index(
                fields=["cron_name"],
                name="ojs_job_cron_open",
                condition=Q(cron_name__isnull=False) & ~Q(state__in=_TERMINAL),
            ),
            # Rate limits: a key's active and waiting jobs, and the listing of keys.
            models.Index(
                fields=["rate_key", "state"], name="ojs_job_rate_key", condition=Q(rate_key__isnull=False)
            ),
        ]
        constraints = [
            # Unique jobs, enforced by the database: one holder per key. A job
            # holds its key while its state is in its own holding set, so it
            # frees the key the moment it leaves that set, with no write.
            models.UniqueConstraint(
                fields=["unique_key"],
                name="ojs_job_unique_key",
                condition=Q(unique_key__isnull=False) & Q(_holds_unique_key()),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.id} ({self.state})"

    @property
    def kept_until(self) -> dt.datetime | None:
        """When retention prunes this discarded job: ``RETENTION["dead_letter"]`` after it
        finished for a dead letter (sooner past ``dead_letter_max_count``), ``RETENTION["discarded"]``
        for a plain discard; None for a job in any other state (core/dead_letter.py)."""
        if self.state != JobState.DISCARDED or self.finished_at is None:
            return None
        return discarded_kept_until(self.dead_letter, self.finished_at)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until this job ends and return its result (``core.awaiting``).

        Raises ``JobFailed`` when it ends discarded and ``JobCancelled`` when
        cancelled (both carry its last ``error``), ``WaitTimedOut`` when
        ``timeout`` seconds pass first: the job keeps running. ``None`` waits
        as long as it takes. The instance is refreshed with the job's end.
        """
        awaiting = _core().awaiting
        return self._ended(awaiting.wait(self.id, timeout))

    async def await_result(self, timeout: float | None = None) -> Any:
        """``wait`` for async code: the event loop runs on while the job does."""
        awaiting = _core().awaiting
        return self._ended(await awaiting.await_job(self.id, timeout))

    def _ended(self, job: Job) -> Any:
        for name in ("state", "result", "error", "attempt", "completed_at", "finished_at"):
            setattr(self, name, getattr(job, name))
        return _core().awaiting.outcome(job)


class DeadLetterJob(Job):
    """The admin's Failed jobs: every discarded job, dead letters and plain discards (core/dead_letter.py)."""

    class Meta:
        proxy = True
        verbose_name = "failed job"


class Overview(Job):
    """The admin index's entry for the operators' overview page; it lists no rows of its own."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "overview"


class JobError(models.Model):
    """One failed attempt: the job's full error history (ojs-json-format §3.1 ``errors``)."""

    # No constraint in the database: a partitioned job table (core/partitions.py) has no unique
    # constraint on seq to reference. Deleting a job by the ORM still deletes these (in Python);
    # the core's deletes delete them explicitly.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="errors", db_constraint=False)
    attempt = models.PositiveIntegerField()
    type = models.CharField(max_length=255)
    code = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField(blank=True, default="")
    backtrace = models.JSONField(default=list, blank=True)
    details = models.JSONField(null=True, blank=True)
    retryable = models.BooleanField(null=True)
    occurred_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.type}: {self.message[:80]}"


class JobStep(models.Model):
    """A durable step a job's handler completed, with its result (core/durable.py).

    One per step name per job, whatever the attempt: a retry finds the record
    and skips the step. Deleted with the job.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="steps", db_constraint=False)  # as JobError.job
    name = models.CharField(max_length=255)
    # The attempt that completed the step: it held the lease when the record was written.
    attempt = models.PositiveIntegerField()
    result = models.JSONField(null=True, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="ojs_job_step_name")]

    def __str__(self) -> str:
        return f"{self.name} (attempt {self.attempt})"


class Worker(models.Model):
    """A registered worker process and its last heartbeat (ojs-worker-protocol §3, §4)."""

    id = models.CharField(max_length=255, primary_key=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    queues = models.JSONField(default=list, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    labels = models.JSONField(default=list, blank=True)
    # The job types an in-process worker (ojs_worker) has handlers for, and so claims;
    # NULL for a worker that declares none (an HTTP worker): it may run any type of its
    # queues. What "jobs no worker can run" is computed from (core/coverage.py).
    handles = models.JSONField(null=True, blank=True)
    # What the worker last reported, and what an operator asked of it.
    state = models.CharField(max_length=16, choices=[(s.value, s.value) for s in WorkerState])
    directive = models.CharField(
        max_length=16, choices=[(s.value, s.value) for s in WorkerState], default=WorkerState.RUNNING
    )
    directive_set_at = models.DateTimeField(null=True, blank=True)
    active_jobs = models.PositiveIntegerField(default=0)
    active_job_ids = models.JSONField(default=list, blank=True)
    # Handlers still running though their job ended (timed out, cancelled): Python cannot
    # stop a thread, so each keeps a slot, and a worker whose every slot is so held runs
    # nothing while it holds no job. As its last heartbeat said (the in-process worker).
    overrun_handlers = models.PositiveIntegerField(default=0, db_default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    registered_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField()
    # Set when the reaper declares the worker dead (its jobs recovered). The row
    # stays as a tombstone, so a worker that was only frozen or cut off and
    # comes back is recognised: its next FETCH or BEAT revives the row, and
    # whatever it claims is again covered by the heartbeat timeout (DESIGN
    # invariant 13). Pruned after ``RETENTION["dead_workers"]``.
    declared_dead_at = models.DateTimeField(null=True, blank=True)
    # When the reaper last declared it dead, kept when it comes back: a worker that was
    # frozen and revived was still dead for a while, its jobs given to others, and every
    # surface says so ("declared dead in the last hour" counts it).
    last_declared_dead_at = models.DateTimeField(null=True, blank=True)

    objects = WorkerManager()

    class Meta:
        indexes = [models.Index(fields=["last_heartbeat_at"], name="ojs_worker_heartbeat")]

    def __str__(self) -> str:
        return self.id


class ReaperTick(models.Model):
    """One running reaper (``manage.py ojs_reaper``) and when it last ticked.

    Written by the reaper every few seconds (``core/maintenance.record_reaper_tick``),
    so the overview can say "no reaper for N s" from a fact, not by inference from
    overdue jobs. Rows of reapers silent for a day are pruned by the reapers still running.
    """

    id = models.CharField(max_length=255, primary_key=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    last_tick_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.id


class Queue(models.Model):
    """A queue's operator settings. Rows appear on first use, pause or resume."""

    name = models.CharField(max_length=128, primary_key=True)
    paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Configuration (ojs-queue-config §6): the queue's own limits, key
    # "queue:<name>" (NULL = unlimited), and its bound (backpressure).
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    rate_limit = models.JSONField(null=True, blank=True, help_text='{"limit": n, "period": "PT1M"}')
    throttle = models.JSONField(null=True, blank=True, help_text='{"limit": n, "period": "PT1S"}')
    max_size = models.PositiveIntegerField(null=True, blank=True, help_text="Most non-terminal jobs")
    overflow_policy = models.CharField(max_length=16, default="reject")
    # Fairness (protocol/fairness.py): the path of the key FETCH takes turns across; NULL: none.
    fairness_key = models.CharField(max_length=128, null=True, blank=True)
    # Weighted turns: a value's weight is the claims it takes per round (protocol/fairness.py);
    # the values named here, and every other value's. Defaults in the database too: during a
    # rolling deploy, processes of the release before migration 0023 insert queues without them.
    fairness_weights = models.JSONField(default=dict, db_default={}, blank=True, help_text='{"acme": 3, "small": 1}')
    fairness_default_weight = models.PositiveIntegerField(default=1, db_default=1)
    updated_at = models.DateTimeField(null=True, blank=True)

    objects = QueueManager()

    def __str__(self) -> str:
        return self.name


class FairTurn(models.Model):
    """When a fair queue last ended a round of one value of its fairness key: FETCH serves
    the value whose round ended longest ago first (a value never claimed has no row and comes
    before all). Written by fair claims only, at the end of their transaction, in key order."""

    queue = models.CharField(max_length=128)
    fair_key = models.CharField(max_length=255)
    # The queue's claims numbered in order, one more than the queue's highest so far:
    # the order of last claims even within one transaction, whose clock stands still.
    turn = models.BigIntegerField()
    # Claims taken in the value's current round (0 to its weight - 1): the turn passes on,
    # ``turn`` renumbered, when the round ends. A database default too (the queue's reason).
    used = models.PositiveIntegerField(default=0, db_default=0)
    last_claimed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "fair_key"], name="ojs_fair_turn_key")]
        indexes = [models.Index(fields=["queue", "-turn"], name="ojs_fair_turn_last")]

    def __str__(self) -> str:
        return f"{self.queue}/{self.fair_key}"


class RateLimitStart(models.Model):
    """One start of a job under a window or throttle limit: the log a sliding
    window counts. Only limited claims write one; no row is ever updated, so
    no row is hot. Rows are pruned once no window can reach them."""

    seq = models.BigAutoField(primary_key=True)
    key = models.CharField(max_length=255)
    started_at = models.DateTimeField()
    # started_at + the longest period of the key's limits: prunable after.
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["key", "started_at"], name="ojs_rate_start_key"),
            models.Index(fields=["expires_at"], name="ojs_rate_start_expiry"),
        ]

    def __str__(self) -> str:
        return f"{self.key} at {self.started_at}"


class RateLimitOverride(models.Model):
    """An operator's temporary override of a key's limits (ojs-rate-limiting §10.2)."""

    key = models.CharField(max_length=255, primary_key=True)
    # Any of concurrency, rate, throttle; each replaces the policy's own.
    limits = models.JSONField(default=dict)
    expires_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        # The admin's "Rate limits" page lists every limited key, overridden or not.
        verbose_name = "rate limit"

    def __str__(self) -> str:
        return self.key


class CronJob(models.Model):
    """A named recurring schedule (ojs-cron §2)."""

    name = models.CharField(max_length=255, primary_key=True)
    expression = models.CharField(max_length=MAX_EXPRESSION_LENGTH)
    timezone = models.CharField(max_length=64, default="UTC")
    # The job each occurrence enqueues: {"type", "args", "meta", "options"}.
    job_template = models.JSONField()
    overlap_policy = models.CharField(max_length=16, default="skip")
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True, default="")
    last_run_at = models.DateTimeField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    run_count = models.PositiveBigIntegerField(default=0)
    last_job_id = models.UUIDField(null=True, blank=True)
    # Declared in code (@job(cron=...), OJS["CRON"]): the reaper's start-up
    # sync may change or delete it; schedules registered over HTTP it leaves alone.
    from_code = models.BooleanField(default=False)
    # What the code last declared for ``enabled`` (None: registered over HTTP, or not yet
    # synced since this column came). While the code's declaration stays the same, an
    # operator's enable or disable stands (it is their switch); a new declaration wins.
    declared_enabled = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    objects = CronJobManager()

    class Meta:
        # The admin's "Cron schedules" page, named so in its navigation too (the docs' word).
        verbose_name = "cron schedule"
        indexes = [
            models.Index(fields=["next_run_at"], name="ojs_cron_due", condition=Q(enabled=True))
        ]

    def __str__(self) -> str:
        return self.name


class Event(models.Model):
    """A lifecycle event (ojs-events), written in the transaction of its move.

    A job's event keeps the job's fields of its payload (``job_type``,
    ``state``, ``attempt``) in columns and only what the event adds in
    ``extra``, and stores no id: its ``id`` is made from its time and
    ``seq``. Building a JSON payload and a random UUID per
    row, with an index to keep the UUIDs unique, was about half of an
    event's cost, and every job has at least three (docs/explanation/performance.md).
    Events written before that layout keep their whole payload in ``extra``
    and their stored id.
    """

    seq = models.BigAutoField(primary_key=True)
    # The id of an event that is never stored (the event store off, a receiver listening),
    # or was stored before ids were made from seq: otherwise empty (``id``).
    stored_id = models.UUIDField(null=True, blank=True, editable=False, db_column="id")
    type = models.CharField(max_length=64)
    time = models.DateTimeField()
    job_id = models.UUIDField(null=True, blank=True)
    queue = models.CharField(max_length=128, null=True, blank=True)
    job_type = models.CharField(max_length=255, null=True, blank=True)
    state = models.CharField(max_length=16, null=True, blank=True)
    attempt = models.IntegerField(null=True, blank=True)
    extra = models.JSONField(null=True, blank=True, db_column="data")

    class Meta:
        indexes = [
            # No index on time: retention pruning reads the oldest events by seq
            # (core/maintenance._prune_events; migration 0012 says why).
            models.Index(fields=["queue", "type", "seq"], name="ojs_event_queue"),
            # A job's own story on its admin page: its latest events, newest first.
            models.Index(fields=["job_id", "seq"], name="ojs_event_job", condition=Q(job_id__isnull=False)),
            # Retention of the events of no job, oldest first: a job's own go with the job
            # (core/maintenance._prune_events), so a walk of the primary key would meet them first.
            models.Index(fields=["seq"], name="ojs_event_no_job", condition=Q(job_id__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.job_id}"

    @property
    def data(self) -> dict[str, Any]:
        """The payload (ojs-events §3): a job's fields from the columns, then what the event adds."""
        if self.job_type is None:
            return dict(self.extra or {})
        payload: dict[str, Any] = {
            "job_id": str(self.job_id),
            "job_type": self.job_type,
            "queue": self.queue,
            "state": self.state,
            "attempt": self.attempt,
        }
        if self.extra:
            payload.update(self.extra)
        return payload

    @property
    def id(self) -> uuid.UUID:
        """The event's id on every surface: a UUIDv7 of its time in milliseconds, with its ``seq`` as the counter.

        RFC 9562 §6.2 lets a UUIDv7's random bits hold a counter: ``seq`` is
        unique, so the id is too, and it sorts by time as a UUIDv7 should.
        The same row gives the same id on every read.
        """
        if self.stored_id is not None:
            return self.stored_id
        if self.seq is None:
            raise ValueError("an event that is not stored has its id set when it is built")
        millis = int(self.time.timestamp() * 1000) & 0xFFFF_FFFF_FFFF
        counter = self.seq & ((1 << 74) - 1)
        value = millis << 80 | 0x7 << 76 | (counter >> 62) << 64 | 0b10 << 62 | (counter & ((1 << 62) - 1))
        return uuid.UUID(int=value)


class ApiKey(models.Model):
    """A bearer key for the HTTP API; only its SHA-256 digest is stored."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The key's first characters, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="From this moment the key is refused (401); empty: it never expires."
    )

    objects = ApiKeyManager()

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def status(self, now: dt.datetime) -> str:
        """``active``, ``expired`` or ``revoked`` at ``now`` (``keys.key_status``)."""
        return key_status(self.revoked_at, self.expires_at, now)


class Workflow(models.Model):
    """A chain, group, batch or DAG of jobs (ojs-workflows); its tree is ``definition``.

    The row is locked only to advance this workflow (``core/workflows.py``):
    always after the job rows of the move, never before them.
    """

    id = models.UUIDField(primary_key=True, editable=False)
    type = models.CharField(max_length=8)
    name = models.CharField(max_length=255, blank=True, default="")
    state = models.CharField(max_length=16)
    definition = models.JSONField(help_text="The validated tree (django_ojs.protocol.workflows.Node).")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Signals sent to the workflow, by name (as Job.signals): each step's job
    # gets them, the steps not yet started when their job is made.
    signals = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["-created_at"], name="ojs_workflow_created")]

    def __str__(self) -> str:
        return f"{self.type} {self.name or self.id} ({self.state})"


class WorkflowNode(models.Model):
    """One node of a workflow's tree: a job step, a callback, or a nested container.

    Counters are counted from these rows, never kept on a shared row. A job
    step keeps its job's result and error, so the workflow outlives pruned jobs.
    """

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="nodes")
    path = models.CharField(max_length=255)
    kind = models.CharField(max_length=8)
    type = models.CharField(max_length=255)
    state = models.CharField(max_length=16)
    # The job of a step (Job.seq / Job.id, no foreign key: pruning jobs must not touch workflows).
    job_seq = models.BigIntegerField(null=True, blank=True)
    job_id = models.UUIDField(null=True, blank=True)
    inputs = models.JSONField(null=True, blank=True, help_text="The parent_results it started with.")
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "path"], name="ojs_workflow_node_path")]
        indexes = [
            # The settle hook: which settled jobs are workflow steps.
            models.Index(fields=["job_seq"], name="ojs_workflow_node_job", condition=Q(job_seq__isnull=False)),
            # An advance: has a container a member not yet ended (core/workflows.py, without reading them).
            models.Index(fields=["workflow", "path"], name="ojs_workflow_node_open",
                         condition=Q(state__in=["waiting", "pending", "running"])),
        ]

    def __str__(self) -> str:
        return f"{self.path or 'root'} {self.type} ({self.state})"


class StatsBucket(models.Model):
    """How many jobs of one queue made one transition in one minute or one hour: the statistics history.

    Written by the reaper for minutes that have closed (``core/history.py``), never
    by the moves themselves: no counter row that every ACK would update (DESIGN
    invariant 7). Hours are summed from their minutes. A transition with no job in
    a minute has no row (zero). Pruned after ``RETENTION["history_minutes"]`` and
    ``RETENTION["history_hours"]``.
    """

    seq = models.BigAutoField(primary_key=True)
    span = models.CharField(max_length=8, help_text='"minute" or "hour"')
    start = models.DateTimeField()
    queue = models.CharField(max_length=128)
    transition = models.CharField(max_length=16)
    count = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            # Also the index of every read of all queues: a span's buckets over a time range.
            models.UniqueConstraint(fields=["span", "start", "queue", "transition"], name="ojs_stats_bucket"),
        ]
        indexes = [
            # One queue's history: its own buckets, not every queue's over the range (30 days of
            # 20 queues' hours read 70-130 ms through the index above, 5-15 ms through this one).
            models.Index(fields=["span", "queue", "start"], name="ojs_stats_bucket_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.span} {self.start} {self.queue} {self.transition}: {self.count}"


class HistoryCursor(models.Model):
    """How far the statistics history is counted: one row (``id`` 1), locked by the reaper that counts."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    # The first minute counted: the history knows nothing before it.
    began_at = models.DateTimeField()
    # Every minute before this instant is counted; every hour before ``rolled_through`` summed.
    counted_through = models.DateTimeField()
    rolled_through = models.DateTimeField()
    # [[time, event seq], ...]: the newest event's seq read at that time. Every event
    # written later has a higher seq, so counting the events of a minute starts after
    # the mark read before the minute began, not at the start of the table.
    marks = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"history counted through {self.counted_through}"


class MaintenanceMode(models.Model):
    """Maintenance mode (ojs-admin-api §12.1): one row (``id`` 1), read by every process
    through a short cache (``core/maintenance_mode.py``)."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    enabled = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="")
    enabled_at = models.DateTimeField(null=True, blank=True)
    estimated_end = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = verbose_name_plural = "maintenance mode"

    def __str__(self) -> str:
        return "maintenance mode on" if self.enabled else "maintenance mode off"
