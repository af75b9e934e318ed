"""The reaper: runs the timed transitions of the core on their intervals.

``manage.py ojs_reaper`` is a thin wrapper. Each loop moves rows in bounded
batches and repeats while a batch comes back full (at most ``MAX_ROUNDS``
per tick, so one busy loop cannot starve the others). Any number of reapers
may run: the core takes its rows with ``SKIP LOCKED``.

Through a database outage the loops keep failing and retrying; the reaper
logs the outage once, and its end once. Workers could not heartbeat during
it, so after an outage the loops that punish silence (dead workers,
expired leases) wait one ``HEARTBEAT_TIMEOUT`` before they judge anyone:
the core's own check (``restarted_within``) sees a server restart, this one
also an outage without a restart (a cut network, a restarted pooler). On
SQLite a writer that holds the file's lock past the busy timeout (a long
transaction in a shell, a VACUUM of a big file) holds every heartbeat back as
long: the reaper's own writes meet the same lock, and it waits as after an
outage, so it does not declare the whole fleet dead when the lock goes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, close_old_connections, connections

from .conf import ojs_settings
from .core import maintenance, schedules
from .core.partitions import cancelled, lock_not_had
from .handlers.registry import declared_schedules
from .observe.outage import OutageWatch, summary

logger = logging.getLogger("django_ojs.reaper")

MAX_ROUNDS = 20
# The loops that tidy up rather than keep time. A pass of theirs can be long (dropping a day
# partition of a million jobs, their 3 million events deleted first: 56 s on a busy 2-core machine;
# a backlog of deletes), and no promotion, lapsed lease or timeout may wait for it: ``run_forever``
# runs them in a thread of their own.
HOUSEKEEPING = frozenset({"prune", "history"})
# How long a stopping reaper waits for a housekeeping pass to end: each of its steps is a
# transaction of its own, so one cut short is rolled back and is the next reaper's work.
HOUSEKEEPING_STOP_WAIT = 10.0
# How often the statistics history looks for a minute that closed (each is counted once).
HISTORY_INTERVAL = 15.0

# What a loop's count means, for the log: every move is said, at INFO.
MOVES = {
    "promote": "promoted %d due scheduled or retryable job(s) to available",
    "expire": "discarded %d job(s) whose expires_at passed",
    "leases": "recovered %d job(s) whose visibility timeout lapsed",
    "timeouts": "failed %d job(s) past their execution timeout",
    "workers": "recovered %d job(s) of workers declared dead (no heartbeat within HEARTBEAT_TIMEOUT)",
    "cron": "fired %d cron schedule(s)",
    "history": "counted %d minute(s) into the statistics history",
}


@dataclass
class Loop:
    name: str
    run: Callable[[int], Any]
    every: float
    # Reads heartbeats or leases: after an outage it must give workers time to beat again.
    judges_silence: bool = False
    # Runs until it has once reached the database, then never again (the
    # cron-sync at start). A loop that no longer touches the database must not
    # run: its "success" would tell the outage watch the database is back.
    once: bool = False
    finished: bool = False
    next_at: float = 0.0
    totals: dict[str, int] = field(default_factory=dict)


class CodeScheduleSync:
    """The reaper's first move: sync the periodic jobs declared in code into the store.

    A loop rather than a step before the loops, so that it waits through a
    database that is down at start like every other loop; a ``once`` loop, so
    the reaper stops running it after it has succeeded.
    """

    def __call__(self, limit: int) -> int:
        outcome = schedules.sync_from_code(declared_schedules())
        logger.info(
            "cron schedules from code: %s",
            "; ".join(f"{what} {', '.join(names)}" for what, names in outcome.items() if names) or "none",
        )
        return 0


class TickRecord:
    """Records this reaper's tick in the store, under an id of its own (host, pid, a random part)."""

    def __init__(self) -> None:
        self.hostname, self.pid = socket.gethostname(), os.getpid()
        self.id = f"{self.hostname}:{self.pid}:{uuid.uuid4().hex[:8]}"

    def __call__(self, limit: int) -> int:
        return maintenance.record_reaper_tick(self.id, self.hostname, self.pid)


def default_loops(interval: float, cron_interval: float, prune_interval: float) -> list[Loop]:
    return [
        Loop("tick", TickRecord(), maintenance.TICK_RECORD_INTERVAL),
        Loop("cron-sync", CodeScheduleSync(), cron_interval, once=True),
        Loop("promote", maintenance.promote_due, interval),
        Loop("expire", maintenance.expire_overdue, interval),
        Loop("leases", maintenance.requeue_lapsed, interval, judges_silence=True),
        Loop("timeouts", maintenance.fail_timed_out, interval),
        Loop("workers", maintenance.reap_dead_workers, interval, judges_silence=True),
        Loop("cron", schedules.fire_due, cron_interval),
        Loop("prune", maintenance.prune, prune_interval),
        Loop("history", maintenance.record_history, HISTORY_INTERVAL),
    ]


