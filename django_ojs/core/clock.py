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
            return parse_datetime(cursor.fetchone()[0]).replace(tzinfo=dt.timezone.utc)
        cursor.execute("SELECT CURRENT_TIMESTAMP")
        return cursor.fetchone()[0].astimezone(dt.timezone.utc)


class TxNow(Now):
    """``Now()`` that is constant within a PostgreSQL transaction.

    Django's ``Now`` uses ``STATEMENT_TIMESTAMP()`` there; a transition that
    compares in one statement and writes in the next must see one instant.
    """

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="CURRENT_TIMESTAMP", **extra_context)
