"""The reaper: runs the timed transitions of the core on their intervals.

``manage.py ojs_reaper`` is a thin wrapper. Each loop moves rows in bounded
batches and repeats while a batch comes back full (at most ``MAX_ROUNDS``
per tick, so one busy loop cannot starve the others). Any number of reapers
may run: the core takes its rows with ``SKIP LOCKED``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, close_old_connections

from .conf import ojs_settings

logger = logging.getLogger("django_ojs.reaper")

MAX_ROUNDS = 20


@dataclass
class Loop:
    name: str
    run: Callable[[int], Any]
    every: float
    next_at: float = 0.0
    totals: dict[str, int] = field(default_factory=dict)


def default_loops(interval: float, cron_interval: float, prune_interval: float) -> list[Loop]:
    from .models import CronJob, Job, Worker

    return [
        Loop("promote", Job.objects.promote_due, interval),
        Loop("expire", Job.objects.expire_overdue, interval),
        Loop("leases", Job.objects.requeue_lapsed, interval),
        Loop("timeouts", Job.objects.fail_timed_out, interval),
        Loop("workers", Worker.objects.reap_dead, interval),
        Loop("cron", CronJob.objects.fire_due, cron_interval),
        Loop("prune", Job.objects.prune, prune_interval),
    ]


class Reaper:
    def __init__(self, loops: list[Loop] | None = None, *, batch_size: int | None = None):
        self.loops = loops or default_loops(
            ojs_settings.REAPER_INTERVAL, ojs_settings.CRON_INTERVAL, ojs_settings.PRUNE_INTERVAL
        )
        self.batch_size = batch_size or ojs_settings.REAPER_BATCH_SIZE
        self.stopping = threading.Event()

    def tick(self, now: float | None = None) -> dict[str, int]:
        """Run every loop that is due; return how many rows each moved."""
        now = time.monotonic() if now is None else now
        moved: dict[str, int] = {}
        for loop in self.loops:
            if now < loop.next_at:
                continue
            loop.next_at = now + loop.every
            moved[loop.name] = self._run(loop)
        return moved

    def _run(self, loop: Loop) -> int:
        total = 0
        for _ in range(MAX_ROUNDS):
            close_old_connections()
            try:
                result = loop.run(self.batch_size)
            except DatabaseError:
                logger.exception("reaper loop %s failed; retrying next tick", loop.name)
                close_old_connections()
                break
            count = sum(result.values()) if isinstance(result, dict) else int(result)
            total += count
            if count and loop.name != "prune":
                logger.info("%s: %d", loop.name, count)
            elif isinstance(result, dict) and count:
                logger.info("prune: %s", ", ".join(f"{k} {v}" for k, v in result.items() if v))
            full = max(result.values()) >= self.batch_size if isinstance(result, dict) else count >= self.batch_size
            if not full:
                break
        return total

    def run_forever(self) -> None:
        logger.info("reaper started (interval %.2fs)", min(loop.every for loop in self.loops))
        while not self.stopping.is_set():
            self.tick()
            wait = max(0.0, min(loop.next_at for loop in self.loops) - time.monotonic())
            self.stopping.wait(wait)
        logger.info("reaper stopped")

    def stop(self, *args: Any) -> None:
        self.stopping.set()
