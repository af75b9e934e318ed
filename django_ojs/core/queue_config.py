"""Queue configuration as PUSH and FETCH read it (ojs-queue-config §6).

A queue's limits (``concurrency``, ``rate_limit``, ``throttle``: the key
``queue:<name>``) and its bound (``max_size``, ``overflow_policy``) live on
its row. PUSH and FETCH read them through a per-process cache refreshed
every ``QUEUE_CONFIG_TTL`` seconds, so a queue with no configuration costs
them nothing; a change made elsewhere is seen within that time, a change
made in this process at once. The bound itself is checked under the queue
row's lock, so the cache only decides whether to check.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..conf import ojs_settings
from ..durations import format_timestamp
from ..errors import InvalidRequest, QueueFull
from ..failure import Failure
from ..ratelimit import Limit, parse_limit_fields, queue_key, window_from_dict
from ..states import TERMINAL, JobState, Move, target
from . import events
from .clock import db_now

if TYPE_CHECKING:
    from ..models import Job, Queue

OVERFLOW_POLICIES = ("reject", "drop_oldest")
CONFIG_FIELDS = ("concurrency", "rate_limit", "throttle", "max_size", "overflow_policy")


@dataclass(frozen=True)
class QueueSettings:
    limit: Limit | None  # None: no queue-level limit
    max_size: int | None
    overflow_policy: str


_UNCONFIGURED = QueueSettings(None, None, "reject")
_cache: dict[str, tuple[float, QueueSettings]] = {}
_cache_lock = threading.Lock()


def settings_of(name: str) -> QueueSettings:
    """The queue's limits and bound, at most ``QUEUE_CONFIG_TTL`` seconds old."""
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(name)
    if cached is not None and cached[0] > now:
        return cached[1]
    value = _load(name)
    with _cache_lock:
        _cache[name] = (now + ojs_settings.QUEUE_CONFIG_TTL, value)
    return value


def forget(name: str | None = None) -> None:
    """Drop cached settings (after a change in this process; tests)."""
    with _cache_lock:
        if name is None:
            _cache.clear()
        else:
            _cache.pop(name, None)


def limit_of(queue: Queue) -> Limit | None:
    """The queue row's own limit (without overrides), or None when it sets none."""
    limit = Limit(
        key=queue_key(queue.name),
        concurrency=queue.concurrency,
        rate=window_from_dict(queue.rate_limit),
        throttle=window_from_dict(queue.throttle),
    )
    if limit.concurrency is None and limit.rate is None and limit.throttle is None:
        return None
    return limit


def _load(name: str) -> QueueSettings:
    from ..models import Queue
    from .limits import with_override

    queue = Queue.objects.filter(name=name).first()
    limit = limit_of(queue) if queue is not None else None
    limit = with_override(queue_key(name), limit)
    if queue is None:
        return QueueSettings(limit, None, "reject") if limit else _UNCONFIGURED
    return QueueSettings(limit, queue.max_size, queue.overflow_policy)


