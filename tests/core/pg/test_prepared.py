"""The hot statements prepared on the server (core/prepared.py), on PostgreSQL.

A single PUSH, a claim, an ACK and the worker's batch write (lock, then
complete) are prepared once per connection and reused; nothing is prepared
where the project says a transaction pooler sits in front of PostgreSQL;
and a column another process adds to the job table (a migration during a
rolling deploy) does not break a statement prepared before it.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from django_ojs.core.types import Lease, Settlement, Verdict
from django_ojs.models import Job

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WORKER = "prepared-worker"


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return sorted(row[0] for row in cursor.fetchall())


def every_hot_path(spec) -> list[Job]:
    """One of each: single PUSH, claim, ACK, and a batch written as the worker writes it; the completed jobs."""
    Job.objects.push(spec(options={"queue": "prep"}, args=[1]))
    Job.objects.push(spec(options={"queue": "prep"}, args=[2]))
    first, second = Job.objects.fetch(["prep"], count=2, worker_id=WORKER)
    acked = Job.objects.ack(first.id, result={"n": 1}, lease=Lease(worker_id=WORKER, attempt=1))
    verdicts = Job.objects.settle_many([Settlement(second.id, Lease(worker_id=WORKER, attempt=1), result=2)])
    assert verdicts == [Verdict.COMPLETED]
    return [acked, Job.objects.get(id=second.id)]


@pytest.fixture
def fresh_session():
    """A new database session: no statement prepared by an earlier test."""
    connection.close()
    yield
    connection.close()


def test_the_hot_statements_are_prepared_once_and_reused(spec, fresh_session):
    every_hot_path(spec)
    statements = prepared_statements()
    for part in ("INSERT INTO django_ojs_job", "claimant AS", "WITH acked AS", "FOR UPDATE", "WITH done AS"):
        assert any(part in statement for statement in statements), (part, statements)
    for _ in range(3):
        completed = every_hot_path(spec)
        assert [(job.state, job.result) for job in completed] == [("completed", {"n": 1}), ("completed", 2)]
    assert prepared_statements() == statements  # the same texts again: nothing prepared twice


@pytest.mark.parametrize(
    "pooled",
    [
        pytest.param({"database": {"DISABLE_SERVER_SIDE_CURSORS": True}}, id="DISABLE_SERVER_SIDE_CURSORS"),
        pytest.param({"ojs": {"PREPARED_STATEMENTS": False}}, id="PREPARED_STATEMENTS-False"),
    ],
)
def test_nothing_is_prepared_where_a_pooler_is_declared(spec, fresh_session, monkeypatch, settings, pooled):
    for name, value in pooled.get("database", {}).items():
        monkeypatch.setitem(connection.settings_dict, name, value)
    with override_settings(OJS={**getattr(settings, "OJS", {}), **pooled.get("ojs", {})}):
        completed = every_hot_path(spec)
    assert [job.state for job in completed] == ["completed", "completed"]
    assert prepared_statements() == []


def plan_cache_mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        return cursor.fetchone()[0]


@pytest.mark.parametrize(("setting", "mode"), [(None, "force_generic_plan"), (True, "auto")],
                         ids=["decided-here", "PREPARED_STATEMENTS-True"])
def test_the_session_plans_prepared_statements_once_unless_a_pooler_may_share_it(
        spec, fresh_session, settings, setting, mode):
    """Left to decide, no transaction pooler is declared: the session plans each prepared statement
    once (core/prepared._plan_once). ``True`` is also PgBouncer 1.21+'s setting, whose server
    connections other clients share: no session setting is changed there."""
    with override_settings(OJS={**getattr(settings, "OJS", {}), "PREPARED_STATEMENTS": setting}):
        completed = every_hot_path(spec)
        assert [job.state for job in completed] == ["completed", "completed"]
        assert prepared_statements() and plan_cache_mode() == mode


def test_a_session_first_used_inside_a_transaction_plans_once_from_its_first_statement_outside(
        spec, fresh_session):
    from django.db import transaction

    with transaction.atomic():
        Job.objects.push(spec(options={"queue": "prep"}, args=["inside"]))
        assert prepared_statements()
    assert plan_cache_mode() == "auto"  # a rollback could have undone it: not set inside
    Job.objects.push(spec(options={"queue": "prep"}, args=["outside"]))
    assert plan_cache_mode() == "force_generic_plan"


def test_prepared_statements_hold_when_another_process_adds_a_column_to_the_job_table(spec, fresh_session):
    every_hot_path(spec)
    assert prepared_statements()
    db = connection.settings_dict
    other = psycopg.connect(
        dbname=db["NAME"], host=db["HOST"] or None, port=db["PORT"] or None,
        user=db["USER"] or None, password=db["PASSWORD"] or None, autocommit=True,
    )
    try:
        other.execute("ALTER TABLE django_ojs_job ADD COLUMN added_by_a_later_release integer")
        completed = every_hot_path(spec)  # "cached plan must not change result type" if a select list said *
        assert [(job.state, job.result) for job in completed] == [("completed", {"n": 1}), ("completed", 2)]
    finally:
        other.execute("ALTER TABLE django_ojs_job DROP COLUMN IF EXISTS added_by_a_later_release")
        other.close()


@pytest.mark.parametrize("use_tz", [True, False], ids=["USE_TZ", "naive"])
def test_prepared_statements_read_timestamps_exactly_as_the_orm_does(spec, fresh_session, settings, use_tz):
    """psycopg's own timestamp loader stands in for Django's where the session's time zone is the
    connection's: the same instants with the same tzinfo object as the ORM reads (none without USE_TZ)."""
    from django.db import models

    settings.USE_TZ = use_tz
    pushed = Job.objects.push(spec(options={"queue": "prep"}))
    [claimed] = Job.objects.fetch(["prep"], worker_id=WORKER)
    stamps = [f.attname for f in Job._meta.concrete_fields if isinstance(f, models.DateTimeField)]
    read = Job.objects.get(id=claimed.id)
    compared = 0
    for name in stamps:
        ours, orm = getattr(claimed, name), getattr(read, name)
        assert ours == orm, name
        if ours is not None:
            assert ours.tzinfo is orm.tzinfo, (name, ours.tzinfo, orm.tzinfo)
            assert (ours.tzinfo is not None) == use_tz
            compared += 1
    assert compared >= 4  # created, enqueued, started, lease and deadline at least
    assert pushed.created_at.tzinfo is read.created_at.tzinfo


