"""The claiming worker's row, held while it claims or settles (DESIGN invariants 11 and 13)."""

from __future__ import annotations

from django.db import connection

from ..models import Worker
from . import events
from .clock import db_now
from .pg import prepared


def hold_claimant(worker_id: str | None) -> None:
    """Make sure a worker that is claiming jobs is one the reaper will watch.

    Called first in FETCH's transaction. Locks the worker's row ``FOR KEY
    SHARE`` until the claim commits, so the reaper (``FOR UPDATE SKIP
    LOCKED``) cannot declare it dead halfway through; a heartbeat's ``FOR NO
    KEY UPDATE`` is not blocked. A worker already declared dead -- frozen,
    or cut off from the database for longer than the heartbeat timeout --
    is revived with a fresh heartbeat time: whatever it claims now is
    recovered as quickly as its death was if it dies again (DESIGN invariant
    13). An id the store has never seen (a client that only FETCHes) is left
    alone: the visibility timeout protects its jobs; so is a claim that names no worker.
    """
    if worker_id is None:
        return
    table = connection.ops.quote_name(Worker._meta.db_table)
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    with prepared.cursor(connection) as cursor:
        cursor.execute(f"SELECT declared_dead_at FROM {table} WHERE id = %s{lock}", [worker_id])
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return
    now = db_now()
    Worker.objects.filter(id=worker_id).update(declared_dead_at=None, last_heartbeat_at=now)
    worker = Worker.objects.get(id=worker_id)
    events.record([events.worker_event("worker.started", worker, now, revived=True)])
