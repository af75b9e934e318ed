"""Events written inside the PostgreSQL engine's statements: the CTE that logs them, and their rows handed on.

The payload is ``core.events.job_event``'s, built by PostgreSQL from the
job rows a statement moved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection

from ...conf import ojs_settings
from ...models import Event, Job
from ...observe import signals
from ..partitions import LIVE_SQL
from .rows import loaded

# A UUIDv7 made by PostgreSQL (RFC 9562 §5.7; PostgreSQL 15 has no uuidv7()):
# the 48-bit Unix time in milliseconds over the first bytes of a random UUID,
# then the version nibble turned from 4 (0100) to 7 (0111) by setting its two
# low bits, bits 52 and 53 of the bytea. The variant bits stay those of v4.
UUID7_SQL = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing "
    "substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) "
    "from 1 for 6), 52, 1), 53, 1), 'hex')::uuid"
)



# An event row as the statements return it, by Event's attnames (the columns of ``stored_id`` and
# ``extra`` are ``id`` and ``data``).
EVENT_COLUMNS = ("seq", "stored_id", "type", "time", "job_id", "queue", "job_type", "state", "attempt", "extra")
# A row of NULLs there is a job row without an event: every event has a type.
_TYPE = EVENT_COLUMNS.index("type")
_RETURNED = "seq, id AS stored_id, type, time, job_id, queue, job_type, state, attempt, data AS extra"
# What a job's event stores besides the job's own fields.
_STORED = "(type, time, job_id, queue, job_type, state, attempt, data)"


def logged_cte(
    source: str, *, kind: str, time: str, data: str, with_duration: bool = False, listening: bool,
    name: str = "logged",
) -> str:
    """``, logged AS (...)``: the events of a one-statement path, one per job row of ``source``.

    Written when the event store is on; returned (``RETURNING``, or a plain
    ``SELECT`` with the store off) only when a receiver is ``listening``, so
    nobody listening costs nothing; ``""`` when neither. The final SELECT
    then reads them with ``event_columns``/``event_join``. Arguments as
    ``insert_job_events``'; ``name``: the CTE's, for a statement that logs twice.
    """
    if ojs_settings.EVENTS:
        sql = insert_job_events(source, kind=kind, time=time, data=data, with_duration=with_duration)
        if listening:
            sql += f" RETURNING {_RETURNED}"
    elif listening:
        # Never stored, so no seq to make its id from (Event.id): the id is made here.
        sql = _job_events_select(source, kind, time, data, with_duration, unstored=True)
    else:
        return ""
    return f", {name} AS ({sql})"


def event_columns() -> str:
    """The select list that puts each job row's event beside it (``ojs_event_seq``, ...): with ``event_join``."""
    return "".join(f", ojs_e.{column} AS ojs_event_{column}" for column in EVENT_COLUMNS)


def event_join(jobs: str) -> str:
    """The join of ``logged`` to the job rows named ``jobs``: at most one event per job."""
    return f" LEFT JOIN logged ojs_e ON ojs_e.job_id = {jobs}.id"


def events_of(job: Any) -> tuple[Any, ...]:
    """The ``ojs_event_*`` columns a statement of this engine set on a job, taken off it again."""
    return tuple(job.__dict__.pop(f"ojs_event_{column}") for column in EVENT_COLUMNS)


def send_returned(rows: Iterable[Sequence[Any]]) -> None:
    """Hand event rows (``EVENT_COLUMNS``) to the receivers after commit; rows of NULLs are no event."""
    built = []
    for row in rows:
        if row[_TYPE] is None:
            continue  # a job row without an event (an outer join's empty side)
        # Twice per job with the metrics on: Model.__init__ was the larger part of their cost.
        event = loaded(Event, DEFAULT_DB_ALIAS, dict(zip(EVENT_COLUMNS, row)))
        if isinstance(event.extra, str):  # a driver that does not decode jsonb
            event.extra = json.loads(event.extra)
        built.append(event)
    signals.after_commit(built)


def insert_job_events(
    source: str, *, kind: str = "%s", time: str = "%s", data: str = "%s", with_duration: bool = False
) -> str:
    """``INSERT ... SELECT`` of one event per job row of ``source`` (a FROM clause naming the rows ``j``).

    The payload is ``job_event``'s, read from the rows. ``kind``, ``time``
    and ``data`` (JSON text) are SQL: placeholders by default, whose
    parameters come in that order (``time`` twice ``with_duration``), then
    ``source``'s own.
    """
    return f"INSERT INTO {Event._meta.db_table} {_STORED} " + _job_events_select(
        source, kind, time, data, with_duration
    )


def _job_events_select(
    source: str, kind: str, time: str, data: str, with_duration: bool, unstored: bool = False
) -> str:
    # Only what the event adds is JSON, and none at all when it adds nothing.
    if with_duration:
        extra = (f"jsonb_build_object('duration_ms', floor(extract(epoch from ({time} - j.started_at)) * 1000)::bigint)"
                 f" || {data}::jsonb")
    else:
        extra = f"NULLIF({data}::jsonb, '{{}}'::jsonb)"
    made = f"NULL::bigint AS seq, {UUID7_SQL} AS stored_id, " if unstored else ""
    return (
        f"SELECT {made}{kind}::text AS type, {time} AS time, j.id AS job_id, j.queue AS queue, "
        f"j.type AS job_type, j.state AS state, j.attempt AS attempt, {extra} AS extra "
        f"FROM {source}"
    )


def insert_from_rows(
    kind: str, seqs: list[int], time: Any, data: dict[str, Any], *, with_duration: bool, live: bool = False
) -> None:
    """Record one ``kind`` event per job of ``seqs`` in one ``INSERT ... SELECT``, from the rows as they are now.

    No Python object per event: a quarter of the cost, for the two events
    every job gets (started, completed). Stepwise twin: ``core.events.record``
    of the events ``job_event`` builds.
    """
    listening = signals.observed()
    # ``live``: rows in a live state, read from the live partition alone (not planned over history).
    in_live = f" AND j.state IN {LIVE_SQL}" if live else ""
    sql = insert_job_events(f"{Job._meta.db_table} j WHERE j.seq = ANY(%s){in_live}", with_duration=with_duration)
    if listening:
        # The rows just built, for the receivers: no second query, no cost
        # when nobody listens.
        sql += f" RETURNING {_RETURNED}"
    params: list[Any] = [kind, time]
    if with_duration:
        params.append(time)
    params += [json.dumps(data), list(seqs)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if listening:
            send_returned(cursor.fetchall())
