"""The chaos handlers (one per kind of ``tests.chaos.plan``).

Each records its execution (job, attempt, worker, pid, start and end) in
``Execution`` before doing anything else, and stamps the end when it
returns or raises. The start is written before the handler proceeds,
retrying through a database outage; the end, when the database is away,
is written by a background thread once it is back, so the handler still
returns on time and the worker holds its result through the outage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import InterfaceError, OperationalError, connection, connections
from django.utils import timezone

import django_ojs
from django_ojs.handlers.context import JobContext

from ..plan import KINDS, SIGNAL, SIGNALLED_TIMEOUT, SNOOZES, expected_result
from .models import Execution

logger = logging.getLogger("tests.chaos")

PERSIST_FOR = 600.0  # seconds a record keeps being retried
PERSIST_RETRY = 0.2


class FlakyError(Exception):
    pass


class DoomedError(Exception):
    pass


def persist(write: Callable[[], Any]) -> None:
    """Run an idempotent write, retrying while the database is unreachable."""
    deadline = time.monotonic() + PERSIST_FOR
    while True:
        try:
            write()
            return
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            with contextlib.suppress(Exception):  # the connection is broken already
                connection.close()
            time.sleep(PERSIST_RETRY)


def _persist_later(write: Callable[[], Any]) -> None:
    def run() -> None:
        try:
            persist(write)
        except Exception:
            logger.exception("could not record the end of an execution")
        finally:
            connections.close_all()

    threading.Thread(target=run, name="chaos-record", daemon=True).start()


@contextmanager
def recorded(ctx: JobContext) -> Iterator[None]:
    run = Execution(
        run_id=uuid.uuid4(),
        job_id=ctx.job.id,
        attempt=ctx.attempt,
        worker_id=ctx.worker_id,
        pid=os.getpid(),
        started_at=timezone.now(),
    )
    persist(lambda: Execution.objects.bulk_create([run], ignore_conflicts=True))
    outcome = "error"
    try:
        yield
        outcome = "result"
    finally:
        finished_at = timezone.now()

        def stamp() -> None:
            Execution.objects.filter(pk=run.run_id).update(finished_at=finished_at, outcome=outcome)

        try:
            stamp()
        except (OperationalError, InterfaceError):
            _persist_later(stamp)


def _run(ctx: JobContext, kind: str, index: int, seconds: float) -> dict[str, Any]:
    with recorded(ctx):
        if seconds:
            time.sleep(seconds)
        if kind == "flaky" and ctx.attempt == 1:
            raise FlakyError(f"job {index} fails its first attempt")
        if kind == "doomed":
            raise DoomedError(f"job {index} fails every attempt")
        return expected_result(kind, index, ctx.attempt)


def _snooze(ctx: JobContext, kind: str, index: int, seconds: float) -> dict[str, Any]:
    """Snooze SNOOZES times, then complete: every run recorded, the snoozed ones too."""
    with recorded(ctx):
        if ctx.snoozes < SNOOZES:
            raise django_ojs.Snooze(seconds)
        return expected_result(kind, index, ctx.attempt)


def _wait(ctx: JobContext, kind: str, index: int, seconds: float, mode: str) -> dict[str, Any]:
    """Wait for SIGNAL: parked until the signaller sends it, or for ``seconds`` if it never will."""
    with recorded(ctx):
        timeout = seconds if mode == "never" else SIGNALLED_TIMEOUT
        payload = ctx.wait_for_signal(SIGNAL, timeout, default=None)
        return {**expected_result(kind, index, ctx.attempt), "payload": payload}


HANDLERS = {"snoozy": _snooze, "waiter": _wait}
for _kind in KINDS.values():
    if _kind.name != "durable":
        django_ojs.job(_kind.type, **_kind.options())(HANDLERS.get(_kind.name, _run))

# The durable kind's handler, in a module of its own (records its execution with ``recorded`` too).
from . import durable  # noqa: E402, F401