def parse_config(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Validate a configuration update; only the fields given change (null clears)."""
    from ..ratelimit import parse_window

    unknown = sorted(set(body) - set(CONFIG_FIELDS))
    if unknown:
        raise InvalidRequest(
            f"unknown queue configuration fields: {', '.join(unknown)} (known: {', '.join(CONFIG_FIELDS)})",
            field=unknown[0],
        )
    changes: dict[str, Any] = {}
    if "concurrency" in body:
        changes["concurrency"] = parse_limit_fields({"concurrency": body["concurrency"]}, "", key=name).concurrency
    for field in ("rate_limit", "throttle"):
        if field in body:
            window = parse_window(body[field], field)
            changes[field] = window.to_dict() if window else None
    if "max_size" in body:
        value = body["max_size"]
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10**9):
            raise InvalidRequest("max_size must be an integer from 1 to 1000000000, or null", field="max_size")
        changes["max_size"] = value
    if "overflow_policy" in body:
        if body["overflow_policy"] not in OVERFLOW_POLICIES:
            raise InvalidRequest(
                f"overflow_policy must be one of {', '.join(OVERFLOW_POLICIES)} "
                "(a PUSH never blocks: 'block' is not offered)",
                field="overflow_policy",
            )
        changes["overflow_policy"] = body["overflow_policy"]
    return changes


def render_config(queue: Queue) -> dict[str, Any]:
    return {
        "concurrency": queue.concurrency,
        "rate_limit": queue.rate_limit,
        "throttle": queue.throttle,
        "max_size": queue.max_size,
        "overflow_policy": queue.overflow_policy,
    }


# -- bounded queues (backpressure) -------------------------------------------------


def make_room(manager: Any, jobs: Iterable[Job], now: dt.datetime) -> None:
    """Enforce ``max_size`` for the queues these new jobs go to, before they are stored.

    The queue row is locked (``FOR UPDATE``) while counting, so concurrent
    PUSHes to one bounded queue are counted one after the other; unbounded
    queues take no lock. ``reject`` refuses the whole PUSH with 429
    ``queue_full``; ``drop_oldest`` discards the oldest waiting jobs.
    """
    from ..models import Queue

    incoming: dict[str, int] = {}
    for job in jobs:
        incoming[job.queue] = incoming.get(job.queue, 0) + 1
    for name in sorted(incoming):
        if settings_of(name).max_size is None:
            continue
        queue = Queue.objects.select_for_update().filter(name=name).first()
        if queue is None or queue.max_size is None:
            continue
        live = manager.filter(queue=name).exclude(state__in=sorted(TERMINAL)).count()
        excess = live + incoming[name] - queue.max_size
        if excess <= 0:
            continue
        if queue.overflow_policy == "drop_oldest" and incoming[name] <= queue.max_size:
            _drop_oldest(manager, name, excess, now)
            continue
        raise QueueFull(
            f"queue {name!r} holds {live} of at most {queue.max_size} jobs; "
            f"{incoming[name]} more do not fit",
            details={"queue": name, "max_size": queue.max_size, "size": live},
        )


def _drop_oldest(manager: Any, name: str, count: int, now: dt.datetime) -> None:
    """Discard the ``count`` oldest jobs that have not started (ojs-queue-config §6.1)."""
    from ..models import JobError

    waiting = [JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE, JobState.PENDING]
    victims = list(
        manager.select_for_update(skip_locked=True).filter(queue=name, state__in=waiting).order_by("seq")[:count]
    )
    if len(victims) < count:
        raise QueueFull(
            f"queue {name!r} is full and too few of its jobs are waiting to make room",
            details={"queue": name},
        )
    failure = Failure(type="overflow", message=f"dropped to make room in bounded queue {name!r}", retryable=False)
    stamp = format_timestamp(now)
    for job in victims:
        job.state = target(Move.DISCARD)
        job.finished_at = now
        job.run_at = None
        job.error = failure.as_dict(job.attempt, stamp)
    manager.bulk_update(victims, ["state", "finished_at", "run_at", "error"])
    JobError.objects.bulk_create(
        JobError(job_id=job.seq, attempt=job.attempt, type=failure.type, message=failure.message,
                 retryable=False, occurred_at=now)
        for job in victims
    )
    events.record(events.job_event("job.discarded", job, now, reason="overflow") for job in victims)
    # A dropped workflow step fails its step. When this PUSH is itself a
    # workflow's next step, that workflow's row is already held: README
    # "Workflows" notes the one lock-order exception this makes.
    from .workflows import advance

    advance({job.seq: job.state for job in victims})


def update(name: str, changes: Mapping[str, Any]) -> Queue:
    """Apply a validated configuration change; the row is created if the queue had none."""
    from ..models import Queue

    with transaction.atomic():
        now = db_now()
        queue, _ = Queue.objects.select_for_update().get_or_create(name=name)
        for field, value in changes.items():
            setattr(queue, field, value)
        queue.updated_at = now
        queue.save()
        events.record([events.other_event("queue.config_updated", now, queue=name, **render_config(queue))])
    forget(name)
    return queue
