"""PUSH of plain jobs in one statement: the common case of enqueue.

Stepwise twin: ``core.push.push_many``'s transaction. It stores jobs in steps: read the database clock, probe for
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
import re
import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection

from ...conf import ojs_settings
from ...models import Job
from ...observe import signals
from ...protocol.durations import RelativeTime
from ...protocol.envelope import JobSpec
from ...protocol.states import JobState
from .. import job_columns
from ..queue_settings import settings_of
from . import events, prepared
from .rows import loaded_many


def is_plain(spec: JobSpec) -> bool:
    return all_plain([spec])


def all_plain(specs: Sequence[JobSpec]) -> bool:
    """Are these jobs all plain? Each queue's bound is looked up once."""
    queues: set[str] = set()
    for spec in specs:
        if spec.pending or spec.scheduled_at is not None or spec.unique is not None:
            return False
        if isinstance(spec.expires_at, RelativeTime):
            return False
        queues.add(spec.queue)
    return all(settings_of(queue).max_size is None for queue in queues)


# Set by the statement, from the database clock.
_CLOCK_COLUMNS = ("created_at", "enqueued_at")


def insert(specs: Sequence[JobSpec]) -> list[Job]:
    """Store plain jobs (``is_plain``) in one statement; return them as stored, in order.

    The rows are built from the specs, not from model instances: a row
    carries only the columns a spec sets (``job_columns.SPEC_COLUMNS``) that are
    not NULL; the others every plain job shares (``_Shape.fixed``), sent once.
    The returned jobs are made from the same values after the insert, with
    ``seq`` and the clock from its RETURNING rows.
    """
    shape = _shape(Job)
    defaults = job_columns.Defaults.from_settings()
    values = [job_columns.spec_columns(spec, defaults, spec.expires_at) for spec in specs]  # type: ignore[arg-type]
    if len(values) == 1:
        # One job (``enqueue``): its columns as parameters of a VALUES row,
        # which plans and runs in a fraction of the JSON form's time.
        params = [*shape.params_of(values[0]), *shape.fixed_params]
    else:
        shared, rows = _json_rows(specs, values)
        params = [*shape.fixed_params, json.dumps(rows), json.dumps(shared)]
    listening = signals.wanted()
    sql = shape.sql(ojs_settings.EVENTS, listening, one=len(values) == 1)
    # The one-job statement is prepared; a batch's JSON form plans in a sliver
    # of the time its rows take.
    with (prepared.cursor(connection) if len(values) == 1 else connection.cursor()) as cursor:
        cursor.execute(sql, params)
        if listening:
            # A row per job with its event beside it, for the receivers after
            # the caller's commit (at once for the statement on its own).
            fetched = cursor.fetchall()
            created_at, seqs, ids = fetched[0][0], [row[1] for row in fetched], [row[2] for row in fetched]
            events.send_returned(row[3:] for row in fetched)
        else:
            created_at, seqs, ids = cursor.fetchone()
            signals.count_after_commit("job.enqueued", [(columns["queue"], columns["type"]) for columns in values])
    # The statement inserts in the rows' order (ORDER BY e.n), so seqs follow
    # the jobs' order; each is still matched by id, which costs nothing and
    # depends on no planner detail.
    seq_of = dict(zip(ids, seqs, strict=True))
    return shape.jobs(Job.objects.db, values, seq_of, created_at)


# Values compared by equality for sharing; JSON containers only when empty
# (1 == True and [1] == [1.0] in Python, not in JSON).
_SCALARS = frozenset({str, int, bool, dt.timedelta, dt.datetime, uuid.UUID})
_CONTAINERS = frozenset({list, dict})


