"""Testing helpers (ojs-testing): assert what your code enqueued, run jobs in the test itself.

Jobs go to the real store -- the test database your test runner created --
through the real ``enqueue``: envelope validation, handler defaults, enqueue
middleware, unique keys and transactional enqueue behave exactly as in
production. What changes is who runs them:

- **manual** (``manual()``): nothing runs until the test says so. Assert
  with ``assert_enqueued`` / ``refute_enqueued`` / ``enqueued_jobs``, then
  ``drain()`` runs what is queued, one job at a time in the test's thread,
  retries included (their backoff is not waited out).
- **inline** (``inline()``): each ``enqueue`` runs its job at once, in the
  caller's thread, before returning. A handler's exception is recorded as
  the attempt's failure and then raised to the caller (ojs-testing §5.2: no
  retry); a scheduled job runs at once too.

Both run jobs as ``ojs_worker`` does -- claimed, the execution middleware
around the handler, the result ACKed or the failure FAILed through the core
-- but not its runtime: no timeouts, heartbeats, slots, signals, rate or
concurrency limits. Test those against a real ``ojs_worker``.

A context sees only the jobs enqueued since it began (``clear_all()``
starts again): with pytest-django's ``db`` fixture or Django's ``TestCase``
each test also gets an empty, rolled-back database. See docs/how-to/testing.md
for pytest fixtures and ``TestCase`` use.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import producer
from ..core.claim import fetch
from ..core.settle import ack, fail
from ..core.testing import claim_job, make_due
from ..core.types import Lease
from ..handlers.context import JobContext, Parked, Snooze, parks
from ..handlers.middleware import execution_chain, run_execution
from ..handlers.registry import registry
from ..models import Job
from ..protocol.failure import Failure
from ..worker import failures

__all__ = [
    "JobsUnderTest",
    "OJSTestMixin",
    "assert_completed",
    "assert_enqueued",
    "assert_failed",
    "assert_performed",
    "clear_all",
    "current",
    "drain",
    "enqueued_jobs",
    "inline",
    "manual",
    "refute_enqueued",
]

WORKER_ID = "django-ojs-testing"
_UNSET: Any = object()
# drain()'s guard against handlers that enqueue jobs forever.
MAX_DRAINED = 10_000


@dataclass
class Ran:
    """One attempt run by ``drain()`` or inline mode."""

    job: Job
    result: Any = None
    error: BaseException | None = None
    # The handler snoozed or waits for a signal: the job is scheduled again.
    parked: bool = False

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class JobsUnderTest:
    """One test's view of the job store; use through ``manual()`` / ``inline()``."""

    mode: str
    since_seq: int = 0
    ran: list[Ran] = field(default_factory=list)

    # -- what was enqueued ------------------------------------------------------------

    def enqueued_jobs(self, type: str | None = None, *, queue: str | None = None) -> list[Job]:
        """Jobs enqueued in this context (by any door: enqueue, HTTP PUSH, cron), oldest first."""
        jobs = Job.objects.filter(seq__gt=self.since_seq)
        if type is not None:
            jobs = jobs.filter(type=type)
        if queue is not None:
            jobs = jobs.filter(queue=queue)
        return list(jobs.order_by("seq"))

    def assert_enqueued(
        self, type: str, *, args: Any = _UNSET, queue: str | None = None,
        meta: Mapping[str, Any] | None = None, count: int | None = None,
    ) -> list[Job]:
        """At least one (or exactly ``count``) job of ``type`` matching ``args`` (equal),
        ``queue`` and ``meta`` (a subset) was enqueued; return the matches."""
        matches, others = self._match(type, args, queue, meta)
        if (count is None and not matches) or (count is not None and len(matches) != count):
            wanted = _describe_wanted(type, args, queue, meta)
            expected = "at least 1" if count is None else str(count)
            raise AssertionError(
                f"expected {expected} job(s) {wanted}, found {len(matches)}.\n"
                + _listing("jobs enqueued in this test that did not match", others)
            )
        return matches

    def refute_enqueued(
        self, type: str, *, args: Any = _UNSET, queue: str | None = None, meta: Mapping[str, Any] | None = None,
    ) -> None:
        matches, _ = self._match(type, args, queue, meta)
        if matches:
            raise AssertionError(
                f"expected no job {_describe_wanted(type, args, queue, meta)}.\n" + _listing("found", matches)
            )

    def _match(
        self, type: str, args: Any, queue: str | None, meta: Mapping[str, Any] | None
    ) -> tuple[list[Job], list[Job]]:
        matches: list[Job] = []
        others: list[Job] = []
        for job in self.enqueued_jobs():
            ok = (
                job.type == type
                and (args is _UNSET or job.args == _as_json(args))
                and (queue is None or job.queue == queue)
                and (meta is None or all(job.meta.get(k, _UNSET) == v for k, v in _as_json(meta).items()))
            )
            (matches if ok else others).append(job)
        return matches, others

    # -- what ran -----------------------------------------------------------------------

    def assert_performed(self, type: str, *, args: Any = _UNSET) -> list[Ran]:
        """A job of ``type`` (with ``args``) was run in this context, by ``drain()`` or inline."""
        runs = [r for r in self.ran if r.job.type == type and (args is _UNSET or r.job.args == _as_json(args))]
        if not runs:
            raise AssertionError(f"no job of type {type!r} ran; ran: {[r.job.type for r in self.ran]}")
        return runs

    def assert_completed(self, type: str, *, args: Any = _UNSET) -> list[Job]:
        return self._assert_state(type, args, ("completed",), "completed")

    def assert_failed(self, type: str, *, args: Any = _UNSET) -> list[Job]:
        """A job of ``type`` failed an attempt and is now retryable or discarded."""
        return self._assert_state(type, args, ("retryable", "discarded"), "retryable or discarded")

    def _assert_state(self, type: str, args: Any, states: Sequence[str], said: str) -> list[Job]:
        jobs = [j for j in self.enqueued_jobs(type) if args is _UNSET or j.args == _as_json(args)]
        found = [j for j in jobs if j.state in states]
        if not found:
            raise AssertionError(
                f"no job of type {type!r} is {said}; " + (", ".join(f"{j.id}: {j.state}" for j in jobs) or "none enqueued")
            )
        return found

    # -- running ------------------------------------------------------------------------

    def drain(
        self, queue: str | Sequence[str] | None = None, *, with_scheduled: bool = False, max_jobs: int = MAX_DRAINED,
    ) -> list[Ran]:
        """Run what is queued until nothing is left: available jobs, retries (at once), and with
        ``with_scheduled`` scheduled ones; jobs the handlers enqueue meanwhile too.

        ``queue``: one queue, several, or every queue (None). Jobs run one at a
        time in FETCH order (priority, then FIFO). Returns the attempts run.
        A paused queue, or a rate or concurrency limit, holds its jobs back as
        in production. ``max_jobs`` stops a handler that enqueues forever.
        """
        queues = [queue] if isinstance(queue, str) else (list(queue) if queue is not None else None)
        ran: list[Ran] = []
        while len(ran) < max_jobs:
            make_due(queues, scheduled=with_scheduled)
            names = queues if queues is not None else _queues_with_available_jobs()
            # Only types with a handler, as the worker claims: the others stay available.
            claimed = fetch(names, count=1, types=registry.types()) if names else []
            if not claimed:
                break
            ran.append(self._run(claimed[0]))
        else:
            raise AssertionError(f"drain() ran {max_jobs} jobs and jobs were still coming; is a handler looping?")
        return ran

    def run_now(self, job: Job) -> Ran | None:
        """Claim ``job`` and run it at once (inline mode); None if it is not waiting to run."""
        claimed = claim_job(job.id, WORKER_ID)
        return None if claimed is None else self._run(claimed)

    def _run(self, job: Job) -> Ran:
        lease = Lease(attempt=job.attempt)
        handler = registry.get(job.type)
        chain = execution_chain()
        chain.freeze()
        ctx = JobContext(job, WORKER_ID, beat=lambda: None)
        failure: Failure | None = None
        result: Any = None
        error: BaseException | None = None
        if handler is None:
            error = LookupError(f"no handler is registered for job type {job.type!r}")
            failure = failures.no_handler(job.type, registry.types())
        else:
            try:
                result = run_execution(list(chain), job, ctx, lambda: handler.invoke(ctx, job.args))
            except Parked as exc:
                return self._parked(job, ctx, exc)
            except Exception as exc:  # any handler error is the attempt's failure
                if isinstance(exc, Snooze):
                    return self._parked(job, ctx, exc)
                error, failure = exc, failures.failure_from_exception(exc)
            else:
                if isinstance(result, Snooze):
                    return self._parked(job, ctx, result)
                try:
                    json.dumps(result)
                except (TypeError, ValueError) as exc:
                    error, failure = exc, failures.invalid_result(exc)
            finally:
                ctx.flush_progress()  # the last report a throttled ctx.progress() held back, as the worker writes it
        if failure is not None:
            fail(job.id, failure, lease=lease, requeue=failure.type in failures.RELEASED)
            outcome = Ran(job, error=error)
        else:
            ack(job.id, result=result, lease=lease)
            outcome = Ran(job, result=result)
        job.refresh_from_db()
        self.ran.append(outcome)
        return outcome

    def _parked(self, job: Job, ctx: JobContext, ending: BaseException) -> Ran:
        parks(ctx, ending)  # a Snooze is written here, as the worker writes it
        job.refresh_from_db()
        outcome = Ran(job, parked=True)
        self.ran.append(outcome)
        return outcome

    def clear_all(self) -> None:
        """Forget what was enqueued and run so far (the jobs stay in the store)."""
        self.since_seq = _last_seq()
        self.ran.clear()


