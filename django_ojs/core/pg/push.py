"""PUSH of plain jobs in one statement: the common case of enqueue.

Stepwise twin: ``core.push.push_many``'s transaction. It stores jobs in steps: read the database clock, probe for
taken ids, bound the queues, insert through ``bulk_create``, record the
events -- a round trip and an ORM compilation each, and ``bulk_create``'s
per-field SQL compilation for every row. For plain jobs one statement does
it all: the batch travels column by column, a column the jobs share as one
value and a column that differs as one array (``unnest`` zips the arrays
into rows, as pgqueuer and COPY-less bulk loaders do), the INSERT reads the
clock itself (``CURRENT_TIMESTAMP``) and returns ``seq``, and a CTE records
each job's ``job.enqueued`` event from the inserted rows.

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
    carries only the columns a spec sets (``job_columns.SPEC_COLUMNS``); the
    others every plain job shares (``_Shape.fixed``), sent once. Of the spec
    columns, those the batch's jobs share go as one parameter, the others
    as one array each (``_by_column``). The returned jobs are made from the
    same values after the insert, with ``seq`` and the clock from its
    RETURNING rows.
    """
    shape = _shape(Job)
    defaults = job_columns.Defaults.from_settings()
    fair_paths: dict[str, str | None] = {}  # each queue's fairness key, looked up once a batch
    values = [job_columns.spec_columns(spec, defaults, spec.expires_at, fair_paths)  # type: ignore[arg-type]
              for spec in specs]
    forms, shared, arrays = _by_column(specs, values, shape)
    # In the statement's order: the SELECT list's values, then the arrays unnest reads.
    params = [*shared, *arrays]
    listening = signals.wanted()
    sql = shape.sql(ojs_settings.EVENTS, listening, forms)
    # Prepared: a batch's statement is the same for every batch of the same
    # columns (and one job's for every job), so PostgreSQL plans it once.
    with prepared.cursor(connection) as cursor:
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
    # The statement inserts in the rows' order (ORDER BY n), so seqs follow
    # the jobs' order; each is still matched by id, which costs nothing and
    # depends on no planner detail.
    seq_of = dict(zip(ids, seqs, strict=True))
    return shape.jobs(Job.objects.db, values, seq_of, created_at)


# Values compared by equality for sharing; JSON containers only when empty
# (1 == True and [1] == [1.0] in Python, not in JSON).
_SCALARS = frozenset({str, int, bool, dt.timedelta, dt.datetime, uuid.UUID})
_CONTAINERS = frozenset({list, dict})


# How a spec column travels (``_by_column``): one array for the batch, one parameter, or
# a literal the statement holds (NULL, an empty JSON container): no parameter at all.
EACH, ONE = "each", "one"
_EMPTY_LITERALS: dict[type, str] = {list: "'[]'", dict: "'{}'"}


def _by_column(
    specs: Sequence[JobSpec], values: list[dict[str, Any]], shape: _Shape
) -> tuple[tuple[str, ...], list[Any], list[list[Any]]]:
    """How each spec column travels (``EACH``, ``ONE`` or a literal), in ``SPEC_COLUMNS`` order; the
    value of each ``ONE`` column and the array of each ``EACH`` one.

    A batch's jobs mostly share every column but their id and args: the
    statement then reads two arrays and a handful of single values, not a
    value per column per job. A shared NULL or empty container is a literal
    of the statement, not a parameter: a plain job's are most of its
    columns, so a single enqueue sends a third of them.
    """
    first, first_retry = values[0], specs[0].retry
    forms = []
    shared: list[Any] = []
    arrays: list[list[Any]] = []
    for name, jsonb in zip(job_columns.SPEC_COLUMNS, shape.jsonb, strict=True):
        base = first[name]
        kind = type(base)
        differs = False
        if name == "id":
            differs = len(values) > 1
        elif name == "retry":
            # Equal policies store equal dicts; a batch's jobs mostly share the one object.
            differs = any(spec.retry is not first_retry and spec.retry != first_retry for spec in specs)
        else:
            for columns in values:
                value = columns[name]
                if value is base:
                    continue
                if type(value) is kind and (
                    (kind in _SCALARS and value == base) or (kind in _CONTAINERS and not value and not base)
                ):
                    continue
                differs = True
                break
        if differs:
            forms.append(EACH)
            arrays.append([_jsonb_text(columns[name]) for columns in values] if jsonb
                          else [columns[name] for columns in values])
        elif base is None:
            forms.append("NULL")
        elif jsonb and not base and kind in _EMPTY_LITERALS:
            forms.append(_EMPTY_LITERALS[kind])
        else:
            forms.append(ONE)
            shared.append(_jsonb_text(base) if jsonb else base)
    return tuple(forms), shared, arrays


