"""Write fields of many loaded rows: an UPDATE of each by its key, sent as one batch.

Django's ``bulk_update`` writes a batch as one statement with, for each
field, a CASE of one branch per row. Django builds and compiles those
expressions in Python, about 4 ms a row of a failed job's 13 columns on a
loaded machine (measured: 50 rows 0.2 s, 500 rows 2.3 s), and the database
tests a row's key against every branch, which grows with the square of the
batch. The moves that end many jobs at once -- the reaper requeueing a
dead worker's 500 jobs, the ACK that starts a workflow's 999 steps -- spent
seconds there while holding the rows' locks.

``update_rows`` sends one statement of fixed text, an UPDATE of one row by
its primary key, with a row of parameters per object (``executemany``:
psycopg pipelines them to PostgreSQL; SQLite runs them in process). The
queryset's filter goes into every statement, so an update of the live jobs
(``partitions.live_jobs()``) is planned and locked on the live
partition alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django.db import connections
from django.db.models import Field, Model, QuerySet


def update_rows(queryset: QuerySet, objs: Sequence[Model], fields: Sequence[str]) -> None:
    """Store ``fields`` of ``objs`` in their rows, each found by its key within ``queryset``'s filter."""
    if not objs:
        return
    model = queryset.model
    connection = connections[queryset.db]
    query = queryset.query
    if len(query.alias_map) > 1:  # a filter across a join has no place in an UPDATE of one table
        raise ValueError("update_rows takes a queryset filtered on its own table's columns only")
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    key = model._meta.pk
    assert key is not None
    columns = [cast(Field, model._meta.get_field(name)) for name in fields]
    assignments = ", ".join(f"{quote(cast(str, field.column))} = %s" for field in columns)
    sql = f"UPDATE {table} SET {assignments} WHERE {table}.{quote(cast(str, key.column))} = %s"
    filter_params: list[Any] = []
    if query.where:
        where, filter_params = query.get_compiler(connection=connection).compile(query.where)
        sql += f" AND ({where})"
    rows = [
        [field.get_db_prep_save(getattr(obj, field.attname), connection) for field in columns]
        + [key.get_db_prep_value(obj.pk, connection), *filter_params]
        for obj in objs
    ]
    with connection.cursor() as cursor:
        if len(rows) == 1:  # one job's FAIL: a plain statement, no pipeline to open and sync
            cursor.execute(sql, rows[0])
        else:
            cursor.executemany(sql, rows)