# -- the context stack -----------------------------------------------------------------

_active: list[JobsUnderTest] = []


def current() -> JobsUnderTest:
    if not _active:
        raise RuntimeError("no django_ojs.testing context: use `with testing.manual():` or the ojs_jobs fixture")
    return _active[-1]


@contextlib.contextmanager
def manual() -> Iterator[JobsUnderTest]:
    """Jobs are stored and wait; ``drain()`` runs them."""
    with _context("manual") as jobs:
        yield jobs


@contextlib.contextmanager
def inline() -> Iterator[JobsUnderTest]:
    """Each enqueue runs its job at once in the caller's thread; a failure raises there."""
    with _context("inline") as jobs:
        yield jobs


@contextlib.contextmanager
def _context(mode: str) -> Iterator[JobsUnderTest]:
    jobs = JobsUnderTest(mode, since_seq=_last_seq())
    _active.append(jobs)
    observer = _run_inline if mode == "inline" else None
    if observer:
        producer.stored_observers.append(observer)
    try:
        yield jobs
    finally:
        if observer:
            producer.stored_observers.remove(observer)
        _active.remove(jobs)


def _run_inline(stored: list[Job | None]) -> None:
    jobs = current()
    if jobs.mode != "inline":
        return
    for job in stored:
        if job is None or job.deduplicated:
            continue
        outcome = jobs.run_now(job)
        # Mirror the run on the object enqueue returns.
        job.refresh_from_db()
        if outcome is not None and outcome.error is not None:
            raise outcome.error


