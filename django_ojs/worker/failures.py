"""Turn what a handler raised into the error a FAIL reports (pure).

ojs-core §8.1: ``type`` is the exception class name, ``message`` its text,
``backtrace`` one string per frame, innermost first (the spec's examples),
capped at 50 frames and 10,000 characters by ``cap_backtrace``.
"""

from __future__ import annotations

import traceback

from ..protocol.failure import MAX_MESSAGE_CHARS, Failure, cap_backtrace

# The error types the runtime itself reports.
NO_HANDLER = "HandlerNotFound"
TIMEOUT = "timeout"  # ojs-timeouts §7.1, the type the reaper uses too
SHUTDOWN = "ShutdownError"  # ojs-graceful-shutdown §5.3
INVALID_RESULT = "InvalidResult"
# Failures that put the job back, ``available`` with its attempt refunded: not the job's fault.
RELEASED = frozenset({SHUTDOWN, NO_HANDLER})


def backtrace_frames(exc: BaseException) -> list[str]:
    """``at function (file:line)`` per frame, innermost first, as ojs-core §8.2 shows."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f"at {frame.name} ({frame.filename}:{frame.lineno})" for frame in reversed(frames)]


def failure_from_exception(exc: BaseException, *, omit_backtrace: bool = False) -> Failure:
    """The FAIL error for an exception; the retry policy decides what follows.

    ``details.error_class`` carries the dotted path too (the binding's name
    for it), so ``non_retryable_errors`` may name ``"ValueError"`` or
    ``"myapp.errors.PaymentDeclined"``.
    """
    message = str(exc) or repr(exc)
    cls = type(exc)
    return Failure(
        type=cls.__name__,
        message=message[:MAX_MESSAGE_CHARS],
        backtrace=[] if omit_backtrace else cap_backtrace(backtrace_frames(exc)),
        details={"error_class": f"{cls.__module__}.{cls.__qualname__}"},
    )


def no_handler(job_type: str, known: list[str]) -> Failure:
    """A job this worker claimed but has no handler for (it was unregistered since the claim).

    The worker claims only its handlers' types, so this is rare; the job is
    put back (``RELEASED``), its attempt refunded, for a worker that has the
    handler -- never discarded: a missing handler is the deployment's fault,
    not the job's.
    """
    hint = f"; registered types: {', '.join(known)}" if known else "; no handler is registered"
    return Failure(
        type=NO_HANDLER,
        message=f"no handler is registered for job type {job_type!r} in this worker{hint}; the job was put back",
        retryable=True,
    )


def timed_out(limit_seconds: float) -> Failure:
    return Failure(
        type=TIMEOUT,
        message=f"job execution exceeded its timeout of {limit_seconds:g} seconds",
        retryable=True,
        details={"timeout_kind": "execution", "limit_seconds": limit_seconds},
    )


def shutdown(reason: str) -> Failure:
    """Interrupted by a worker shutdown: not the job's fault, retryable (§5.3)."""
    return Failure(type=SHUTDOWN, message=reason, retryable=True)


def invalid_result(exc: Exception) -> Failure:
    return Failure(
        type=INVALID_RESULT,
        message=f"the handler returned a value that is not JSON-serializable: {exc}",
        retryable=False,
    )
