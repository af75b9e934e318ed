"""The claim of one queue in one statement: the common case of FETCH.

Stepwise twin: ``core.claim``'s ``claim_from``. It claims in steps -- hold the worker's row, lock candidates,
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

The worker's turn (``core/pg/turn.py``) claims with the same CTEs
(``claiming_ctes``), gated on its batch of completions instead.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Sequence
from typing import Any

from django.db import connection

from ...conf import ojs_settings
from ...models import Job, Queue, Worker
from ...observe import signals
from ...protocol.states import JobState, Move, target
from ..partitions import LIVE_SQL
from ..types import ClaimOutcome
from . import events, prepared
from .rows import raw_loaded


def claim(
    queue: str,
    count: int,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
    *,
    hold: bool,
    types: Sequence[str] | None = None,
) -> ClaimOutcome:
    """Claim up to ``count`` plain jobs of ``queue``; ``hold``: lock the worker's row first;
    ``types``: only jobs of these types (None: any type)."""
    listening = signals.wanted()
    sql = _statement(hold and worker_id is not None, listening, ojs_settings.EVENTS, types is not None)
    rows = raw_loaded(Job.objects, sql, claim_params(queue, count, worker_id, visibility_timeout, types))
    outcome = ClaimOutcome(claimed_jobs(rows, listening), rows[0].claim_alive, rows[0].claim_plain)
    for job in rows:
        del job.claim_alive, job.claim_plain
    return outcome


@functools.lru_cache(maxsize=16)
def _statement(hold: bool, listening: bool, events_on: bool, typed: bool) -> str:
    """The claim's text for these cases (``events_on``: ``OJS["EVENTS"]``; ``typed``: only the
    types the worker can run), built once."""
    dead = "EXISTS (SELECT 1 FROM claimant WHERE NOT alive)"
    sql = (
        f"WITH {claimant_cte() if hold else 'claimant AS (SELECT true AS alive WHERE false)'}, "
        f"{claiming_ctes(gate=f'NOT {dead}', listening=listening, typed=typed)} "
        f"SELECT NOT {dead} AS claim_alive, v.plain AS claim_plain, {prepared.columns(Job, 'c')}"
    )
    rows_of = " FROM verdict v LEFT JOIN claimed c ON true"
    return sql + (f"{events.event_columns()}{rows_of}{events.event_join('c')}" if listening else rows_of)


def claimant_cte() -> str:
    """``claimant``: the worker's row held ``FOR KEY SHARE`` (as ``hold_claimant``), and whether it is alive."""
    return (
        f"claimant AS MATERIALIZED (SELECT declared_dead_at IS NULL AS alive FROM {Worker._meta.db_table} "
        "WHERE id = %(worker)s FOR KEY SHARE)"
    )


def claiming_ctes(*, gate: str, listening: bool, typed: bool = False) -> str:
    """The claim as CTEs -- ``candidates``, ``verdict`` (``plain``), ``claimed``, and its events --
    for a statement that holds the claimant already; ``gate``: SQL that must be true to claim
    (checked once, before the scan); ``typed``: only jobs whose type is in ``%(types)s`` (an
    in-process worker claims only what it has a handler for). Parameters: ``claim_params``.
    """
    of_types = f" AND {of_types_filter('type', '%(types)s')}" if typed else ""
    job_table = Job._meta.db_table
    logged = events.logged_cte("claimed j", kind="%(kind)s", time="CURRENT_TIMESTAMP", data="%(data)s",
                               listening=listening)
    return (
        "candidates AS MATERIALIZED ("
        f" SELECT seq, rate_key, expires_at FROM {job_table}"
        # The state as a literal: PostgreSQL proves the partial index of available jobs usable from it.
        f" WHERE state = '{JobState.AVAILABLE.value}' AND queue = %(queue)s{of_types}"
        f" AND NOT EXISTS (SELECT 1 FROM {Queue._meta.db_table} WHERE name = %(queue)s AND paused)"
        f" AND {gate}"
        " ORDER BY priority DESC, seq LIMIT %(count)s FOR UPDATE SKIP LOCKED), "
        "verdict AS (SELECT"
        " coalesce(bool_and(rate_key IS NULL AND (expires_at IS NULL OR expires_at > CURRENT_TIMESTAMP)), true)"
        " AS plain FROM candidates), "
        f"{claimed_cte()}{logged}"
    )