def test_a_session_makes_its_preparing_cursor_once_and_lends_it_to_one_with_at_a_time(fresh_session):
    """Made once per session, not per statement; a ``with`` inside another gets a cursor of its own,
    so neither's results are the other's; a new session, or a new time zone, gets a new one."""
    from django_ojs.core.pg import prepared

    def raw_cursor_of(statement: str, *params) -> tuple[object, list]:
        with prepared.cursor(connection) as cursor:
            cursor.execute(statement, list(params))
            return cursor.cursor, cursor.fetchall()

    first, rows = raw_cursor_of("SELECT %s::int", 1)
    again, rows_again = raw_cursor_of("SELECT %s::int + 1", 1)
    assert again is first
    assert (rows, rows_again) == ([(1,)], [(2,)])
    with prepared.cursor(connection) as outer:
        outer.execute("SELECT generate_series(1, %s)", [3])
        inner, inner_rows = raw_cursor_of("SELECT %s::text", "inner")
        assert inner is not outer.cursor is first
        assert (outer.fetchall(), inner_rows) == ([(1,), (2,), (3,)], [("inner",)])
    assert raw_cursor_of("SELECT 1")[0] is first
    with override_settings(USE_TZ=False):  # timestamps read naive: a cursor with other loaders
        assert raw_cursor_of("SELECT 1")[0] is not first
    connection.close()
    assert raw_cursor_of("SELECT 1")[0] is not first
