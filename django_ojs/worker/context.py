"""What a handler (and execution middleware) gets beside the job's args."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import Job


class JobCancelled(Exception):
    """Raised by ``ctx.raise_if_cancelled()`` once the job is no longer this worker's to finish.

    Whatever the handler does afterwards is discarded: the job was cancelled,
    timed out, recovered by the server, or failed by a shutdown.
    """


class JobContext:
    """One execution of one job (ojs-middleware §4.4).

    ``heartbeat()`` extends the visibility timeout of the jobs this worker
    holds at once (ojs-worker-protocol §5.4); the worker also does so every
    heartbeat interval, so only a handler that may outlive a short
    visibility timeout between two beats needs it. ``cancelled`` /
    ``raise_if_cancelled()`` let a long handler stop early: Python cannot
    kill a thread, so stopping is cooperative.
    """

    __slots__ = ("job", "worker_id", "metadata", "deadline", "_beat", "_cancel_reason")

    def __init__(self, job: Job, worker_id: str, beat: Callable[[], None], deadline: float | None = None):
        self.job = job
        self.worker_id = worker_id
        # Scoped to this execution, for middleware to talk to each other (§4.4).
        self.metadata: dict[str, Any] = {}
        # time.monotonic() after which the worker fails the job with a timeout.
        self.deadline = deadline
        self._beat = beat
        self._cancel_reason: str | None = None

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
    def time_left(self) -> float | None:
        """Seconds until the execution timeout, or None without one."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def heartbeat(self) -> None:
        """Extend the visibility timeout now (blocks until the heartbeat is written)."""
        self._beat()

    @property
    def cancelled(self) -> bool:
        return self._cancel_reason is not None

    @property
    def cancel_reason(self) -> str | None:
        return self._cancel_reason

    def raise_if_cancelled(self) -> None:
        if self._cancel_reason is not None:
            raise JobCancelled(self._cancel_reason)

    def cancel(self, reason: str) -> None:
        """Called by the worker (not by handlers): the job is no longer ours to finish."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
