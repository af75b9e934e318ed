"""A queue's configuration: read and changed by operators (ojs-queue-config §6).

``parse_config`` validates a change as the API and the admin's queue page
send it, ``update`` stores it; PUSH and FETCH read the result through
``core/queue_settings.py``, whose cache this process forgets at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from ..models import Queue
from ..protocol import fairness
from ..protocol.envelope import validate_queue_name
from ..protocol.errors import InvalidRequest
from ..protocol.ratelimit import parse_limit_fields, parse_window
from . import events
from .clock import db_now
from .fairness import rekey
from .queue_settings import forget

OVERFLOW_POLICIES = ("reject", "drop_oldest")
CONFIG_FIELDS = (
    "concurrency", "rate_limit", "throttle", "max_size", "overflow_policy",
    "fairness_key", "fairness_weights", "fairness_default_weight",
)


def parse_config(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Validate a configuration update; only the fields given change (null clears)."""
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
    if "fairness_key" in body:
        changes["fairness_key"] = fairness.parse_path(body["fairness_key"])
    if "fairness_weights" in body:
        changes["fairness_weights"] = fairness.parse_weights(body["fairness_weights"])
    if "fairness_default_weight" in body:
        changes["fairness_default_weight"] = fairness.parse_default_weight(body["fairness_default_weight"])
    return changes


def render_config(queue: Queue) -> dict[str, Any]:
    return {
        "concurrency": queue.concurrency,
        "rate_limit": queue.rate_limit,
        "throttle": queue.throttle,
        "max_size": queue.max_size,
        "overflow_policy": queue.overflow_policy,
        "fairness_key": queue.fairness_key,
        "fairness_weights": queue.fairness_weights or {},
        "fairness_default_weight": queue.fairness_default_weight,
    }


def update(name: str, changes: Mapping[str, Any]) -> Queue:
    """Apply a validated configuration change; the row is created if the queue had none.

    ``name`` must be a name a job could be enqueued to (``InvalidRequest`` otherwise): a
    queue configured from code under any other name would be listed and never used."""
    validate_queue_name(name, "name")
    with transaction.atomic():
        now = db_now()
        queue, _ = Queue.objects.select_for_update().get_or_create(name=name)
        if "fairness_key" in changes and changes["fairness_key"] != queue.fairness_key:
            # The values FETCH takes turns across are read at PUSH: the waiting jobs get the new key's.
            rekey(name, changes["fairness_key"])
        for field, value in changes.items():
            setattr(queue, field, value)
        queue.updated_at = now
        queue.save()
        events.record([events.other_event("queue.config_updated", now, queue=name, **render_config(queue))])
    forget(name)
    return queue


def describe_limits(queue: Queue | None, active: object) -> str:
    """A queue's limits with their use, its bound and its fairness in one line, as the admin's
    Queues page and ``manage.py ojs queues`` say them: ``2 / 5 active; rate 60 per PT1M; max size
    1,000 (reject); fair by meta.tenant (weights acme 3; others 1)``, or ``none``. ``active``: its
    active jobs, as the caller counted them."""
    if queue is None:
        return "none"
    parts = []
    if queue.concurrency is not None:
        parts.append(f"{active} / {queue.concurrency} active")
    for label, window in (("rate", queue.rate_limit), ("throttle", queue.throttle)):
        if window:
            parts.append(f"{label} {window['limit']} per {window['period']}")
    if queue.max_size is not None:
        parts.append(f"max size {describe_bound(queue)}")
    if queue.fairness_key is not None:
        parts.append(f"fair by {queue.fairness_key}{_weights_of(queue)}")
    return "; ".join(parts) or "none"


def describe_bound(queue: Queue) -> str:
    """A bounded queue's bound and what happens past it: ``1,000 (reject)``."""
    return f"{queue.max_size:,} ({queue.overflow_policy})"


def _weights_of(queue: Queue) -> str:
    """A fair queue's weights: " (weights acme 3, small 1; others 1)"; "" when every value weighs 1."""
    named = queue.fairness_weights or {}
    if not named and queue.fairness_default_weight == 1:
        return ""
    listed = ", ".join(f"{value} {weight}" for value, weight in sorted(named.items()))
    return f" (weights {listed + '; ' if listed else ''}others {queue.fairness_default_weight})"