def _last_seq() -> int:
    return Job.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


def _queues_with_available_jobs() -> list[str]:
    return sorted(set(Job.objects.filter(state="available").values_list("queue", flat=True).distinct()))


def _as_json(value: Any) -> Any:
    # Tuples become lists on their way into the store; compare as stored.
    return json.loads(json.dumps(value))


def _describe_wanted(type: str, args: Any, queue: str | None, meta: Mapping[str, Any] | None) -> str:
    parts = [f"of type {type!r}"]
    if args is not _UNSET:
        parts.append(f"with args {_as_json(args)!r}")
    if queue is not None:
        parts.append(f"on queue {queue!r}")
    if meta is not None:
        parts.append(f"with meta including {dict(meta)!r}")
    return " ".join(parts)


def _listing(title: str, jobs: list[Job]) -> str:
    if not jobs:
        return f"{title}: none"
    lines = [f"  - {j.type} args={j.args!r} queue={j.queue!r} meta={j.meta!r} ({j.state})" for j in jobs[:20]]
    more = f"\n  ... and {len(jobs) - 20} more" if len(jobs) > 20 else ""
    return f"{title}:\n" + "\n".join(lines) + more


# -- module-level shortcuts on the current context -------------------------------------------


def enqueued_jobs(type: str | None = None, *, queue: str | None = None) -> list[Job]:
    return current().enqueued_jobs(type, queue=queue)


def assert_enqueued(type: str, **criteria: Any) -> list[Job]:
    return current().assert_enqueued(type, **criteria)


def refute_enqueued(type: str, **criteria: Any) -> None:
    current().refute_enqueued(type, **criteria)


def assert_performed(type: str, **criteria: Any) -> list[Ran]:
    return current().assert_performed(type, **criteria)


def assert_completed(type: str, **criteria: Any) -> list[Job]:
    return current().assert_completed(type, **criteria)


def assert_failed(type: str, **criteria: Any) -> list[Job]:
    return current().assert_failed(type, **criteria)


def drain(queue: str | Sequence[str] | None = None, **options: Any) -> list[Ran]:
    return current().drain(queue, **options)


def clear_all() -> None:
    current().clear_all()


class OJSTestMixin:
    """For Django's ``TestCase``: each test runs in ``manual()`` (``ojs_mode = "inline"`` for inline),
    with the context as ``self.ojs``."""

    ojs_mode = "manual"

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        context = inline() if self.ojs_mode == "inline" else manual()
        self.ojs = self.enterContext(context)  # type: ignore[attr-defined]
