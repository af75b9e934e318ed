"""Queues: pause and resume (ojs-http-binding §11).

Queue rows hold operator settings only; counts are derived from the job
table (``core/stats.py``; DESIGN invariant 7: no counter row that every ACK
would update).
"""

from __future__ import annotations

from django.db import transaction

from ..models import Queue
from . import events
from .clock import db_now


def pause(name: str) -> Queue:
    """Stop FETCH from handing out this queue's jobs; enqueueing still works."""
    return _set_paused(name, True)


def resume(name: str) -> Queue:
    return _set_paused(name, False)


def _set_paused(name: str, paused: bool) -> Queue:
    with transaction.atomic():
        now = db_now()
        queue, _ = Queue.objects.update_or_create(
            name=name, defaults={"paused": paused, "paused_at": now if paused else None}
        )
        events.record([events.other_event("queue.paused" if paused else "queue.resumed", now, queue=name)])
    return queue