class Reaper:
    def __init__(self, loops: list[Loop] | None = None, *, batch_size: int | None = None):
        self.loops = loops or default_loops(
            ojs_settings.REAPER_INTERVAL, ojs_settings.CRON_INTERVAL, ojs_settings.PRUNE_INTERVAL
        )
        self.batch_size = batch_size or ojs_settings.REAPER_BATCH_SIZE
        self.stopping = threading.Event()
        self._outage = OutageWatch("reaper", logger)
        # The housekeeping thread's own: its connection lost (a pg_terminate_backend of a long
        # DELETE) is no outage of the timekeeping, whose lease and dead-worker duties would then
        # wait a whole HEARTBEAT_TIMEOUT before judging anyone.
        self._housekeeping_outage = OutageWatch("reaper housekeeping", logger)

    def tick(
        self, now: float | None = None, loops: list[Loop] | None = None, outage: OutageWatch | None = None
    ) -> dict[str, int]:
        """Run every loop (of ``loops``, when given) that is due, one after another; return how
        many rows each moved. ``outage``: the watch of the thread that runs them."""
        now = time.monotonic() if now is None else now
        outage = outage or self._outage
        moved: dict[str, int] = {}
        for loop in self.loops if loops is None else loops:
            if loop.finished or now < loop.next_at:
                continue
            loop.next_at = now + loop.every
            if loop.judges_silence and not outage.settled(ojs_settings.HEARTBEAT_TIMEOUT):
                continue
            moved[loop.name] = self._run(loop, outage)
        return moved

    def _run(self, loop: Loop, outage: OutageWatch) -> int:
        total = 0
        for _ in range(MAX_ROUNDS):
            close_old_connections()
            try:
                result = loop.run(self.batch_size)
            except DatabaseError as exc:
                if lock_not_had(exc) or cancelled(exc):
                    # A lock_timeout the database sets (a role's, say) and a table an operator holds,
                    # or an operator's pg_cancel_backend of a long statement: expected, said in a
                    # line. The prune's own lock timeouts it handles itself.
                    logger.warning("reaper loop %s: %s; next tick tries again", loop.name, summary(exc))
                elif not outage.failed(exc) and not outage.locked_out(exc):
                    logger.exception("reaper loop %s failed; retrying next tick", loop.name)
                close_old_connections()
                break
            outage.succeeded()
            loop.finished = loop.once
            count = sum(result.values()) if isinstance(result, dict) else int(result)
            total += count
            if count and loop.name != "prune":
                # Counting the minute that closed is routine, not a move of jobs: said at DEBUG.
                level = logging.DEBUG if loop.name == "history" else logging.INFO
                logger.log(level, MOVES.get(loop.name, loop.name + ": %d"), count)
            elif isinstance(result, dict) and count:
                logger.info("prune: %s", ", ".join(f"{k} {v}" for k, v in result.items() if v))
            full = max(result.values()) >= self.batch_size if isinstance(result, dict) else count >= self.batch_size
            if not full:
                break
        return total

    def run_forever(self) -> None:
        """Run the loops until stopped: those that keep time in this thread, the ``HOUSEKEEPING``
        ones in another, each thread on a database connection of its own."""
        logger.info("reaper started (interval %.2fs)", min(loop.every for loop in self.loops))
        timekeeping = [loop for loop in self.loops if loop.name not in HOUSEKEEPING]
        housekeeping = [loop for loop in self.loops if loop.name in HOUSEKEEPING]
        if not (timekeeping and housekeeping):
            self._keep(self.loops, self._outage)
        else:
            housekeeper = threading.Thread(target=self._keep, args=(housekeeping, self._housekeeping_outage),
                                           name="ojs-reaper-housekeeping", daemon=True)
            housekeeper.start()
            self._keep(timekeeping, self._outage)
            # Stopping: time is kept while a housekeeping pass ends, for HOUSEKEEPING_STOP_WAIT at most.
            deadline = time.monotonic() + HOUSEKEEPING_STOP_WAIT
            while housekeeper.is_alive() and time.monotonic() < deadline:
                self.tick(loops=timekeeping)
                housekeeper.join(min(self.until_next(time.monotonic(), timekeeping), deadline - time.monotonic()))
            if housekeeper.is_alive():
                logger.info("reaper: a housekeeping pass was still running; the next reaper takes it up")
            connections.close_all()
        logger.info("reaper stopped")

    def _keep(self, loops: list[Loop], outage: OutageWatch) -> None:
        try:
            while not self.stopping.is_set():
                self.tick(loops=loops, outage=outage)
                self.stopping.wait(self.until_next(time.monotonic(), loops))
        finally:
            if threading.current_thread() is not threading.main_thread():
                connections.close_all()  # the housekeeping thread's own

    def until_next(self, now: float, loops: list[Loop] | None = None) -> float:
        """Seconds until the next loop (of ``loops``) is due. A finished ``once`` loop is never due
        again: counting its past due time would make the reaper spin without sleeping."""
        loops = self.loops if loops is None else loops
        pending = [loop.next_at for loop in loops if not loop.finished]
        return max(0.0, min(pending) - now) if pending else max(loop.every for loop in loops)

    def stop(self, *args: Any) -> None:
        self.stopping.set()