def _json_rows(specs: Sequence[JobSpec], values: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The batch as ``jsonb_populate_record`` reads it: the first job's columns, and per job what differs.

    A batch's jobs mostly share every column but their id and args: each
    row carries only those (a NULL as JSON null), on top of the shared
    object, so the JSON to write and to read is a fraction of the rows'.
    """
    encoded: dict[Any, Any] = {}  # durations and datetimes, most of them shared by the batch
    first, first_retry = values[0], specs[0].retry
    shared = {name: _json(value, encoded) for name, value in first.items() if value is not None}
    rows = []
    for spec, columns in zip(specs, values, strict=True):
        row = {}
        for name, value in columns.items():
            base = first[name]
            if value is base:
                continue
            kind = type(value)
            if name == "retry":
                # Equal policies store equal dicts; a batch's jobs mostly share the one object.
                if spec.retry is first_retry or spec.retry == first_retry:
                    continue
            elif kind is type(base) and (
                (kind in _SCALARS and value == base) or (kind in _CONTAINERS and not value and not base)
            ):
                continue
            row[name] = _json(value, encoded)
        rows.append(row)
    return shared, rows


# Most of a plain job's JSON columns are empty (args, meta, tags, extra...): their text needs no encoder.
_EMPTY_JSON: dict[type, str] = {list: "[]", dict: "{}"}


def _jsonb_text(value: Any) -> str | None:
    """A jsonb column's parameter: its JSON text, NULL for None."""
    if value is None:
        return None
    if not value and type(value) in _EMPTY_JSON:
        return _EMPTY_JSON[type(value)]
    return json.dumps(value)


def _json(value: Any, encoded: dict[Any, Any]) -> Any:
    if isinstance(value, (dt.timedelta, dt.datetime)):
        text = encoded.get(value)
        if text is None:
            text = encoded[value] = _json_value(value)
        return text
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class _Shape:
    """What every plain job of one model shares: its fixed columns, the statement, the field order."""

    def __init__(self, model: Any):
        self.model = model
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        assert all(f.attname == f.column for f in fields if f.attname in job_columns.SPEC_COLUMNS)
        # A plain job is available; every other column not from its spec or the clock has its default.
        self.fixed = {
            f.attname: JobState.AVAILABLE.value if f.attname == "state" else f.get_default()
            for f in fields
            if f.attname not in job_columns.SPEC_COLUMNS and f.attname not in _CLOCK_COLUMNS
        }
        # Shared by every job returned: only immutable values (None, numbers, strings).
        assert all(isinstance(v, (type(None), int, str)) for v in self.fixed.values()), self.fixed
        self.attnames = [f.attname for f in model._meta.concrete_fields]
        quote = connection.ops.quote_name  # "unique" is a reserved word
        table = model._meta.db_table
        # NULL columns are left to the INSERT's column list: they are NULL without being named.
        given = [name for name, value in self.fixed.items() if value is not None]
        self.fixed_params = [self.fixed[name] for name in given]
        chosen = [*job_columns.SPEC_COLUMNS, *_CLOCK_COLUMNS, *given]
        self._jsonb = [_db_type(model, c, connection) == "jsonb" for c in job_columns.SPEC_COLUMNS]
        rest = [*("CURRENT_TIMESTAMP" for _ in _CLOCK_COLUMNS), *(f"%s::{_db_type(model, c, connection)}" for c in given)]
        into = f"WITH inserted AS (INSERT INTO {table} ({', '.join(quote(c) for c in chosen)}) "
        returning = " RETURNING seq, id, created_at, type, queue, state, attempt, priority)"
        picked = [_from_row(c, _db_type(model, c, connection), quote) for c in job_columns.SPEC_COLUMNS]
        # e: each job's differences (``_json_rows``); s: the shared columns, read once.
        many = (
            f"SELECT {', '.join([*picked, *rest])} FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(value, n), "
            f"jsonb_populate_record(NULL::{table}, %s::jsonb) AS s ORDER BY e.n"
        )
        one = f"VALUES ({', '.join([*(f'%s::{_db_type(model, c, connection)}' for c in job_columns.SPEC_COLUMNS), *rest])})"
        self._insert = {False: into + many + returning, True: into + one + returning}
        self._sql: dict[tuple[bool, bool, bool], str] = {}

    def params_of(self, columns: dict[str, Any]) -> list[Any]:
        """One job's spec columns as the VALUES row's parameters."""
        encoded: dict[Any, Any] = {}
        return [
            _jsonb_text(columns[name]) if jsonb else _json(columns[name], encoded)
            for name, jsonb in zip(job_columns.SPEC_COLUMNS, self._jsonb, strict=True)
        ]

    def sql(self, with_events: bool, listening: bool, *, one: bool) -> str:
        """The statement; ``listening``: it also returns each job's event (``events.logged_cte``)."""
        key = (with_events, listening, one)
        sql = self._sql.get(key)
        if sql is None:
            # job.enqueued, as core/push.py's push_event writes it, from the inserted rows.
            sql = self._insert[one] + events.logged_cte(
                "inserted j", kind="'job.enqueued'", time="CURRENT_TIMESTAMP",
                data="jsonb_build_object('priority', j.priority)", listening=listening,
            )
            if listening:
                sql += (
                    " SELECT inserted.created_at, inserted.seq, inserted.id"
                    f"{events.event_columns()} FROM inserted{events.event_join('inserted')}"
                )
            else:
                sql += " SELECT min(created_at), array_agg(seq ORDER BY seq), array_agg(id ORDER BY seq) FROM inserted"
            self._sql[key] = sql
        return sql

    def jobs(self, db: str, values: list[dict[str, Any]], seq_of: dict[Any, int], created_at: dt.datetime) -> list[Job]:
        """The stored jobs, as a query would load them (``loaded_many``); ``values`` become their rows."""
        clock = {"created_at": created_at, "enqueued_at": created_at}
        for columns in values:  # the caller's own dicts, built for this insert
            columns.update(self.fixed)
            columns.update(clock)
            columns["seq"] = seq_of[columns["id"]]
        return loaded_many(self.model, db, values)


_shapes: dict[Any, _Shape] = {}


def _shape(model: Any) -> _Shape:
    shape = _shapes.get(model)
    if shape is None:
        shape = _shapes[model] = _Shape(model)
    return shape


def _db_type(model: Any, attname: str, connection: Any) -> str:
    """The column's type without its length: a cast to varchar(n) would cut a value the INSERT must refuse."""
    return re.sub(r"\(.*\)", "", model._meta.get_field(attname).cast_db_type(connection))


def _from_row(column: str, db_type: str, quote: Any) -> str:
    """The column from the job's row ``e.value`` if it names it (JSON null: NULL), else the shared ``s``.

    Read key by key with a cast: a third of the time ``jsonb_populate_record``
    spent filling all 40 columns of each row.
    """
    if db_type == "jsonb":
        value = f"nullif(e.value -> '{column}', 'null'::jsonb)"
    else:
        value = f"(e.value ->> '{column}')::{db_type}"
    return f"CASE WHEN e.value ? '{column}' THEN {value} ELSE s.{quote(column)} END"


def _json_value(value: Any) -> Any:
    """A column value as ``jsonb_populate_recordset`` reads it back into its column type."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return f"{value.days} days {value.seconds}.{value.microseconds:06d} seconds"
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
