"""What PUSH and FETCH read about a queue, cached per process: its limits and bound, and that its row exists.

A queue's limits (``concurrency``, ``rate_limit``, ``throttle``: the key
``queue:<name>``) and its bound (``max_size``, ``overflow_policy``) live on
its row (ojs-queue-config §6). PUSH and FETCH read them through a
per-process cache refreshed every ``QUEUE_CONFIG_TTL`` seconds, so a queue
with no configuration costs them nothing; a change made elsewhere is seen
within that time, a change made in this process at once. The bound itself is
checked under the queue row's lock (``core/bounds.py``), so the cache only
decides whether to check.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.db import transaction

from ..conf import ojs_settings
from ..models import Queue
from ..protocol.ratelimit import Limit, queue_key, window_from_dict
from .overrides import with_override


@dataclass(frozen=True)
class QueueSettings:
    limit: Limit | None  # None: no queue-level limit
    max_size: int | None
    overflow_policy: str
    # The path FETCH takes turns across (protocol/fairness.py); None: the queue is not fair.
    fairness_key: str | None = None
    # When the queue's configuration last changed (None: never): FETCH of a fair queue mends
    # the keys of jobs pushed by processes that had not yet seen the change (core/fairness.py).
    changed_at: dt.datetime | None = None
    # A fair queue's weights per value (protocol/fairness.py), and every other value's.
    fairness_weights: Mapping[str, int] = field(default_factory=dict)
    fairness_default_weight: int = 1

    def weight_of(self, value: str) -> int:
        return self.fairness_weights.get(value, self.fairness_default_weight)


_UNCONFIGURED = QueueSettings(None, None, "reject")
_cache: dict[str, tuple[float, QueueSettings]] = {}
_cache_lock = threading.Lock()
# Queue names this process has seen committed: a queue row is written once.
known_queues: set[str] = set()


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


def register_queues(names: set[str]) -> None:
    """Give a queue its row on first use, so listings and pause find it."""
    new = names - known_queues
    if not new:
        return
    Queue.objects.bulk_create([Queue(name=name) for name in sorted(new)], ignore_conflicts=True)
    transaction.on_commit(lambda: known_queues.update(new))


def _load(name: str) -> QueueSettings:
    queue = Queue.objects.filter(name=name).first()
    limit = limit_of(queue) if queue is not None else None
    limit = with_override(queue_key(name), limit)
    if queue is None:
        return QueueSettings(limit, None, "reject") if limit else _UNCONFIGURED
    return QueueSettings(limit, queue.max_size, queue.overflow_policy, queue.fairness_key, queue.updated_at,
                         queue.fairness_weights or {}, queue.fairness_default_weight)
