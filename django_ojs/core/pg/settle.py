"""ACK in one statement: the conditional write, the job read back and its event.

And the in-process worker's batch of completions (``complete_rows``): one
UPDATE of the locked rows, their results and their events in one statement;
and that batch's lock (``lock_settled``).

Stepwise twin: ``core.settle.ack`` moves ``active -> completed`` only where
the lease holds; stepwise that is an UPDATE, a SELECT of the job and an
event INSERT in a transaction of its own: five round trips per job for an
HTTP worker.
Here the UPDATE returns the row and a CTE records ``job.completed`` from it
(``duration_ms`` since ``started_at``, as ``job_event`` writes it). No row
means the job was not ours to ack; the caller reads it to say why.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from django.db import connection

from ...models import Job, Worker, WorkflowNode
from ...observe import signals
from ...protocol.states import Move, sources, target
from ...protocol.workflows import PENDING
from ..partitions import LIVE_SQL
from ..types import Lease
from . import events, prepared
from .rows import raw_loaded


def ack(job_id: Any, result: Any, lease: Lease, *, steps: bool = True) -> Job | None:
    """The completed job, or None when no active job with this id and lease was there to ack.

    ``steps=False``: None for a workflow step too (a job whose ``extra`` names
    a ``workflow_id``), which is left as it was: its workflow must move in the
    ACK's transaction, so the caller acks it in one.
    """
    table = Job._meta.db_table
    params: dict[str, Any] = {
        "id": Job._meta.get_field("id").to_python(job_id),
        "sources": sorted(state.value for state in sources(Move.ACK)),
        "completed": target(Move.ACK).value,
        "result": jsonb_param(result),
        "worker": lease.worker_id,
        "attempt": lease.attempt,
    }
    guard = ""
    if lease.worker_id:
        guard += " AND (worker_id = %(worker)s OR worker_id IS NULL)"
    if lease.attempt is not None:
        guard += " AND attempt = %(attempt)s"
    if not steps:
        # Wider than the caller's test (a true value): any job naming the key is left to it.
        guard += " AND NOT coalesce(extra ? 'workflow_id', false)"
    sql = (
        f"WITH acked AS (UPDATE {table} SET state = %(completed)s, completed_at = CURRENT_TIMESTAMP,"
        " finished_at = CURRENT_TIMESTAMP, result = %(result)s::jsonb, error = NULL,"
        " lease_expires_at = NULL, deadline_at = NULL"
        f" WHERE id = %(id)s AND state IN {LIVE_SQL} AND state = ANY(%(sources)s){guard} RETURNING *)"
    )
    listening = signals.wanted()
    sql += events.logged_cte(
        "acked j", kind="'job.completed'", time="CURRENT_TIMESTAMP", data="'{}'", with_duration=True,
        listening=listening,
    )
    if listening:
        sql += f" SELECT {prepared.columns(Job, 'acked')}{events.event_columns()} FROM acked"
        sql += events.event_join("acked")
    else:
        sql += f" SELECT {prepared.columns(Job, 'acked')} FROM acked"
    rows = raw_loaded(Job.objects, sql, params)
    if listening:
        events.send_returned([events.events_of(job) for job in rows])  # after the caller's commit
    else:
        signals.count_after_commit("job.completed", [(job.queue, job.type) for job in rows])
    return rows[0] if rows else None


# The states an ACK or FAIL may leave; lock_settled checks them after the lock.
ACK_SOURCES = frozenset(state.value for state in sources(Move.ACK))


def jsonb_param(value: Any) -> str | None:
    """A result as the parameter of a ``jsonb`` column: SQL NULL for none, as the JSONField stores None."""
    return json.dumps(value) if value is not None else None


def lock_settled(job_ids: Sequence[str], *, holding: str | None = None) -> tuple[bool, list[tuple]]:
    """``settle_many``'s lock, as one precompiled statement: the rows of ``job_ids`` that may be settled.

    What the ORM query on other databases reads -- in ``seq`` order, with
    whether each is a pending workflow step and the transaction's clock --
    without compiling it on every worker turn (a tenth of a turn's time in
    the worker's profile).

    The rows are found by ``id`` alone and their state is checked here, after
    the lock: a state condition in the WHERE clause lets PostgreSQL prove a
    partial index usable (``ojs_job_queue_state`` holds every job that is not
    available; the active ones by lease and owner) and, with statistics taken
    while those were nearly empty -- a backlog enqueued, then analysed, then
    worked -- it walked that whole index on every turn instead of probing
    ``id``'s unique index: 2.3 ms and ~700 buffers for a batch of 10 at ten
    thousand jobs, growing with the table (tests/core/test_query_plans.py).
    Rows in another state stay locked until the turn commits; the caller
    refuses them, as the WHERE clause did.

    ``holding``: a worker whose row is held ``FOR KEY SHARE`` first, in the
    same statement (DESIGN invariant 11: the worker's row, then its jobs in
    ``seq`` order; a one-time filter, as ``pg/claim.py``'s). Returns whether
    that worker is alive; a worker declared dead gets no row locked, for the
    caller to revive it (``hold_claimant``) and lock again without ``holding``.
    """
    params = [PENDING, list(job_ids)]
    locked = (
        "SELECT j.seq, j.id, j.type, j.queue, j.attempt, j.started_at, j.worker_id,"
        f" EXISTS (SELECT 1 FROM {WorkflowNode._meta.db_table} n WHERE n.job_seq = j.seq AND n.state = %s),"
        f" CURRENT_TIMESTAMP AS now, j.state FROM {Job._meta.db_table} j"
        f" WHERE j.id = ANY(%s::uuid[]) AND j.state IN {LIVE_SQL}"
    )
    if holding is None:
        sql = f"{locked} ORDER BY j.seq FOR UPDATE"
    else:
        sql = (
            f"WITH claimant AS (SELECT declared_dead_at IS NULL AS alive FROM {Worker._meta.db_table}"
            " WHERE id = %s FOR KEY SHARE), "
            f"locked AS ({locked} AND NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive) ORDER BY j.seq FOR UPDATE) "
            "SELECT l.*, NOT EXISTS (SELECT 1 FROM claimant WHERE NOT alive) FROM"
            " (SELECT 1) AS one LEFT JOIN locked l ON true ORDER BY l.seq"
        )
        params.insert(0, holding)
    with prepared.cursor(connection) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    alive = True
    if holding is not None:
        alive = rows[0][-1]
        rows = [row[:-1] for row in rows if row[0] is not None]
    # Without the state column: the shape the ORM query gives settle_many.
    return alive, [row[:-1] for row in rows if row[-1] in ACK_SOURCES]


def complete_rows(
    seqs: Sequence[int], results: Sequence[Any], now: dt.datetime, labels: list[tuple[str, str]]
) -> None:
    """Complete these rows, already locked and checked by ``settle_many``, with their results, and log it.

    ``labels``: each row's (queue, type), for the counters when no receiver wants the events themselves.
    """
    table = Job._meta.db_table
    sql = (
        f"WITH done AS (UPDATE {table} j SET state = %(completed)s, completed_at = %(now)s,"
        " finished_at = %(now)s, result = r.result, error = NULL, lease_expires_at = NULL, deadline_at = NULL"
        " FROM unnest(%(seqs)s::bigint[], %(results)s::jsonb[]) AS r(seq, result)"
        f" WHERE j.seq = r.seq AND j.state IN {LIVE_SQL} RETURNING j.*)"
    )
    listening = signals.wanted()
    sql += events.logged_cte(
        "done j", kind="'job.completed'", time="%(now)s", data="'{}'", with_duration=True, listening=listening
    )
    sql += " SELECT * FROM logged" if listening else " SELECT count(*) FROM done"
    params = {
        "completed": target(Move.ACK).value,
        "now": now,
        "seqs": list(seqs),
        "results": [jsonb_param(result) for result in results],
    }
    with prepared.cursor(connection) as cursor:
        cursor.execute(sql, params)
        if listening:
            events.send_returned(cursor.fetchall())  # after the worker turn's commit
    if not listening:
        signals.count_after_commit("job.completed", labels)
