"""Model instances for rows a raw statement returned, as ``Model.from_db`` builds them, only cheaper.

``Model.__init__`` walks every field one by one and sends ``pre_init`` and
``post_init``: ~15 µs an instance, paid per job by the fast PUSH and twice per
job by the returned events. With every column at hand and nobody listening
to those signals, filling ``__dict__`` at once gives the same instance.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import connections
from django.db.models import JSONField
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from . import prepared


def loaded(model: Any, db: str, values: dict[str, Any]) -> Any:
    """The ``model`` instance of a stored row; ``values`` maps every concrete field's attname."""
    return loaded_many(model, db, (values,))[0]


def loaded_many(model: Any, db: str, rows: Iterable[dict[str, Any]]) -> list[Any]:
    """``loaded`` for each of ``rows``; the signals are looked up once, not per row."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        names = [field.attname for field in model._meta.concrete_fields]
        return [model.from_db(db, names, [values[name] for name in names]) for values in rows]
    instances = []
    for values in rows:
        instance = model.__new__(model)
        instance.__dict__.update(values)
        state = instance._state = ModelState()
        state.adding, state.db = False, db
        instances.append(instance)
    return instances


def raw_loaded(manager: Any, sql: str, params: Any) -> list[Any]:
    """``list(manager.raw(sql, params))``, at a fraction of its cost per statement.

    ``RawQuerySet`` works out, per execution, which column is which field,
    the converters of each (a compiler of its own) and the model's init
    order: ~0.5 ms of CPU for a one-row ACK of the ~40-column job table. The
    statements of the fast paths return the same columns every time, so that
    plan is made once per column list (``_plan``); the rows become instances
    with ``loaded``. As with ``raw``, a column that is not a field of the
    model becomes an attribute of the instance (``ojs_event_*``, a claim's
    verdict); every field must be among the columns.
    """
    db = manager.db
    connection = connections[db]
    with prepared.cursor(connection) as cursor:
        cursor.execute(sql, params)
        names = _column_names(cursor)
        rows = cursor.fetchall()
    model = manager.model
    plan = _plan(model, names, connection)
    fields = [field.attname for field in model._meta.concrete_fields]
    converted = []
    for row in rows:
        values = dict(zip(names, row))
        for name, column, converters in plan:
            value = values[name]
            for convert in converters:
                value = convert(value, column, connection)
            values[name] = value
        converted.append(values)
    if not (pre_init.has_listeners(model) or post_init.has_listeners(model)):
        return loaded_many(model, db, converted)
    built = []
    for values in converted:
        instance = model.from_db(db, fields, [values.pop(name) for name in fields])
        instance.__dict__.update(values)  # the columns that are no field
        built.append(instance)
    return built


def _column_names(cursor: Any) -> tuple[str, ...]:
    """The result's column names. psycopg's ``description`` builds a Column object per column per
    execution (a fifth of a one-row ACK's Python); its result object names them without that."""
    result = getattr(cursor.cursor, "pgresult", None)
    if result is None:
        return tuple(column[0] for column in cursor.description)
    return tuple(result.fname(index).decode() for index in range(result.nfields))


# (model, column names, database alias) -> [(column name, Col, converters)] for the columns that need converting.
_plans: dict[tuple[Any, tuple[str, ...], str], list[tuple[str, Any, list[Any]]]] = {}


def _plan(model: Any, names: tuple[str, ...], connection: Any) -> list[tuple[str, Any, list[Any]]]:
    """What ``RawQuerySet`` converts in each column, the same way: the backend's converters, then the field's."""
    key = (model, names, connection.alias)
    plan = _plans.get(key)
    if plan is None:
        by_column = {field.column: field for field in model._meta.concrete_fields}
        missing = {field.column for field in model._meta.concrete_fields} - set(names)
        if missing or any(by_column[name].attname != name for name in names if name in by_column):
            raise ValueError(f"raw_loaded needs every column of {model.__name__} by its attname; missing {missing}")
        plan = []
        for name in names:
            field = by_column.get(name)
            if field is None:
                continue
            column = field.get_col(model._meta.db_table)
            converters = [*connection.ops.get_db_converters(column), *column.get_db_converters(connection)]
            converters = [_json_column if _plain_json(field, convert) else convert for convert in converters]
            if converters:
                plan.append((name, column, converters))
        if len(_plans) < 256:  # the fast paths' statements: a handful of column lists
            _plans[key] = plan
    return plan


def _plain_json(field: Any, convert: Any) -> bool:
    """Is ``convert`` a ``JSONField``'s own ``from_db_value`` with the standard decoder?"""
    return isinstance(field, JSONField) and field.decoder is None and getattr(convert, "__func__", None) is (
        JSONField.from_db_value
    )


# A claimed job carries half a dozen JSON columns, most of them empty (args, meta, tags, extra...).
_EMPTY_JSON = {"{}": dict, "[]": list}


def _json_column(value: Any, expression: Any, connection: Any) -> Any:
    """``JSONField.from_db_value`` for a column read whole: the same values, an empty
    object or array without the decoder (a fresh one each time: they are mutable)."""
    if value is None or not isinstance(value, str):
        return value
    empty = _EMPTY_JSON.get(value)
    if empty is not None:
        return empty()
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
