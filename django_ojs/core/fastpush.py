"""PUSH of plain jobs in one statement (PostgreSQL): the common case of enqueue.

``core/push.py`` stores jobs in steps: read the database clock, probe for
taken ids, bound the queues, insert through ``bulk_create``, record the
events -- a round trip and an ORM compilation each, and ``bulk_create``'s
per-field SQL compilation for every row. For plain jobs one statement does
it all: the rows travel as one JSON array, ``jsonb_populate_recordset``
turns it into rows of the job table, the INSERT reads the clock itself
(``CURRENT_TIMESTAMP``) and returns ``seq``, and a CTE records each job's
``job.enqueued`` event from the inserted rows.

A plain job is available at once (not pending, not scheduled), holds no
unique key, has no relative time to resolve against the database clock and
goes to a queue without ``max_size``: nothing to decide before the insert.
A taken id is left to the unique index on ``id``: the statement fails and
writes nothing, and the caller reports the duplicate as before.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import signals
from ..durations import RelativeTime
from ..envelope import JobSpec
from . import events, queue_config

if TYPE_CHECKING:
    from ..models import Job


def is_plain(spec: JobSpec) -> bool:
    return (
        not spec.pending
        and spec.scheduled_at is None
        and spec.unique is None
        and not isinstance(spec.expires_at, RelativeTime)
        and queue_config.settings_of(spec.queue).max_size is None
    )


# Set by the statement, from the database clock.
_CLOCK_COLUMNS = ("created_at", "enqueued_at")


def insert(manager: Any, jobs: Sequence[Job]) -> None:
    """Store plain, unsaved ``jobs`` (``created_at`` unset) in one statement; set their ``seq`` and times."""
    from django.db import connection

    table = manager.model._meta.db_table
    fields = [f for f in manager.model._meta.concrete_fields if not f.primary_key]
    columns = [f.column for f in fields]
    quote = connection.ops.quote_name  # "unique" is a reserved word
    rows = [{f.column: _json_value(getattr(job, f.attname)) for f in fields} for job in jobs]
    chosen = ", ".join(quote(c) for c in columns)
    picked = ", ".join("CURRENT_TIMESTAMP" if c in _CLOCK_COLUMNS else f"r.{quote(c)}" for c in columns)
    sql = (
        f"WITH inserted AS (INSERT INTO {table} ({chosen}) "
        f"SELECT {picked} FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb) WITH ORDINALITY AS r "
        "ORDER BY r.ordinality RETURNING seq, id, created_at, type, queue, state, attempt, priority)"
    )
    params: list[Any] = [json.dumps(rows)]
    listening = signals.wanted()
    # job.enqueued, as core/push.py's _push_event writes it, from the inserted rows.
    sql += events.logged_cte(
        "inserted j", kind="'job.enqueued'", time="CURRENT_TIMESTAMP",
        data="jsonb_build_object('priority', j.priority)", listening=listening,
    )
    sql += " SELECT inserted.seq, inserted.id, inserted.created_at"
    sql += f"{events.event_columns()} FROM inserted{events.event_join('inserted')}" if listening else " FROM inserted"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    stored = {row[1]: (row[0], row[2]) for row in fetched}
    if listening:
        # After the caller's commit (at once for the statement on its own).
        events.send_returned(row[3:] for row in fetched)
    for job in jobs:
        job.seq, job.created_at = stored[job.id]
        job.enqueued_at = job.created_at
        job._state.adding = False
        job._state.db = manager.db


def _json_value(value: Any) -> Any:
    """A column value as ``jsonb_populate_recordset`` reads it back into its column type."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return f"{value.days} days {value.seconds}.{value.microseconds:06d} seconds"
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
