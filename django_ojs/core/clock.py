"""The database keeps time (DESIGN invariant 4).

Timestamps written by transitions come from the database clock, so web
servers, workers and reapers on hosts with skewed clocks agree on what has
expired. On PostgreSQL both helpers use ``CURRENT_TIMESTAMP``, the start of
the transaction, so every timestamp one transition writes is the same instant.
"""

from __future__ import annotations

import datetime as dt

from django.db import connection
from django.db.models.functions import Now
from django.utils.dateparse import parse_datetime


def db_now() -> dt.datetime:
    """The database's current time as an aware UTC datetime."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
            parsed = parse_datetime(cursor.fetchone()[0])
            assert parsed is not None  # SQLite's own format
            return parsed.replace(tzinfo=dt.UTC)
        cursor.execute("SELECT CURRENT_TIMESTAMP")
        return cursor.fetchone()[0].astimezone(dt.UTC)


def db_clock() -> dt.datetime:
    """The database's clock as it reads now, not the start of the transaction (``db_now``)."""
    if connection.vendor == "sqlite":
        return db_now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0].astimezone(dt.UTC)


class TxNow(Now):
    """``Now()`` that is constant within a PostgreSQL transaction.

    Django's ``Now`` uses ``STATEMENT_TIMESTAMP()`` there; a transition that
    compares in one statement and writes in the next must see one instant.
    """

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="CURRENT_TIMESTAMP", **extra_context)


def restarted_within(seconds: float) -> bool:
    """Did the database server start less than ``seconds`` ago?

    After a PostgreSQL restart every worker's last heartbeat and lease
    extension is as old as the outage, through no fault of the worker. The
    reaper judges silence only once the server has been up for a whole
    heartbeat timeout, so that every live worker has had the time to beat
    again; otherwise each restart would declare every worker dead. SQLite
    is embedded: it never restarts under a running worker.
    """
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_postmaster_start_time() > CURRENT_TIMESTAMP - %s * interval '1 second'", [seconds]
        )
        return bool(cursor.fetchone()[0])
