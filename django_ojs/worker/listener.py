"""LISTEN for new work on PostgreSQL, so an idle worker sleeps instead of polling.

A trigger NOTIFYs channel ``ojs_available`` with the queue name whenever a
job becomes available (migration 0002): a PUSH, a retry or scheduled job
the reaper promotes, a recovered job. The listener runs in its own thread on
its own connection (in autocommit, as LISTEN needs) and wakes the loop when
one of the worker's queues is named. Should the connection drop, the loop
falls back to the short poll until the listener is back.

``OJS["LISTEN"]`` picks the connection: LISTEN needs a session of its own,
which PgBouncer in transaction mode does not give (the LISTEN would land on
whichever server connection the pooler lent, and the notifications with
it); point it at an alias that reaches PostgreSQL directly, or turn it off.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable

from django.db import DEFAULT_DB_ALIAS, connections

from ..core.queues import AVAILABLE_CHANNEL
from ..observe.outage import OutageWatch

logger = logging.getLogger("django_ojs.worker")

CHANNEL = AVAILABLE_CHANNEL
# How often the listening thread looks up from notifies() to see if it must stop.
STOP_CHECK = 0.25
RECONNECT_DELAY = 1.0


class Listener:
    def __init__(self, queues: Iterable[str], on_work: Callable[[], None], alias: str = DEFAULT_DB_ALIAS):
        self.queues = frozenset(queues)
        self.on_work = on_work
        self.alias = alias
        self.healthy = False
        self._stopping = threading.Event()
        self._outage = OutageWatch("listener", logger)
        self._thread = threading.Thread(target=self._run, name="ojs-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=STOP_CHECK + 1)

    def _run(self) -> None:
        while not self._stopping.is_set():
            wrapper = connections.create_connection(self.alias)
            try:
                wrapper.ensure_connection()
                raw = wrapper.connection
                raw.execute(f"LISTEN {CHANNEL}")
                self._outage.succeeded()
                self.healthy = True
                # Work that arrived while we were not listening.
                self.on_work()
                while not self._stopping.is_set():
                    for notice in raw.notifies(timeout=STOP_CHECK):
                        if notice.payload in self.queues:
                            self.on_work()
            except Exception as exc:
                if not self._stopping.is_set() and not self._outage.failed(exc):
                    logger.warning("LISTEN %s lost (%s); polling until it is back", CHANNEL, exc)
            finally:
                self.healthy = False
                with contextlib.suppress(Exception):
                    wrapper.close()
            self._stopping.wait(RECONNECT_DELAY)
