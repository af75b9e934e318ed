"""What a handler (and execution middleware) gets beside the job's args."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import sync_to_async

from ..canvas import Signature
from ..core import waits, workflows
from ..core.durable import record_step, steps_of
from ..core.progress import report_progress
from ..core.types import Lease
from ..observe.outage import is_busy, is_unavailable, summary
from ..protocol.durable import check_step_name, check_step_result
from ..protocol.durations import format_timestamp

# One exception for a job that was cancelled, raised here and by job.wait(): django_ojs.JobCancelled.
from ..protocol.errors import InvalidRequest, InvalidTransition, JobCancelled, OJSError
from ..protocol.progress import combine, make
from ..protocol.waits import delay, signal_name

logger = logging.getLogger("django_ojs.worker")

# ojs-progress §6.2: a handler may call ctx.progress() in a tight loop; the
# store is written at most this often, the latest report always.
PROGRESS_INTERVAL = 1.0

if TYPE_CHECKING:
    from ..models import Job

T = TypeVar("T")
# What ``JobContext`` holds until it reads the job's checkpoint.
_UNREAD = object()


def _check_name(name: str) -> None:
    """A step name the wire refuses is a bug in the handler: ValueError, as for a bad checkpoint."""
    try:
        check_step_name(name)
    except InvalidRequest as exc:
        raise ValueError(exc.message) from None


class Snooze(Exception):
    """Raise (or return) from a handler to put the job back for ``seconds``.

    The job is ``scheduled`` again until then, its lease released; the
    attempt it ran is not charged, nothing is written to its error history,
    and its ``snoozes`` count grows (``OJS["MAX_SNOOZES"]`` bounds it: the
    snooze beyond fails the job). Not a failure: a handler's ``except
    Exception`` that re-raises it keeps it working.
    """

    def __init__(self, seconds: float):
        try:
            self.delay = delay(seconds, field="seconds")
        except InvalidRequest as exc:
            raise ValueError(exc.message) from None
        super().__init__(f"snooze for {seconds}s")


class SignalTimeout(Exception):
    """``ctx.wait_for_signal`` without a default: the signal did not come before the wait's deadline.

    Unhandled, it fails the attempt like any error (the retry policy
    decides); the wait's deadline is kept, so a retried attempt that waits
    for the same name times out again at once, unless the signal came since.
    """

    def __init__(self, name: str, until: str | None):
        self.name, self.until = name, until
        super().__init__(f"signal {name!r} did not arrive before {until}")


class Parked(BaseException):
    """Raised by ``ctx.wait_for_signal`` and ``ctx.sleep`` once the job is parked.

    The job is no longer this attempt's: the handler must stop. A
    BaseException, so a handler's ``except Exception`` does not keep running
    a job another worker may claim when it wakes.
    """


# ``wait_for_signal``'s default when the caller gives none: time out with SignalTimeout.
_RAISE: Any = object()


def parks(ctx: JobContext, outcome: BaseException | Any) -> bool:
    """Whether a handler's end (what it raised, or returned) parks its job, every runner's one rule.

    ``Parked``: the wait parked it already. A ``Snooze``, raised or returned,
    is written now, on the attempt's lease; refused (the job was cancelled or
    recovered meanwhile), it is logged and the job left as it is.
    """
    if isinstance(outcome, Parked):
        return True
    if not isinstance(outcome, Snooze):
        return False
    try:
        waits.snooze(ctx.job.id, outcome.delay, lease=ctx.lease)
        ctx.parked = True
    except OJSError as exc:
        logger.warning("job %s (%s): snooze refused: %s", ctx.job_id, ctx.type, exc.message)
    return True


class JobContext:
    """One execution of one job (ojs-middleware §4.4).

    ``heartbeat()`` extends the visibility timeout of the jobs this worker
    holds at once (ojs-worker-protocol §5.4); the worker also does so every
    heartbeat interval, so only a handler that may outlive a short
    visibility timeout between two beats needs it. ``cancelled`` /
    ``raise_if_cancelled()`` let a long handler stop early: Python cannot
    kill a thread, so stopping is cooperative.
    """

    __slots__ = (
        "_beat", "_cancel_reason", "_checkpoint", "_on_cancel", "_progress_pending", "_progress_sent_at",
        "_steps", "deadline", "job", "metadata", "parked", "worker_id",
    )

    def __init__(self, job: Job, worker_id: str, beat: Callable[[], None], deadline: float | None = None):
        self.job = job
        self.worker_id = worker_id
        # Scoped to this execution, for middleware to talk to each other (§4.4).
        self.metadata: dict[str, Any] = {}
        # time.monotonic() after which the worker fails the job with a timeout.
        self.deadline = deadline
        self._beat = beat
        # The job was put back in the store by this attempt (a snooze, a wait): the worker's
        # heartbeat then finds it no longer held, and knows why.
        self.parked = False
        self._cancel_reason: str | None = None
        self._progress_pending: Any = None
        self._progress_sent_at: float | None = None
        # The latest checkpoint this execution knows: the job's as fetched (read at first
        # use), then its own.
        self._checkpoint: Any = _UNREAD
        # The job's recorded steps by name, read at the first use (None: not yet read).
        self._steps: dict[str, Any] | None = None
        # Called once with the reason when the job is cancelled: the async
        # worker cancels the handler's task here (a thread cannot be stopped).
        self._on_cancel: list[Callable[[str], None]] = []

    @property
    def job_id(self) -> str:
        return str(self.job.id)

    @property
    def type(self) -> str:
        return self.job.type

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def args(self) -> list[Any]:
        return self.job.args

    @property
    def meta(self) -> dict[str, Any]:
        return self.job.meta

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def parent_results(self) -> list[Any]:
        """In a workflow, the results of the steps before this one, in step order (else ``[]``)."""
        return list((self.job.extra or {}).get("parent_results") or [])

    @property
    def workflow_id(self) -> str | None:
        return (self.job.extra or {}).get("workflow_id")

    def add_to_batch(self, *jobs: Signature) -> list[Job]:
        """Add jobs (signatures: ``handler.s(...)``) to the batch or group this job is a step of.

        They run like the jobs it was created with, and the batch's callbacks
        fire once, after every job -- these included -- has ended. Committed
        at once (or with the caller's ``transaction.atomic()``); refused with
        ``InvalidTransition`` once the callbacks fired, ``ValueError`` outside
        a batch or group. Returns the jobs enqueued.
        """
        step = (self.job.extra or {}).get("workflow_step")
        if self.workflow_id is None or not isinstance(step, str):
            raise ValueError(f"job {self.job_id} is not a step of a workflow")
        for item in jobs:
            if not isinstance(item, Signature):
                raise TypeError(f"add_to_batch takes signatures (handler.s(...)), not {type(item).__name__}")
        if not jobs:
            return []  # nothing found to add, as a crawler's leaf page: not an error
        body = {"jobs": [item.definition() for item in jobs]}
        try:
            return workflows.add_jobs(self.workflow_id, body, into=workflows.enclosing(step))[1]
        except InvalidRequest as exc:
            if exc.details.get("field") == "into":
                raise ValueError(f"job {self.job_id} is not a job of a batch or group") from None
            raise

    @property
    def time_left(self) -> float | None:
        """Seconds until the execution timeout, or None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    @property
    def lease(self) -> Lease:
        """This attempt's hold on the job: the worker and the attempt it claimed."""
        return Lease(worker_id=self.worker_id, attempt=self.job.attempt)

    @property
    def snoozes(self) -> int:
        """How often the job snoozed before this attempt."""
        return self.job.snoozes

    @property
    def signals(self) -> dict[str, Any]:
        """The signals delivered to the job when this attempt began, by name: their payloads."""
        return {name: entry.get("payload") for name, entry in (self.job.signals or {}).items()}

    def wait_for_signal(self, name: str, timeout: float, *, default: Any = _RAISE) -> Any:
        """The payload of signal ``name``; if it has not come, park the job until it does.

        Parked, the job is ``scheduled`` until the signal or ``timeout``
        seconds after the wait first began, holding no worker slot; this call
        then raises ``Parked`` and the handler ends. When the job wakes, the
        handler runs again from the top (work before the wait should be
        idempotent, or recorded as a durable step), and this call
        returns the payload at once. Past the deadline it returns ``default``,
        or raises ``SignalTimeout`` without one. Written on the attempt's
        lease, under the job's row lock: a signal sent meanwhile is found.
        """
        checked = signal_name(name) if isinstance(name, str) else None
        if checked is None:
            raise ValueError("the signal's name must be a string")
        try:
            wait_for = delay(timeout, field="timeout")
        except InvalidRequest as exc:
            raise ValueError(exc.message) from None
        _, outcome = waits.wait(self.job.id, checked, wait_for, lease=self.lease)
        if outcome.delivered:
            return outcome.payload
        if outcome.timed_out:
            if default is _RAISE:
                raise SignalTimeout(checked, format_timestamp(outcome.until))
            return default
        self.parked = True
        raise Parked(f"waiting for signal {checked!r}")

    def sleep(self, name: str, seconds: float) -> None:
        """A durable timer: park the job for ``seconds``, holding no worker slot, then go on.

        A wait for signal ``name`` that returns None when its time is up (or
        at once, run again after it): the handler re-runs from the top, and
        this call returns once the timer's deadline, set by its first call,
        has passed. Signal ``name`` ends the timer early.
        """
        self.wait_for_signal(name, seconds, default=None)

    def heartbeat(self) -> None:
        """Extend the visibility timeout now (blocks until the heartbeat is written)."""
        self._beat()

    def progress(
        self,
        fraction: float | dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        *,
        message: str | None = None,
    ) -> None:
        """Report how far along this attempt is (ojs-progress): ``ctx.progress(0.4)``,
        ``ctx.progress(data={"rows": 14000})``, ``ctx.progress({"rows": 14000})``,
        ``ctx.progress(0.4, message="loading rows")`` or any mix.

        ``fraction`` is 0.0-1.0 (clamped); it never goes back within an
        attempt. ``message`` is a status line of at most 1,024 characters;
        data and message stay until a later report replaces them. Counts as
        a heartbeat. Fire-and-forget: written at most once a second (the
        latest report is written when the handler returns), and a failed
        write is logged, never raised. A value of the wrong type (or a
        message too long) is a bug in the handler: ValueError.
        """
        if isinstance(fraction, dict) and data is None:
            fraction, data = None, fraction
        try:
            report = make(fraction, data, message)
        except InvalidRequest as exc:
            raise ValueError(exc.message) from None
        pending = self._progress_pending
        self._progress_pending = report if pending is None else combine(pending, report)
        now = time.monotonic()
        if self._progress_sent_at is None or now - self._progress_sent_at >= PROGRESS_INTERVAL:
            self.flush_progress()

    @property
    def progress_pending(self) -> bool:
        """Whether ``progress()`` holds back a report that ``flush_progress()`` would write."""
        return self._progress_pending is not None

    def flush_progress(self) -> None:
        """Write the report ``progress()`` held back, if any (the runner calls it after the handler)."""
        report, self._progress_pending = self._progress_pending, None
        if report is None:
            return
        self._progress_sent_at = time.monotonic()
        try:
            report_progress(self.job.id, report, attempt=self.job.attempt, worker_id=self.worker_id)
        except Exception as exc:  # ojs-progress §4: a report never affects the job
            if is_busy(exc) or is_unavailable(exc):
                # SQLite locked by another writer, or the database away: said in a line, as the
                # heartbeat says it; the next report or the job's end writes progress again.
                logger.warning("progress of job %s not written (%s)", self.job_id, summary(exc))
            else:
                logger.warning("progress of job %s not written", self.job_id, exc_info=True)

    # -- durable jobs: checkpoints and steps (docs/how-to/durable-jobs.md) --------------

    @property
    def last_checkpoint(self) -> dict[str, Any] | None:
        """The latest checkpoint of this job, from an earlier attempt or this one (None: none yet)."""
        if self._checkpoint is _UNREAD:
            self._checkpoint = (self.job.checkpoint or {}).get("state")
        return self._checkpoint

    def checkpoint(self, state: dict[str, Any]) -> None:
        """Keep ``state`` as the point a retry resumes from (ojs-progress §6.4), now.

        Written at once (not throttled like ``progress()``), on this attempt's
        lease, and it counts as a heartbeat. ``state`` is a JSON object of at
        most 16 KiB (ValueError otherwise). Raises ``JobCancelled`` when this
        attempt no longer holds the job: nothing it does from here counts.
        """
        try:
            report = make(checkpoint=state)
        except InvalidRequest as exc:
            raise ValueError(exc.message) from None
        if not report_progress(self.job.id, report, attempt=self.job.attempt, worker_id=self.worker_id):
            self.cancel(f"attempt {self.job.attempt} no longer holds the job: checkpoint refused")
            self.raise_if_cancelled()
        self._checkpoint = state

    @property
    def steps(self) -> dict[str, Any]:
        """The results of the steps this job recorded, by name (a copy; read once per execution)."""
        return dict(self._recorded())

    def run_step(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` as the durable step ``name``, once per job; its result.

        If an earlier attempt recorded ``name``, ``fn`` is not called and the
        recorded result is returned. Otherwise the result (JSON, at most
        16 KiB) is recorded in a transaction that re-checks this attempt's
        lease, then returned as stored (a tuple comes back a list). A body cut
        off before its record (a crash, a kill) runs again on the retry: make
        its side effect idempotent, e.g. ``idempotency_key(name)``. Raises
        ``JobCancelled`` when this attempt no longer holds the job.
        """
        recorded = self._recorded()
        _check_name(name)
        if name in recorded:
            return recorded[name]  # as recorded by an earlier attempt
        # A job already known to be no longer ours starts no step: its record would be refused.
        self.raise_if_cancelled()
        return self._record(name, fn(*args, **kwargs))

    async def arun_step(self, name: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``run_step()`` for ``async def`` handlers: ``await ctx.arun_step("charge", charge, card)``."""
        # Where Django runs the handler's own ORM calls (sync_to_async keeps the thread):
        # the job's thread, or in the event-loop mode asgiref's, on a connection the worker checks.
        recorded = await sync_to_async(self._recorded)()
        _check_name(name)
        if name in recorded:
            return recorded[name]
        self.raise_if_cancelled()
        result = await fn(*args, **kwargs)
        return await sync_to_async(self._record)(name, result)

    def idempotency_key(self, step: str) -> str:
        """``"<job id>:<step>"``: the same for every attempt of this job's step, for the
        service a step calls to recognise a repeat (a payment API's Idempotency-Key)."""
        return f"{self.job.id}:{step}"

    def _recorded(self) -> dict[str, Any]:
        # Read once, at the first step: every record of an earlier attempt committed
        # before that attempt lost the job, so before this one was claimed.
        if self._steps is None:
            self._steps = {step.name: step.result for step in steps_of(self.job)}
        return self._steps

    def _record(self, name: str, result: Any) -> Any:
        try:
            check_step_result(result)
        except InvalidRequest as exc:
            raise ValueError(f"step {name!r}: {exc.message}") from None
        try:
            # As stored, so the first attempt sees what a retry will read (a tuple is a list).
            result = json.loads(json.dumps(result))
            step, _ = record_step(self.job.id, name, result, attempt=self.job.attempt, worker_id=self.worker_id)
        except InvalidTransition as exc:
            self.cancel(f"attempt {self.job.attempt} no longer holds the job: step {name!r} not recorded")
            raise JobCancelled(exc.message) from None
        self._recorded()[name] = step.result
        return step.result

    async def aheartbeat(self) -> None:
        """``heartbeat()`` for ``async def`` handlers: the write runs in a thread, not on the loop."""
        import asyncio

        await asyncio.to_thread(self._beat)

    @property
    def cancelled(self) -> bool:
        return self._cancel_reason is not None

    @property
    def cancel_reason(self) -> str | None:
        return self._cancel_reason

    def raise_if_cancelled(self) -> None:
        if self._cancel_reason is not None:
            raise JobCancelled(self._cancel_reason, job_id=self.job_id)

    def cancel(self, reason: str) -> None:
        """Called by the worker (not by handlers): the job is no longer ours to finish."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
            for callback in list(self._on_cancel):
                callback(reason)

    def on_cancel(self, callback: Callable[[str], None]) -> None:
        """Run ``callback(reason)`` when the job is cancelled (at once if it already is)."""
        # Registered from the worker's loop thread while cancel() may run in
        # its main thread: append first, then look. Either cancel() sees the
        # callback or we see the reason (perhaps both: callbacks must be idempotent).
        self._on_cancel.append(callback)
        if self._cancel_reason is not None:
            callback(self._cancel_reason)