# Most of a plain job's JSON columns are empty (args, meta, tags, extra...): their text needs no encoder.
_EMPTY_JSON: dict[type, str] = {list: "[]", dict: "{}"}


def _jsonb_text(value: Any) -> str | None:
    """A jsonb column's parameter: its JSON text, NULL for None."""
    if value is None:
        return None
    if not value and type(value) in _EMPTY_JSON:
        return _EMPTY_JSON[type(value)]
    return json.dumps(value)


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
        self.table = model._meta.db_table
        # NULL columns are left to the INSERT's column list: they are NULL without being named.
        given = [name for name, value in self.fixed.items() if value is not None]
        chosen = [*job_columns.SPEC_COLUMNS, *_CLOCK_COLUMNS, *given]
        self.db_types = [_db_type(model, c, connection) for c in job_columns.SPEC_COLUMNS]
        self.jsonb = [db_type == "jsonb" for db_type in self.db_types]
        # The fixed values are the model's: literals of the statement, not parameters.
        self._rest = [*("CURRENT_TIMESTAMP" for _ in _CLOCK_COLUMNS),
                      *(f"{_literal(self.fixed[c])}::{_db_type(model, c, connection)}" for c in given)]
        self._into = f"WITH inserted AS (INSERT INTO {self.table} ({', '.join(quote(c) for c in chosen)}) "
        self._returning = " RETURNING seq, id, created_at, type, queue, state, attempt, priority)"
        self._sql: dict[tuple[bool, bool, tuple[str, ...]], str] = {}

    def _insert(self, forms: tuple[str, ...]) -> str:
        """The INSERT: shared columns as ``%s`` values or literals, differing ones from ``unnest`` of
        their arrays, in order (``_by_column``)."""
        arrays, picked = [], []
        for index, (form, db_type) in enumerate(zip(forms, self.db_types, strict=True)):
            if form == EACH:
                arrays.append(f"%s::{db_type}[]")
                picked.append(f"r.c{index}")
            else:
                picked.append(f"{'%s' if form == ONE else form}::{db_type}")
        if not arrays:
            # One job (``enqueue``), or a batch of one.
            return f"{self._into}VALUES ({', '.join([*picked, *self._rest])}){self._returning}"
        names = ", ".join(f"c{index}" for index, form in enumerate(forms) if form == EACH)
        return (
            f"{self._into}SELECT {', '.join([*picked, *self._rest])} FROM unnest({', '.join(arrays)})"
            f" WITH ORDINALITY AS r({names}, n) ORDER BY r.n{self._returning}"
        )

    def sql(self, with_events: bool, listening: bool, forms: tuple[str, ...]) -> str:
        """The statement; ``listening``: it also returns each job's event (``events.logged_cte``)."""
        key = (with_events, listening, forms)
        sql = self._sql.get(key)
        if sql is None:
            # job.enqueued, as core/push.py's push_event writes it, from the inserted rows.
            sql = self._insert(forms) + events.logged_cte(
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


def _literal(value: int | str) -> str:
    """A fixed column's default as SQL: an integer, a boolean or a string (quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    return "'" + str(value).replace("'", "''") + "'"


def _db_type(model: Any, attname: str, connection: Any) -> str:
    """The column's type without its length: a cast to varchar(n) would cut a value the INSERT must refuse."""
    return re.sub(r"\(.*\)", "", model._meta.get_field(attname).cast_db_type(connection))
