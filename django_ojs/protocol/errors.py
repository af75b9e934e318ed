"""The errors the core raises, one class per OJS error code (pure).

The core speaks in OJS error codes; each door maps them in one place: the
HTTP layer to a status and the binding's error body (``api/errors.py``), the
admin to a message. Nothing here knows about HTTP.
"""

from __future__ import annotations

from typing import Any


class OJSError(Exception):
    """Base of every error the core reports to a caller."""

    code = "backend_error"
    retryable = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.hint = hint


class FieldError(OJSError):
    """An error about one input field, named in ``details.field``."""

    def __init__(self, message: str, *, field: str | None = None, **kwargs: Any):
        details = kwargs.pop("details", None) or {}
        if field is not None:
            details.setdefault("field", field)
        super().__init__(message, details=details, **kwargs)
        self.field = field


class InvalidRequest(FieldError):
    """Malformed input: a missing field, a wrong type, a bad name or timestamp."""

    code = "invalid_request"


class InvalidPayload(OJSError):
    """The body is not parseable JSON (errors §4.1 INVALID_PAYLOAD)."""

    code = "invalid_payload"


class PolicyInvalid(FieldError):
    """Syntactically valid but semantically wrong policy, e.g. a retry policy (422)."""

    code = "validation_error"


class PayloadTooLarge(OJSError):
    code = "payload_too_large"


class NotFound(OJSError):
    code = "not_found"


class InvalidTransition(OJSError):
    """The move is not allowed from the job's current state, or lost a race.

    The single exception type for every refused state change (DESIGN: core
    invariant 1); ``current_state`` tells the caller what the job is now.
    """

    code = "conflict"

    def __init__(self, message: str, *, job_id: str, current_state: str | None, **kwargs: Any):
        details = {"job_id": job_id, "current_state": current_state}
        details.update(kwargs.pop("details", None) or {})
        super().__init__(message, details=details, **kwargs)
        self.job_id = job_id
        self.current_state = current_state


class Conflict(OJSError):
    """A request the resource's present state refuses, other than a job's move (``InvalidTransition``):
    quieting a dead worker, deregistering a live one."""

    code = "conflict"


class Duplicate(OJSError):
    code = "duplicate"


class Unsupported(OJSError):
    code = "unsupported"


class QueuePaused(OJSError):
    code = "queue_paused"
    retryable = True


class DuplicateJob(Duplicate):
    """A unique job's key is held by another job and its policy says ``reject``
    (ojs-unique-jobs §5.1). ``existing_job_id`` names the holder."""

    def __init__(self, message: str, *, existing_job_id: str, existing_job_state: str, uniqueness_key: str):
        super().__init__(
            message,
            details={
                "existing_job_id": existing_job_id,
                "existing_job_state": existing_job_state,
                "uniqueness_key": uniqueness_key,
            },
        )
        self.existing_job_id = existing_job_id
        self.existing_job_state = existing_job_state
        self.uniqueness_key = uniqueness_key


class QueueFull(OJSError):
    """A bounded queue is at its ``max_size`` and its overflow policy is ``reject``
    (ojs-queue-config §6.1)."""

    code = "queue_full"
    retryable = True
    retry_after = 1  # seconds: a bounded queue drains as workers finish jobs


class InMaintenance(OJSError):
    """The server is in maintenance mode and takes no new jobs over HTTP (ojs-admin-api §12.1):
    503 with ``Retry-After``, as an unreachable backend is, so clients wait and retry."""

    code = "backend_unavailable"
    retryable = True

    def __init__(self, message: str, *, retry_after: int, details: dict[str, Any] | None = None):
        super().__init__(message, details={**(details or {}), "retry_after_seconds": retry_after},
                         hint="Maintenance mode is on; retry after Retry-After seconds.")
        self.retry_after = retry_after


class Busy(OJSError):
    """This process already serves as many of something bounded as it may (progress streams):
    503 with ``Retry-After``, so clients wait and retry, as for an unreachable backend."""

    code = "backend_unavailable"
    retryable = True

    def __init__(self, message: str, *, retry_after: int, hint: str, details: dict[str, Any] | None = None):
        super().__init__(message, details={**(details or {}), "retry_after_seconds": retry_after}, hint=hint)
        self.retry_after = retry_after


class WaitTimedOut(OJSError):
    """A wait for a job's result ended before the job did (ojs-results §8.2: 408). The job goes on;
    ``state`` is the one it was in when the wait ended."""

    code = "timeout"
    retryable = True

    def __init__(self, message: str, *, job_id: str, state: str):
        super().__init__(message, details={"job_id": job_id, "state": state},
                         hint="The job is still running: wait again, or poll GET /ojs/v1/jobs/{id}.")
        self.job_id = job_id
        self.state = state


class JobNotCompleted(Exception):
    """An awaited job ended without a result: discarded (``JobFailed``) or cancelled (``JobCancelled``).

    ``error`` is the job's last error as stored (``{"type", "message", ...}``), None if it never failed.
    """

    def __init__(self, message: str, *, job_id: str | None = None, state: str | None = None, error: Any = None):
        super().__init__(message)
        self.job_id = job_id
        self.state = state
        self.error = error


class JobFailed(JobNotCompleted):
    """The awaited job was discarded: its attempts ran out, or it failed for good."""


class JobCancelled(JobNotCompleted):
    """The job was cancelled: raised by ``job.wait()`` for the job awaited, and by
    ``ctx.raise_if_cancelled()`` in the handler of a job no longer its worker's to finish
    (cancelled, timed out, recovered by the server, failed by a shutdown: the message says which)."""
