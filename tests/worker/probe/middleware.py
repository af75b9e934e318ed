"""An execution middleware for the worker tests (``OJS_EXECUTION_MIDDLEWARE``)."""

from __future__ import annotations

import threading


def wrap_result(job, ctx, call_next):
    """Runs around the handler: the result says which thread the chain ran in."""
    result = call_next()
    return {"inner": result, "chain_thread": threading.current_thread().name}