def claimed_cte() -> str:
    """``claimed``: the ``candidates`` made active for ``%(worker)s`` -- an attempt charged, the
    lease and deadline from now -- when ``verdict`` says they are plain; the fair statement's too."""
    return (
        f"claimed AS (UPDATE {Job._meta.db_table} j SET state = %(active)s, attempt = j.attempt + 1,"
        " started_at = CURRENT_TIMESTAMP, worker_id = %(worker)s,"
        " lease_expires_at = CURRENT_TIMESTAMP + coalesce(%(lease)s::interval, j.visibility_timeout),"
        " deadline_at = CURRENT_TIMESTAMP + j.timeout"
        f" WHERE j.seq = ANY(ARRAY(SELECT seq FROM candidates)) AND j.state IN {LIVE_SQL}"
        " AND (SELECT plain FROM verdict) RETURNING j.*)"
    )


def of_types_filter(column: str, param: str) -> str:
    """SQL true for a job whose type is in the array ``param``: a filter on the rows the index of
    available jobs yields, in its order -- never a reason to read another index.

    Not ``type = ANY(...)``: PostgreSQL can answer that from the index of types, and when the
    statistics say a type is rare (a type just deployed, statistics older than its backlog) it
    did -- reading every job of the type ever run, in every state, then sorting them
    (tests/core/pg/test_query_plans.py). ``array_position`` is opaque to the planner, which
    then estimates that most rows pass, and walks ``ojs_job_available`` to its LIMIT.
    """
    return f"array_position({param}::text[], {column}::text) IS NOT NULL"


def claim_params(
    queue: str,
    count: int,
    worker_id: str | None,
    visibility_timeout: dt.timedelta | None,
    types: Sequence[str] | None = None,
) -> dict[str, Any]:
    return {
        "queue": queue,
        "types": list(types) if types is not None else None,
        "active": target(Move.CLAIM).value,
        "count": count,
        "worker": worker_id,
        "lease": visibility_timeout,
        "kind": "job.started",
        "data": json.dumps({"worker_id": worker_id}),
    }


def claimed_jobs(rows: list[Job], listening: bool) -> list[Job]:
    """The jobs a statement with ``claiming_ctes`` returned (a row of NULLs is none), in claim order;
    their ``job.started`` events handed on after the caller's commit (at once for a statement on its own)."""
    if listening:
        events.send_returned([events.events_of(job) for job in rows])
    else:
        signals.count_after_commit("job.started", [(job.queue, job.type) for job in rows if job.seq is not None])
    # Sorted here, not in SQL: a sort node of a few rows, but the plan guard
    # (tests/core/test_query_plans.py) rightly allows none in a claim.
    return sorted((job for job in rows if job.seq is not None), key=lambda job: (-job.priority, job.seq))


def queues_with_work(names: list[str], types: Sequence[str] | None = None) -> list[str]:
    """The queues among ``names`` that have available jobs (of ``types``, when given) and are not
    paused, in the given order.

    One statement: an index probe per name inside the server (microseconds
    each), not a locked round trip per name. Stepwise twin: every queue is
    probed by the claim itself.
    """
    sql = (
        "SELECT q.name FROM unnest(%s::text[]) WITH ORDINALITY AS q(name, position) "
        # The state as a literal: a generic plan (prepared.py) proves ojs_job_available usable from it.
        # A LATERAL ... LIMIT 1 in the index's order, not an EXISTS: with statistics taken when one
        # queue held every available job, the planner turned the EXISTS into a join reading them
        # all, or (unordered) a scan it expected to stop at once -- on an empty queue, a read of
        # every live job (the partitioned table, core/partitions.py). In the index's order the
        # alternative is a sort of them all: it probes ojs_job_available once per name.
        f"CROSS JOIN LATERAL (SELECT 1 FROM {Job._meta.db_table} j WHERE j.state = '{JobState.AVAILABLE.value}'"
        f" AND j.queue = q.name{' AND ' + of_types_filter('j.type', '%s') if types is not None else ''}"
        " ORDER BY j.priority DESC, j.seq LIMIT 1) AS waiting "
        f"WHERE NOT EXISTS (SELECT 1 FROM {Queue._meta.db_table} p WHERE p.name = q.name AND p.paused) "
        "ORDER BY q.position"
    )
    with prepared.cursor(connection) as cursor:
        cursor.execute(sql, [names] if types is None else [names, list(types)])
        return [row[0] for row in cursor.fetchall()]
