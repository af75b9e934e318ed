"""Counting without full scans: exact up to a bound, the planner's estimate beyond it.

A ``COUNT(*)`` over a million-row job table reads every row. Operators need
exact figures when they are small (3 stuck jobs) and only the order of
magnitude when they are large, so a count stops at a bound (``LIMIT`` in a
subquery) and, past it, asks PostgreSQL's planner, whose estimate comes from
the table statistics (``pg_class.reltuples`` and the column histograms) and
costs no row reads. On PostgreSQL each count is also cut off by a statement
timeout, so a filter no index serves cannot hold a page hostage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import OperationalError, connections, transaction
from django.db.models import QuerySet

EXACT_COUNT_LIMIT = 10_000
# How long a bounded count may run before the estimate is used instead.
COUNT_TIMEOUT_MS = 150


@dataclass(frozen=True)
class Tally:
    """A row count and whether it is exact or an estimate."""

    value: int
    exact: bool
    # The planner guessed fewer rows than the bounded count already found:
    # all that is known is that there are more than ``value - 1``.
    at_least: bool = False

    def __str__(self) -> str:
        if self.exact:
            return f"{self.value:,}"
        return f"> {self.value - 1:,}" if self.at_least else f"≈ {self.value:,}"


def count_rows(queryset: QuerySet, limit: int = EXACT_COUNT_LIMIT, parts: Sequence[QuerySet] = ()) -> Tally:
    """Exact when there are at most ``limit`` rows, otherwise the planner's estimate.

    ``parts``: the same rows as disjoint queries, counted one after the other until the bound is
    passed, the one likeliest to hold many first: the rest is then never read. (One bounded count
    reads the partitions of the job table in their own order, the live one first, whole when it
    holds none of the rows.)"""
    bounded = _bounded_count_of_parts(parts, limit) if parts else _bounded_count(queryset, limit)
    if bounded is not None and bounded <= limit:
        return Tally(bounded, True)
    estimate = planner_estimate(queryset)
    if estimate is None:
        # Not PostgreSQL: a development database, small enough to count.
        return Tally(queryset.order_by().count(), True)
    floor = limit + 1 if bounded is not None else 0
    return Tally(max(estimate, floor), False, at_least=estimate < floor)


def _bounded_count_of_parts(parts: Sequence[QuerySet], limit: int) -> int | None:
    found = 0
    for part in parts:
        counted = _bounded_count(part, limit - found)
        if counted is None:
            return None
        found += counted
        if found > limit:
            break
    return found


def _bounded_count(queryset: QuerySet, limit: int) -> int | None:
    """Count at most ``limit + 1`` rows; None when the count ran out of time."""
    bounded = queryset.order_by().values("pk")[: limit + 1]
    try:
        with time_boxed(queryset.db, seconds=COUNT_TIMEOUT_MS / 1000):
            return bounded.count()
    except OperationalError:
        return None


@contextmanager
def time_boxed(using: str, *, seconds: float) -> Iterator[None]:
    """Run the block's statements in a savepoint cut off after ``seconds`` on PostgreSQL
    (``OperationalError`` when one runs out of time); elsewhere as is."""
    with local_settings(using, statement_timeout=f"{int(seconds * 1000)}ms"):
        yield


@contextmanager
def local_settings(using: str, **settings: str) -> Iterator[None]:
    """Run the block's statements in a savepoint under these PostgreSQL settings; elsewhere as is."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=using):
        previous = _set_local(connection, settings)
        yield
        # Within a caller's transaction (ATOMIC_REQUESTS) the settings would
        # outlive this savepoint: put the caller's back. (On an error the
        # savepoint's rollback restores them.)
        _set_local(connection, previous)


def _set_local(connection, settings: dict[str, str]) -> dict[str, str]:
    """Set these settings for the transaction; return the ones they replace."""
    names = list(settings)
    with connection.cursor() as cursor:
        # One round trip: the subquery (kept apart by OFFSET 0) reads the settings before they are set.
        reads = ", ".join(f"current_setting(%s) AS p{index}" for index in range(len(names)))
        sets = ", ".join("set_config(%s, %s, true)" for _ in names)
        cursor.execute(
            f"SELECT previous.*, {sets} FROM (SELECT {reads} OFFSET 0) previous",
            [value for name in names for value in (name, settings[name])] + names,
        )
        return dict(zip(names, cursor.fetchone()[: len(names)], strict=True))


def planner_estimate(queryset: QuerySet) -> int | None:
    """PostgreSQL's estimate of the rows ``queryset`` matches; None elsewhere."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
