"""Retry a transaction that met a row another one moved to another partition.

On a partitioned job table (``core/partitions.py``) a move to a terminal state
moves the row to another partition. A statement of READ COMMITTED that then
locks or updates that row -- an ACK waiting on a job a cancel held, a claim
whose snapshot still saw it available -- cannot follow it as it follows an
update in place: PostgreSQL fails it with SQLSTATE 40001 ("tuple to be locked
was already moved to another partition due to concurrent update"). Nothing of
the failed transaction was written, so running it again meets the row where it
is now, and the race ends as it does on one table: a 409 (lease lost, invalid
transition), a job skipped, never a 500 or a crashed worker.

Only a transaction the operation owns can be run again: inside a caller's
``transaction.atomic()`` the error goes to the caller, whose transaction is lost.

The race is with another claimer: two workers probing the same queue head meet the same
rows, and a retry started at once meets the other's next claim and finish just as the
first try did. Each retry therefore waits a short random time first, growing with the
tries, so the two fall out of step.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import OperationalError, connection, transaction

T = TypeVar("T")

# Each retry meets the row's newer version and a row moves to history once; what can fail a
# retry is another row, moved by a claimer in step with this one (see above).
ATTEMPTS = 8
# The most a retry waits first, times its number: 2 ms, 4 ms, ... (under 60 ms in all).
BACKOFF = 0.002
SERIALIZATION_FAILURE = "40001"
MOVED = "moved to another partition"


def is_row_moved(exc: BaseException) -> bool:
    """Is ``exc`` PostgreSQL's refusal to follow a row into another partition?"""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) == SERIALIZATION_FAILURE and MOVED in str(exc)


def retried(operation: Callable[[], T]) -> T:
    """Run ``operation`` (one transaction of its own, or one statement), again while it
    meets a moved row; at most ``ATTEMPTS`` times. In a caller's transaction, once."""
    if connection.in_atomic_block:
        return operation()
    return _tries(operation)


def retried_in_savepoint(operation: Callable[[], T]) -> T:
    """``retried`` for a step of a caller's transaction: each try in a savepoint of its own, so
    a try that meets a moved row is undone alone and the transaction goes on."""

    def in_savepoint() -> T:
        with transaction.atomic():
            return operation()

    return _tries(in_savepoint)


def _tries(operation: Callable[[], T]) -> T:
    for attempt in range(ATTEMPTS):
        try:
            return operation()
        except OperationalError as exc:
            if not is_row_moved(exc) or attempt == ATTEMPTS - 1:
                raise
        time.sleep(random.uniform(0, BACKOFF * (attempt + 1)))
    raise AssertionError("unreachable")


def retried_on_row_movement(function: Callable[..., T]) -> Callable[..., T]:
    """``retried`` as a decorator, for an operation that is one transaction (or one statement)."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> T:
        return retried(lambda: function(*args, **kwargs))

    return run
