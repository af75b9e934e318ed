"""Queues: pause and resume (ojs-http-binding §11).

Queue rows hold operator settings only; counts are derived from the job
table (``core/stats.py``; DESIGN invariant 7: no counter row that every ACK
would update).
"""

from __future__ import annotations

from django.db import connection, transaction

from ..models import Queue
from . import events
from .clock import db_now

# The channel a trigger NOTIFYs with a queue's name when jobs become available in it (migrations
# 0002, 0011), and a resume does too; idle workers LISTEN on it (worker/listener.py).
AVAILABLE_CHANNEL = "ojs_available"


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
        if not paused and connection.vendor == "postgresql":
            # Its waiting jobs are to be had again: wake the idle workers of the queue at commit, as a
            # PUSH does, not at their next poll seconds later.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [AVAILABLE_CHANNEL, name])
    return queue
