"""Maintenance mode (ojs-admin-api §12.1): nothing new is handed out or taken in over HTTP.

While it is on:

- FETCH and the in-process worker's turn claim nothing (``core/claim.py``,
  ``core/turn.py``); workers finish what they hold, and their ACKs, FAILs and
  heartbeats are served as always;
- the HTTP PUSH, batch PUSH and workflow creation are refused with 503 and
  ``Retry-After`` (``refuse_pushes``, called by the HTTP doors); jobs the
  project's own code enqueues in-process are stored and wait (README,
  "Decisions");
- scheduled and retryable jobs are not promoted and cron schedules do not
  fire (the reaper);
- everything that keeps held jobs safe goes on: leases, execution timeouts,
  dead workers, pruning, the statistics history.

Leaving it resumes everything: the state is one row, so every process sees
it; each reads it through a per-process cache of ``OJS["QUEUE_CONFIG_TTL"]``
seconds, as it reads a queue's settings (``core/queue_settings.py``), so FETCH
and PUSH pay no query for it. A change made in this process is seen here at
once, elsewhere within that time.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass

from django.db import transaction

from ..conf import ojs_settings
from ..models import MaintenanceMode
from ..protocol.durations import format_timestamp
from ..protocol.errors import InMaintenance
from . import events
from .clock import db_now

ROW = 1
# What Retry-After says when no end was estimated, and the most it says when one was.
RETRY_AFTER_UNKNOWN = 60
RETRY_AFTER_MAX = 3600


@dataclass(frozen=True)
class Maintenance:
    enabled: bool
    reason: str = ""
    enabled_at: dt.datetime | None = None
    estimated_end: dt.datetime | None = None

    def retry_after(self, now: dt.datetime) -> int:
        """Seconds a refused client should wait: until the estimated end (at least 1, at most an hour)."""
        if self.estimated_end is None:
            return RETRY_AFTER_UNKNOWN
        left = (self.estimated_end - now).total_seconds()
        return int(min(max(left, 1), RETRY_AFTER_MAX))

    def to_dict(self, *, flag: str = "enabled") -> dict[str, object]:
        """As health, the configuration and the CLI render it; the admin API names the flag ``maintenance``."""
        return {
            flag: self.enabled,
            "reason": self.reason,
            "enabled_at": format_timestamp(self.enabled_at),
            "estimated_end": format_timestamp(self.estimated_end),
        }


OFF = Maintenance(False)
_cache: list[tuple[float, Maintenance]] = []
_cache_lock = threading.Lock()


def current(*, fresh: bool = False) -> Maintenance:
    """The maintenance state, at most ``QUEUE_CONFIG_TTL`` seconds old (``fresh``: read now).

    The reaper reads it fresh: a duty that answered from the cache would not
    touch the database, and its success would tell the reaper's outage watch
    that the database is back.
    """
    now = time.monotonic()
    if not fresh:
        with _cache_lock:
            if _cache and _cache[0][0] > now:
                return _cache[0][1]
    value = _load()
    with _cache_lock:
        _cache[:] = [(now + ojs_settings.QUEUE_CONFIG_TTL, value)]
    return value


def forget() -> None:
    """Drop this process's cached state (after a change here; tests)."""
    with _cache_lock:
        _cache.clear()


def enter(reason: str = "", estimated_duration: dt.timedelta | None = None) -> Maintenance:
    """Turn maintenance mode on, or change its reason and estimate while it is on (``enabled_at`` stays)."""
    with transaction.atomic():
        now = db_now()
        row, _ = MaintenanceMode.objects.select_for_update().get_or_create(id=ROW)
        newly = not row.enabled
        row.enabled = True
        row.reason = reason
        row.enabled_at = now if newly else row.enabled_at
        row.estimated_end = now + estimated_duration if estimated_duration is not None else None
        row.updated_at = now
        row.save()
        if newly:
            events.record([events.other_event("maintenance.enabled", now, reason=reason,
                                              estimated_end=format_timestamp(row.estimated_end))])
    forget()
    return _state(row)


def leave() -> Maintenance:
    """Turn maintenance mode off: FETCH, HTTP PUSH, promotion and cron resume."""
    with transaction.atomic():
        now = db_now()
        row, _ = MaintenanceMode.objects.select_for_update().get_or_create(id=ROW)
        was_on = row.enabled
        row.enabled, row.reason, row.enabled_at, row.estimated_end, row.updated_at = False, "", None, None, now
        row.save()
        if was_on:
            events.record([events.other_event("maintenance.disabled", now)])
    forget()
    return OFF


def refuse_pushes() -> None:
    """Raise ``InMaintenance`` (503, ``Retry-After``) while maintenance mode is on: the HTTP doors' PUSHes call it."""
    state = current()
    if state.enabled:
        reason = f": {state.reason}" if state.reason else ""
        raise InMaintenance(
            f"the server is in maintenance mode{reason}; no new jobs are taken until it ends",
            retry_after=state.retry_after(db_now()),
            details={"maintenance": True, "estimated_end": format_timestamp(state.estimated_end)},
        )


def handing_out() -> bool:
    """May FETCH and the worker's turn claim jobs now? Not in maintenance mode."""
    return not current().enabled


def _load() -> Maintenance:
    row = MaintenanceMode.objects.filter(id=ROW).first()
    return _state(row) if row is not None else OFF


def _state(row: MaintenanceMode) -> Maintenance:
    if not row.enabled:
        return OFF
    return Maintenance(True, row.reason, row.enabled_at, row.estimated_end)
