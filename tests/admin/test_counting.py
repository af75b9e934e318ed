"""Bounded counts: exact when small, the planner's estimate when large or slow."""

from __future__ import annotations

import pytest
from django.db import connection

from django_ojs.core import counting, partitions
from django_ojs.core.counting import Tally, count_rows
from django_ojs.models import Job


def test_a_small_count_is_exact(make_job):
    make_job("available")
    make_job("pending")
    assert count_rows(Job.objects.all(), limit=5) == Tally(2, True)
    assert str(count_rows(Job.objects.all(), limit=5)) == "2"


@pytest.mark.postgres
def test_past_the_bound_the_planner_estimates(make_job):
    for _ in range(8):
        make_job("available")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_ojs_job")
        # On the partitioned table (core/partitions.py) the planner counts at least one row in
        # each partition, the empty history partitions too.
        empty = len(partitions.day_partitions(cursor)) if partitions.is_partitioned() else 0
    tally = count_rows(Job.objects.all(), limit=3)
    assert not tally.exact and tally.value == 8 + empty
    assert str(tally) == f"≈ {8 + empty}"


@pytest.mark.postgres
def test_a_count_that_runs_out_of_time_falls_back_to_the_estimate(make_job, monkeypatch):
    for _ in range(3):
        make_job("available")
    monkeypatch.setattr(counting, "COUNT_TIMEOUT_MS", 5)
    # Each row costs 20 ms to look at: the bounded count cannot finish in 5 ms.
    slow = Job.objects.extra(where=["pg_sleep(0.02) IS NOT NULL"])
    tally = count_rows(slow, limit=100)
    assert not tally.exact
    # The connection is still usable: the timeout was local to the count.
    assert Job.objects.count() == 3


def test_a_lower_bound_is_said_as_one():
    assert str(Tally(1001, False, at_least=True)) == "> 1,000"
    assert str(Tally(25_000, False)) == "≈ 25,000"


@pytest.mark.postgres
def test_the_count_timeout_does_not_outlive_the_count(make_job):
    """Inside a caller's transaction (ATOMIC_REQUESTS), later statements keep the caller's timeout."""
    make_job("available")
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        before = cursor.fetchone()[0]
        count_rows(Job.objects.all(), limit=5)
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == before
