"""Database outages: one log line when a component loses the database, one when it is back.

Workers, reapers and the API ride out an outage by retrying (workers keep
the results they computed meanwhile); what they must not do is log a
traceback for every retry. Each component -- a worker's loop, its heartbeat
and listener threads, a reaper, the API of one process -- keeps an
``OutageWatch``: the first failure that means "the database cannot be
reached" logs one warning, the first success after it logs when the outage
ended. Other database errors (a deadlock, a bug) are not outages; the
caller reports those as before.

A connection the server dropped (a restart, a failover) fails its next use
even when the database is back, so the first such failure is worth
retrying at once, on a new connection: ``failures`` counts them in a row.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, close_old_connections

T = TypeVar("T")

# PostgreSQL's "the server is going away or not ready" (beside class 08,
# connection exceptions): admin_shutdown, crash_shutdown, cannot_connect_now
# (starting up, shutting down, in recovery), too_many_connections.
SERVER_GOING_AWAY = frozenset({"57P01", "57P02", "57P03", "53300"})
# SQLite's (a locked database is contention, not an outage).
SQLITE_UNAVAILABLE = ("unable to open database file",)
# SQLite's busy timeout ran out: another writer held the file's lock all along. Contention, not an
# outage and not a fault of ours (on PostgreSQL a deadlock is: our lock order broken, worth its trace).
SQLITE_BUSY = ("database is locked", "database table is locked")
# A server-side prepared statement missing, duplicated or another client's under its name: what
# PgBouncer in transaction mode (before 1.21) does to them. Read as an outage, it misleads.
PREPARED = "prepared statement"
POOLER_HINT = ("behind a transaction pooler? set DISABLE_SERVER_SIDE_CURSORS = True on the database "
               "(docs/how-to/pgbouncer.md)")
_NO_SQLSTATE = object()


def is_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` means the database cannot be reached, not that a statement failed.

    Accepts Django's errors and the driver's own (the worker's listener uses
    a raw psycopg connection); classes are matched by their DB-API names.
    """
    if _is(exc, "InterfaceError"):
        return True  # the connection is closed
    if not _is(exc, "OperationalError"):
        return False
    error, code = _driver_error(exc)
    if code is _NO_SQLSTATE:
        return any(text in str(error) for text in SQLITE_UNAVAILABLE)
    # No SQLSTATE: the server never answered (refused, reset, closed unexpectedly).
    return code is None or code.startswith("08") or code in SERVER_GOING_AWAY


def is_busy(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite's "database is locked": the statement waited for other writers
    past its timeout. Its transaction is rolled back whole; run again, it may well pass."""
    if not _is(exc, "OperationalError"):
        return False
    error, code = _driver_error(exc)
    return code is _NO_SQLSTATE and any(text in str(error) for text in SQLITE_BUSY)


def _driver_error(exc: BaseException) -> tuple[BaseException, Any]:
    """The driver's error (Django re-raises it as the cause of its own) and its SQLSTATE: psycopg 3's
    or psycopg2's, None where the server never answered, ``_NO_SQLSTATE`` for SQLite."""
    error = exc.__cause__ if exc.__cause__ is not None else exc
    return error, getattr(error, "sqlstate", getattr(error, "pgcode", _NO_SQLSTATE))


def _is(exc: BaseException, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def retry_on_new_connection(call: Callable[[], T]) -> T:
    """``call()``; if it fails because the connection is gone, once more on a new connection."""
    try:
        return call()
    except DatabaseError as exc:
        if not is_unavailable(exc):
            raise
        close_old_connections()
        return call()


def summary(exc: BaseException) -> str:
    """The error's first line (drivers add hints on further lines that a log line does not need),
    and what a prepared statement's failure most likely means."""
    lines = str(exc).strip().splitlines()
    line = lines[0] if lines else type(exc).__name__
    if PREPARED in line:
        line += f" -- {POOLER_HINT}"
    return line


class OutageWatch:
    """One component's view of the database: an outage is logged when it starts and when it ends."""

    def __init__(
        self, component: str, logger: logging.Logger, *, meanwhile: str = "retrying until it is back"
    ):
        self.component = component
        self.logger = logger
        self.meanwhile = meanwhile
        self.failures = 0  # calls failed in a row for want of a database
        self._down_since: float | None = None
        self._locked = False  # what the spell since _down_since is: SQLite held by another writer
        self._back_at: float | None = None
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> bool:
        """Record a failed database call; True if it means the database is unreachable.

        Only the first failure of an outage is logged. False for any other
        database error, which the caller reports itself.
        """
        if not is_unavailable(exc):
            return False
        with self._lock:
            self.failures += 1
            if self._down_since is None:
                self._down_since = time.monotonic()
                self.logger.warning(
                    "%s: database unavailable (%s); %s", self.component, summary(exc), self.meanwhile
                )
            return True

    def locked_out(self, exc: BaseException) -> bool:
        """Record a failed database call; True if it waited out SQLite's busy timeout ("database is
        locked"): another writer held the file's lock all along.

        Not an outage -- the database answers -- and nothing to retry on a new connection, but
        every other writer was held as long, the workers' heartbeats too: like an outage, it keeps
        ``settled`` False until the database has been written again for a while. Logged once.
        """
        if not is_busy(exc):
            return False
        with self._lock:
            if self._down_since is None:
                self._down_since, self._locked = time.monotonic(), True
                self.logger.warning(
                    "%s: SQLite stayed locked by another writer past its timeout (%s); %s",
                    self.component, summary(exc), self.meanwhile,
                )
            return True

    def succeeded(self) -> None:
        """Record a database call that worked; logs the end of an outage."""
        if not self.failures and self._down_since is None:
            return
        with self._lock:
            self.failures = 0
            if self._down_since is not None:
                self.logger.warning(
                    "%s: database %s again after %.1fs",
                    self.component,
                    "writable" if self._locked else "available",
                    time.monotonic() - self._down_since,
                )
                self._down_since, self._locked = None, False
                self._back_at = time.monotonic()

    def settled(self, seconds: float) -> bool:
        """False during an outage and for ``seconds`` after it ended: time for others to catch up."""
        return self._down_since is None and (
            self._back_at is None or time.monotonic() - self._back_at >= seconds
        )
