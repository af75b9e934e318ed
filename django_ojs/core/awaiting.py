"""Awaiting a job's end: ``job.wait()``, ``await job.await_result()`` and the HTTP blocking wait.

On PostgreSQL a trigger NOTIFYs channel ``ojs_settled`` once for every
statement that may have ended jobs (migration 0021), with no payload. One
thread per process LISTENs on a connection of its own (``OJS["LISTEN"]``
picks it, as for the worker: PgBouncer in transaction mode cannot LISTEN)
and, on a notification, asks once which of the jobs its process awaits have
ended, then wakes those waiters only: a thousand waiters cost one query per
notification, not a thousand. Notifications arriving together are read as
one.

Each waiter reads its own job before it sleeps and after it wakes, so a
notification sent between the two is never lost; it also reads it every
``LISTEN_POLL_INTERVAL`` while listening (a notification lost with the
listener's connection) and every ``POLL_INTERVAL`` without LISTEN (SQLite,
``OJS["LISTEN"] = False``, or while the listener reconnects).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from ..conf import ojs_settings
from ..models import Job
from ..protocol.errors import JobCancelled, JobFailed, NotFound, WaitTimedOut
from ..protocol.states import TERMINAL, JobState

logger = logging.getLogger("django_ojs.awaiting")

CHANNEL = "ojs_settled"
# How long the listener gathers more notifications before it looks: none, it
# takes what already arrived. A busy store sends one per worker turn; those that
# arrive while a look runs are answered by the next look, so looks never outnumber
# what one connection can ask, and a quiet store wakes a waiter at once.
GATHER = 0.0
# How often the listener looks up from an idle connection to see if it must stop.
STOP_CHECK = 0.25
RECONNECT_DELAY = 1.0


def listen_alias() -> str | None:
    """The database alias to LISTEN on (``OJS["LISTEN"]``), or None: poll only.

    ``True`` on a default database that says it goes through a transaction pooler
    (``DISABLE_SERVER_SIDE_CURSORS``, docs/how-to/pgbouncer.md) is poll only too: a LISTEN there
    stays on the server connection the pooler lent for it, which goes on listening for whichever
    client it is lent to next -- the notifications piled up in other clients and in PgBouncer's
    log -- while the listener hears nothing. An alias named outright is taken as said."""
    setting = ojs_settings.LISTEN
    if setting is False or (setting is True and pooled(DEFAULT_DB_ALIAS)):
        return None
    alias = DEFAULT_DB_ALIAS if setting is True else setting
    if alias not in connections.settings:
        raise ImproperlyConfigured(f"OJS['LISTEN'] names the database {alias!r}, which DATABASES does not define")
    return alias if connections[alias].vendor == "postgresql" else None


def pooled(alias: str) -> bool:
    """Does the database ``alias`` say it goes through a transaction pooler (Django's sign for
    PgBouncer's transaction mode: ``DISABLE_SERVER_SIDE_CURSORS``)?"""
    return bool(settings.DATABASES.get(alias, {}).get("DISABLE_SERVER_SIDE_CURSORS"))


class Waiters:
    """The jobs this process awaits, and the thread that wakes their waiters when they end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[uuid.UUID, list[Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None
        # Said once per outage, not once per reconnect attempt.
        self._lost = False
        # True while LISTENing: waiters then read their job every LISTEN_POLL_INTERVAL, else every POLL_INTERVAL.
        self.listening = False

    def subscribe(self, job_id: uuid.UUID, wake: Callable[[], None]) -> None:
        with self._lock:
            self._waiting.setdefault(job_id, []).append(wake)
            if self._thread is None:
                alias = listen_alias()
                if alias is not None:
                    self._thread = threading.Thread(target=self._run, args=(alias,), name="ojs-awaiting",
                                                    daemon=True)
                    self._thread.start()

    def unsubscribe(self, job_id: uuid.UUID, wake: Callable[[], None]) -> None:
        with self._lock:
            wakes = self._waiting.get(job_id, [])
            with contextlib.suppress(ValueError):
                wakes.remove(wake)
            if not wakes:
                self._waiting.pop(job_id, None)

    def interval(self) -> float:
        """How long a waiter sleeps between reads of its job when nothing wakes it."""
        return float(ojs_settings.LISTEN_POLL_INTERVAL if self.listening else ojs_settings.POLL_INTERVAL)

    def _run(self, alias: str) -> None:
        """Listen while anyone in this process waits; then close the connections and end.

        A process that awaits nothing holds no connection (and a test
        database can be dropped); the next wait starts the thread again.
        """
        try:
            while not self._idle():
                wrapper = connections.create_connection(alias)
                try:
                    wrapper.ensure_connection()
                    raw = wrapper.connection
                    raw.execute(f"LISTEN {CHANNEL}")
                    if self._lost:
                        logger.info("LISTEN %s is back", CHANNEL)
                        self._lost = False
                    self.listening = True
                    self._wake_ended()  # jobs that ended while nobody listened
                    while not self._idle():
                        if any(True for _ in raw.notifies(timeout=STOP_CHECK, stop_after=1)):
                            # What else already arrived, then one look for all of it.
                            for _ in raw.notifies(timeout=GATHER):
                                pass
                            self._wake_ended()
                    return
                except Exception as exc:
                    if not self._lost:
                        logger.warning("LISTEN %s lost (%s); waiters poll until it is back", CHANNEL, exc)
                        self._lost = True
                finally:
                    self.listening = False
                    with contextlib.suppress(Exception):
                        wrapper.close()
                time.sleep(RECONNECT_DELAY)
        finally:
            connections.close_all()  # this thread's own: the one _wake_ended read with

    def _idle(self) -> bool:
        """Nobody waits: the thread is done (forgotten under the lock, so the next wait starts another)."""
        with self._lock:
            if self._waiting:
                return False
            self._thread = None
            return True

    def _wake_ended(self) -> None:
        with self._lock:
            awaited = list(self._waiting)
        if not awaited:
            return
        ended = set(Job.objects.filter(id__in=awaited, state__in=sorted(TERMINAL)).values_list("id", flat=True))
        with self._lock:
            wakes = [wake for job_id in ended for wake in self._waiting.get(job_id, [])]
        for wake in wakes:
            wake()


WAITERS = Waiters()


def read(job_id: Any) -> Job:
    """The job as committed now; NotFound if there is none (never stored, or pruned)."""
    job = Job.objects.filter(id=job_id).first()
    if job is None:
        raise NotFound(f"job {job_id} not found", details={"resource_type": "job", "resource_id": str(job_id)})
    return job


def _timed_out(job: Job, timeout: float | None) -> WaitTimedOut:
    return WaitTimedOut(f"job {job.id} is still {job.state} after {timeout:g} s of waiting",
                        job_id=str(job.id), state=job.state)


def _pause(job: Job, timeout: float | None, deadline: float | None, now: float) -> float:
    """How long a waiter sleeps before its next read: the poll interval, cut to the
    time left; WaitTimedOut once ``deadline`` (on the clock ``now`` reads) has passed."""
    pause = WAITERS.interval()
    if deadline is None:
        return pause
    remaining = deadline - now
    if remaining <= 0:
        raise _timed_out(job, timeout)
    return min(pause, remaining)


def wait(job_id: Any, timeout: float | None = None) -> Job:
    """The job once it is completed, discarded or cancelled; WaitTimedOut after ``timeout`` seconds.

    ``timeout=None`` waits as long as it takes. Call it outside a transaction:
    inside one, PostgreSQL's snapshot may hide the worker's commit.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    woken = threading.Event()
    WAITERS.subscribe(job_id, woken.set)
    try:
        while True:
            woken.clear()  # before the read: a wake from now on is seen by the sleep below
            job = read(job_id)
            if job.state in TERMINAL:
                return job
            woken.wait(_pause(job, timeout, deadline, time.monotonic()))
    finally:
        WAITERS.unsubscribe(job_id, woken.set)


async def await_job(job_id: Any, timeout: float | None = None) -> Job:
    """``wait`` for an event loop: sleeps on the loop, reads the job in Django's sync thread."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(woken.set)

    deadline = None if timeout is None else loop.time() + timeout
    WAITERS.subscribe(job_id, wake)
    try:
        while True:
            woken.clear()
            job = await sync_to_async(read)(job_id)
            if job.state in TERMINAL:
                return job
            pause = _pause(job, timeout, deadline, loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), pause)
    finally:
        WAITERS.unsubscribe(job_id, wake)


def outcome(job: Job) -> Any:
    """A terminal job's result; JobFailed (discarded) or JobCancelled, with its last error, otherwise."""
    if job.state == JobState.COMPLETED:
        return job.result
    if job.state == JobState.CANCELLED:
        raise JobCancelled(f"job {job.id} ({job.type}) was cancelled", job_id=str(job.id), state=job.state,
                           error=job.error)
    message = (job.error or {}).get("message") if isinstance(job.error, dict) else None
    raise JobFailed(f"job {job.id} ({job.type}) was discarded" + (f": {message}" if message else ""),
                    job_id=str(job.id), state=job.state, error=job.error)
