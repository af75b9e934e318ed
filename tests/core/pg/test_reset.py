"""The conformance runner's reset (``/ojs/v1/_test/reset``, ``core.testing.reset_store``) beside a
reaper that reads the tables it truncates, on real PostgreSQL with a second real connection."""

from __future__ import annotations

import contextlib

import psycopg
import pytest
from django.db import connection

from django_ojs.core.testing import reset_store
from django_ojs.models import Event, Job
from tests.core.pg.test_partitions import a_lock_waits
from tests.helpers import Background, pg_session
from tests.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_reset_that_deadlocks_with_a_reader_of_two_of_its_tables_runs_again_and_empties_the_store(push):
    """TRUNCATE locks the job table, then the event table; a reader holding the events and then
    reading the jobs closes a cycle, and PostgreSQL aborts the reset, the first to wait. A case
    of the conformance run then met the jobs of the case before it."""
    push(type="a.b")
    reader = pg_session()
    reader.execute(f"SELECT count(*) FROM {Event._meta.db_table}")  # holds the events, in its transaction
    resetting = Background(reset_store)
    try:
        with connection.cursor() as cursor:
            wait_until(lambda: a_lock_waits(cursor), 30, "the reset to wait for the events")
        # Now the reader waits on the reset; if the reader is the one aborted, the reset goes on.
        with contextlib.suppress(psycopg.errors.DeadlockDetected):
            reader.execute(f"SELECT count(*) FROM {Job._meta.db_table}")
    finally:
        reader.rollback()
        reader.close()
        resetting.join(60)
    assert not resetting.is_alive() and resetting.raised is None, resetting.raised
    assert not Job.objects.exists()
