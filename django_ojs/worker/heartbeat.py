"""The heartbeat thread: BEAT every interval, and on demand.

Its own thread (and so its own database connection), so heartbeats go on
while the loop is busy, while it drains at shutdown (ojs-graceful-shutdown
§5.2), and while a handler blocks. A failed heartbeat is logged and retried
at the next interval; it never changes the worker's state (ojs-worker-protocol
§4.6).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, close_old_connections

from ..core.types import BeatReply, HeldJob, WorkerInfo
from ..core.workers import beat
from ..observe.outage import OutageWatch
from ..protocol.states import WorkerState

logger = logging.getLogger("django_ojs.worker")

# Bound on how long ctx.heartbeat() waits for its beat to be written.
ON_DEMAND_TIMEOUT = 30.0


class Heartbeat:
    def __init__(
        self,
        worker_id: str,
        interval: float,
        snapshot: Callable[[], tuple[WorkerState, list[HeldJob], int]],
        on_reply: Callable[[BeatReply], None],
    ):
        self.worker_id = worker_id
        self.interval = interval
        self._snapshot = snapshot
        self._on_reply = on_reply
        self._cond = threading.Condition()
        self._requested = False
        self._state_once: WorkerState | None = None
        self._stopping = False
        self._written = 0  # beats written so far, for beat_now() to wait on
        self._busy = False  # a beat is being written
        self._outage = OutageWatch("heartbeat", logger)
        self._thread = threading.Thread(target=self._run, name="ojs-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self, *, report: WorkerState | None = None) -> None:
        """Beat as soon as possible; ``report`` overrides the reported state for that beat."""
        with self._cond:
            self._requested = True
            if report is not None:
                self._state_once = report
            self._cond.notify_all()

    def beat_now(self) -> None:
        """Beat and wait until it is written (``ctx.heartbeat()``)."""
        with self._cond:
            # A beat already under way may have read its job list before the
            # caller's job was there: wait for the one after it.
            target = self._written + 2 if self._busy else self._written + 1
            self._requested = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._written >= target or self._stopping, timeout=ON_DEMAND_TIMEOUT)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=ON_DEMAND_TIMEOUT)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested or self._stopping, timeout=self.interval)
                if self._stopping:
                    return
                self._requested = False
                report, self._state_once = self._state_once, None
                self._busy = True
            try:
                self._beat(report)
            finally:
                with self._cond:
                    self._busy = False
                    self._written += 1
                    if report is not None:
                        # The override was one word for one beat (the quiet of a SIGTERM,
                        # ojs-graceful-shutdown §5.1): the worker's own state follows at once,
                        # so no surface says quiet for an interval about a worker that drains.
                        self._requested = True
                    self._cond.notify_all()

    def _beat(self, report: WorkerState | None) -> None:
        state, held, overrun = self._snapshot()
        try:
            reply = beat(self.worker_id, state=report or state, held=held, info=WorkerInfo(overrun_handlers=overrun))
        except DatabaseError as exc:
            unreachable = self._outage.failed(exc)
            if not unreachable:
                logger.warning("heartbeat failed (%s); retrying in %gs", exc, self.interval)
            close_old_connections()
            if unreachable and self._outage.failures == 1:
                self.request()  # perhaps only a connection the server dropped: retry at once on a new one
            return
        except Exception:
            logger.exception("heartbeat failed; retrying in %gs", self.interval)
            return
        self._outage.succeeded()
        self._on_reply(reply)
