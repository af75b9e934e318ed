"""One claimed job on its way through a handler, and how its attempt ended."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections

from ..core.outcome import Lease
from ..failure import Failure
from . import failures
from .context import JobContext
from .middleware import Middleware, run_execution
from .registry import HandlerRegistry

if TYPE_CHECKING:
    from ..models import Job


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished attempt: a result (``failure`` None) or a failure."""

    result: Any = None
    failure: Failure | None = None


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
    # it was cancelled / recovered meanwhile.
    released: bool = False

    @property
    def job_id(self) -> str:
        return str(self.job.id)


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

    def __call__(self, execution: Execution) -> Outcome:
        job, ctx = execution.job, execution.ctx
        handler = self.registry.get(job.type)
        if handler is None:
            return Outcome(failure=failures.no_handler(job.type, self.registry.types()))
        close_old_connections()
        try:
            try:
                result = run_execution(self.middlewares, job, ctx, lambda: handler.func(ctx, *job.args))
            except BaseException as exc:  # SystemExit in a handler must not cost the slot either
                return Outcome(failure=failures.failure_from_exception(exc, omit_backtrace=self.omit_backtraces))
            if result is not None:
                try:
                    json.dumps(result)
                except (TypeError, ValueError) as exc:
                    return Outcome(failure=failures.invalid_result(exc))
            return Outcome(result=result)
        finally:
            close_old_connections()
