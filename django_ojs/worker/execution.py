"""One claimed job on its way through a handler, and how its attempt ended."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, reset_queries

from ..conf import ojs_settings
from ..core.types import Lease
from ..handlers.context import JobContext, parks
from ..handlers.middleware import Middleware, run_execution
from ..handlers.registry import HandlerRegistry
from ..observe.tracing import Consuming
from ..protocol.failure import Failure
from . import failures

if TYPE_CHECKING:
    from ..models import Job


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished attempt: a result (``failure`` None) or a failure; or ``parked``, already written
    (the handler snoozed or waits for a signal: the job is back in the store, nothing to report)."""

    result: Any = None
    failure: Failure | None = None
    parked: bool = False

    @classmethod
    def of_result(cls, result: Any) -> Outcome:
        """A handler's return value as the outcome to report: a result the wire can carry is JSON."""
        if result is not None:
            try:
                json.dumps(result)
            except (TypeError, ValueError) as exc:
                return cls(failure=failures.invalid_result(exc))
        return cls(result=result)


PARKED = Outcome(parked=True)


def ended_by(ctx: JobContext, exc: BaseException, omit_backtraces: bool) -> Outcome:
    """The outcome of a handler that raised ``exc``: parked (a snooze, a wait), or the attempt's failure."""
    if parks(ctx, exc):
        return PARKED
    return Outcome(failure=failures.failure_from_exception(exc, omit_backtrace=omit_backtraces))


class Observed:
    """Metrics and spans around each execution (django_ojs/metrics.py, tracing.py), for both
    runners, the threaded one and the async one; imported only when on, nothing when off."""

    def __init__(self) -> None:
        self.observe: Any = None
        if ojs_settings.METRICS:
            from ..observe.metrics import observe_execution  # the "prometheus" extra, only with metrics on

            self.observe = observe_execution
        self.trace = ojs_settings.TRACING
        self.consumer: Any = None  # tracing.Consuming, with TRACING on
        if self.trace:
            self.consumer = Consuming

    @property
    def off(self) -> bool:
        return self.observe is None and not self.trace

    def around(self, execution: Execution) -> _Around:
        """``with observed.around(execution) as done: return done(run())``: one span and one
        observation per execution, whatever the runner (a coroutine may run inside)."""
        return _Around(self, execution)


class _Around:
    """``Observed.around``'s context manager: a class, not a generator (it wraps every job)."""

    __slots__ = ("execution", "observed", "span", "started")

    def __init__(self, observed: Observed, execution: Execution):
        self.observed, self.execution, self.span = observed, execution, None

    def __enter__(self) -> Callable[[Outcome], Outcome]:
        if self.observed.consumer is not None:
            self.span = self.observed.consumer(self.execution.job, self.execution.ctx.worker_id)
        self.started = time.perf_counter()
        return self.done

    def done(self, outcome: Outcome) -> Outcome:
        if self.span is not None:
            self.span.finished(outcome.failure)
        if self.observed.observe is not None:
            state = "parked" if outcome.parked else "completed" if outcome.failure is None else "failed"
            self.observed.observe(self.execution.job, state, time.perf_counter() - self.started)
        return outcome

    def __exit__(self, *exc_info: object) -> None:
        if self.span is not None:
            self.span.close()


@dataclass(eq=False, slots=True)
class Execution:
    """The runtime's record of a held job.

    It stays in the runtime's table while the job is held *or* its thread is
    still running, and that table's size is the number of slots taken.
    """

    job: Job
    ctx: JobContext
    lease: Lease
    deadline: float | None
    # Decided and waiting to be written (ACK or FAIL); None while running.
    outcome: Outcome | None = None
    # The handler's thread has returned.
    thread_done: bool = False
    # The store no longer counts the job as ours: its outcome was written, or
    # it was cancelled / recovered meanwhile; since when (time.monotonic()).
    released: bool = False
    released_at: float | None = None

    @property
    def job_id(self) -> str:
        return str(self.job.id)

    def release(self) -> None:
        self.released, self.released_at = True, time.monotonic()


class Runner:
    """Runs one execution in an executor thread and returns its ``Outcome``.

    Never raises: an exception from the handler or a middleware becomes the
    failure. Database connections are checked before and after each job, as
    Django does around each request, so a handler that broke its connection
    does not break the next job on the same thread.
    """

    def __init__(self, registry: HandlerRegistry, middlewares: Sequence[Middleware], *, omit_backtraces: bool):
        self.registry = registry
        self.middlewares = list(middlewares)
        self.omit_backtraces = omit_backtraces
        self.observed = Observed()

    def __call__(self, execution: Execution) -> Outcome:
        if self.observed.off:
            return self._run(execution)
        with self.observed.around(execution) as done:
            return done(self._run(execution))

    def _run(self, execution: Execution) -> Outcome:
        job, ctx = execution.job, execution.ctx
        handler = self.registry.get(job.type)
        if handler is None:
            return Outcome(failure=failures.no_handler(job.type, self.registry.types()))
        # A job is the worker's request: like Django's request_started, forget the queries DEBUG logged
        # (9,000 per connection, one connection per handler thread) and check the connection.
        reset_queries()
        close_old_connections()
        try:
            try:
                result = run_execution(self.middlewares, job, ctx, lambda: handler.invoke(ctx, job.args))
            except BaseException as exc:  # SystemExit in a handler must not cost the slot either
                return ended_by(ctx, exc, self.omit_backtraces)
            return PARKED if parks(ctx, result) else Outcome.of_result(result)
        finally:
            ctx.flush_progress()  # the last report a throttled ctx.progress() held back
            close_old_connections()
