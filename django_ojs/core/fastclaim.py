"""The claim of one queue in one statement (PostgreSQL): the common case of FETCH.

``core/claim.py`` claims in steps -- hold the worker's row, lock candidates,
expire, admit under limits, activate, record events -- a round trip and an
ORM compilation each. When none of those steps has anything to decide, one
statement does them all:

1. ``claimant`` holds the worker's row ``FOR KEY SHARE`` (as ``hold_claimant``
   does) and reads whether it was declared dead;
2. ``candidates`` locks the next jobs of the queue, priority high to low, then
   ``seq``, with ``FOR UPDATE SKIP LOCKED`` from the partial index of available
   jobs -- gated, as uncorrelated one-time filters checked before the scan, on
   the queue not being paused and the claimant not being dead;
3. ``verdict`` says whether every candidate is plain: no rate key, not expired;
4. ``claimed`` activates the candidates, only if they are all plain, and
   returns them; ``logged`` records their ``job.started`` events.

Anything else is left to the stepwise path, in the same transaction: a dead
claimant (it must be revived first), a candidate with a rate key or past its
``expires_at`` (limits and expiry decide row by row). The candidates stay
locked by this transaction, and SKIP LOCKED does not skip one's own locks,
so the stepwise path sees the same rows in the same order. A queue with a
rate or concurrency limit never comes here (the caller checks).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import signals
from ..states import JobState, Move, target
from . import events, prepared
from .loaded import raw_loaded

if TYPE_CHECKING:
    from ..models import Job


@dataclass
class Outcome:
    jobs: list[Job]
    # False: the claimant is a dead worker; nothing was locked or claimed.
    alive: bool
    # False: a candidate needs the stepwise path; the candidates are locked, none claimed.
    plain: bool


def claim(
    manager: Any, queue: str, count: int, worker_id: str | None, visibility_timeout: dt.timedelta | None, *, hold: bool
) -> Outcome:
    """Claim up to ``count`` plain jobs of ``queue``; ``hold``: lock the worker's row first."""
    from ..models import Job, Queue, Worker

    job_table, worker_table = Job._meta.db_table, Worker._meta.db_table
    hold = hold and worker_id is not None
    params: dict[str, Any] = {
        "queue": queue,
        "available": JobState.AVAILABLE.value,
        "active": target(Move.CLAIM).value,
        "count": count,
        "worker": worker_id,
        "lease": visibility_timeout,
        "kind": "job.started",
        "data": json.dumps({"worker_id": worker_id}),
    }
    claimant = (
        f"claimant AS (SELECT declared_dead_at IS NULL AS alive FROM {worker_table} "
        "WHERE id = %(worker)s FOR KEY SHARE), "
        if hold
        else "claimant AS (SELECT true AS alive WHERE false), "
    )
    listening = signals.wanted()
    logged = events.logged_cte("claimed j", kind="%(kind)s", time="CURRENT_TIMESTAMP", data="%(data)s",
                               listening=listening)
    sql = (
        f"WITH {claimant}"
        "candidates AS ("
        f" SELECT seq, rate_key, expires_at FROM {job_table}"
        " WHERE state = %(available)s AND queue = %(queue)s"
        f" AND NOT EXISTS (SELECT 1 FROM {Queue._meta.db_table} WHERE name = %(queue)s AND paused)"
        " AND NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive)"
        " ORDER BY priority DESC, seq LIMIT %(count)s FOR UPDATE SKIP LOCKED), "
        "verdict AS (SELECT NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive) AS alive,"
        " coalesce(bool_and(rate_key IS NULL AND (expires_at IS NULL OR expires_at > CURRENT_TIMESTAMP)), true)"
        " AS plain FROM candidates), "
        f"claimed AS (UPDATE {job_table} j SET state = %(active)s, attempt = j.attempt + 1,"
        " started_at = CURRENT_TIMESTAMP, worker_id = %(worker)s,"
        " lease_expires_at = CURRENT_TIMESTAMP + coalesce(%(lease)s::interval, j.visibility_timeout),"
        " deadline_at = CURRENT_TIMESTAMP + j.timeout"
        " FROM candidates c WHERE j.seq = c.seq AND (SELECT plain FROM verdict) RETURNING j.*)"
        f"{logged} "
        f"SELECT v.alive AS claim_alive, v.plain AS claim_plain, {prepared.columns(Job, 'c')}"
    )
    rows_of = " FROM verdict v LEFT JOIN claimed c ON true"
    sql += f"{events.event_columns()}{rows_of}{events.event_join('c')}" if listening else rows_of
    rows = raw_loaded(manager, sql, params)
    if listening:
        # After the caller's commit (at once for the statement on its own).
        events.send_returned([events.events_of(job) for job in rows])
    else:
        signals.count_after_commit("job.started", [(job.queue, job.type) for job in rows if job.seq is not None])
    # Sorted here, not in SQL: a sort node of a few rows, but the plan guard
    # (tests/core/test_query_plans.py) rightly allows none in a claim.
    jobs = sorted((job for job in rows if job.seq is not None), key=lambda job: (-job.priority, job.seq))
    outcome = Outcome(jobs, rows[0].claim_alive, rows[0].claim_plain)
    for job in rows:
        del job.claim_alive, job.claim_plain
    return outcome
