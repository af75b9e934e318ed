"""Many job rows at once, for tests of bulk moves and search (not through the core).

PostgreSQL: one ``INSERT ... SELECT generate_series`` (100,000 rows in a few
seconds). SQLite: ``bulk_create``. Each row is a plausible stored job in
``state``; a discarded one carries an error, as the dead letter shows it.
``args`` is a SQL expression over the row number ``g`` on PostgreSQL and a
Python function of it elsewhere.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection

from django_ojs.models import Job

ERROR = {"type": "ConnectionError", "message": "connection refused"}


def insert_jobs(
    count: int,
    *,
    state: str = "discarded",
    queue: str = "bulk",
    type: str = "bulk.job",
    args_sql: str = "jsonb_build_array(jsonb_build_object('user_id', g))",
    args: Callable[[int], list[Any]] = lambda g: [{"user_id": g}],
    analyze: bool = False,
) -> None:
    finished = state in ("completed", "cancelled", "discarded")
    error = ERROR if state == "discarded" else None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"""INSERT INTO {Job._meta.db_table} (id, type, queue, args, meta, priority, state, attempt,
                        max_attempts, releases, retry, visibility_timeout, tags, schema, extra, given_times,
                        created_at, finished_at, error, dead_letter)
                    SELECT gen_random_uuid(), %s, %s, {args_sql}, '{{}}', 0, %s, 3, 3, 0, '{{}}',
                        interval '30 minutes', '[]', '', '{{}}', '{{}}', now(),
                        CASE WHEN %s THEN now() END, %s::jsonb, %s
                    FROM generate_series(1, %s) AS g""",
                [type, queue, state, finished, json.dumps(error) if error else None, state == "discarded", count],
            )
            if analyze:
                cursor.execute(f"ANALYZE {Job._meta.db_table}")
        return
    now = dt.datetime.now(dt.UTC)
    Job.objects.bulk_create(
        [
            Job(id=uuid.uuid4(), type=type, queue=queue, args=args(g), state=state, attempt=3,
                visibility_timeout=dt.timedelta(minutes=30), created_at=now,
                finished_at=now if finished else None, error=error, dead_letter=state == "discarded")
            for g in range(1, count + 1)
        ],
        batch_size=500,
    )
