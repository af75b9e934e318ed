"""Migrations run beside the release before (docs/how-to/upgrading.md): one that locks two tables
must lock them in the order the workers' transactions do -- the job first, then its events or its
error history -- or a worker settling a job while it runs deadlocks with it, and PostgreSQL kills
one of the two: the worker's write, or ``manage.py migrate`` halfway through the upgrade.

Each test holds a worker's transaction open on a job row, starts the migration, and once the
migration waits for that transaction, writes the row the worker writes next and commits: the
migration must wait for it, not hold the second table against it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_ojs.core import partitions
from django_ojs.models import Job
from django_ojs.protocol.envelope import parse_job
from tests.core.pg.test_history_index_build import waiting_for_a_lock
from tests.core.pg.test_partitions import plain_table
from tests.helpers import pg_session
from tests.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

__all__ = ["plain_table"]  # the fixture, imported for the tests below


def apply_in_background(name: str, failed: list[BaseException]) -> threading.Thread:
    """Apply migration ``name`` once more, as ``migrate`` does (its operations in one transaction,
    from the state before it), on a thread and connection of its own."""
    loader = MigrationExecutor(connection).loader
    migration = loader.get_migration("django_ojs", name)
    before = loader.project_state(("django_ojs", name), at_end=False)

    def apply() -> None:
        try:
            with connection.schema_editor(atomic=migration.atomic) as editor:
                migration.apply(before, editor)
        except BaseException as exc:  # asserted by the caller
            failed.append(exc)
        finally:
            connection.close()  # this thread's own

    thread = threading.Thread(target=apply, daemon=True)
    thread.start()
    return thread


def worker_writes_beside(name: str, second_write: str) -> list[BaseException]:
    """A worker's transaction updates a job; migration ``name`` starts and waits for it; the
    worker then writes ``second_write`` (``%(seq)s`` and ``%(id)s`` are the job's) and commits.
    The failures of either side."""
    job = Job.objects.push(parse_job({"type": "lock.order", "args": []}))
    failed: list[BaseException] = []
    with pg_session() as worker:
        worker.execute("UPDATE django_ojs_job SET priority = priority WHERE id = %s", [job.id])
        migrating = apply_in_background(name, failed)
        try:
            wait_until(lambda: waiting_for_a_lock() or not migrating.is_alive(), PATIENCE,
                       "the migration to wait for the worker's transaction", interval=0.01)
            try:
                worker.execute(second_write, {"seq": job.seq, "id": job.id})
                worker.commit()
            except Exception as exc:  # a deadlock's victim: asserted below
                failed.append(exc)
                worker.rollback()
        finally:
            migrating.join(PATIENCE)
    assert not migrating.is_alive(), "the migration still waits"
    return failed


@pytest.fixture
def before_0016(plain_table: None) -> Iterator[None]:
    """The job table as before 0024, without the two indexes 0016 adds."""
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS ojs_event_no_job")
        cursor.execute("DROP INDEX IF EXISTS ojs_job_dead_letter")
    yield


def test_migration_0016_waits_for_a_settle_in_flight_instead_of_deadlocking(before_0016: None) -> None:
    """A worker settling a job updates it, then records its event; 0016 indexes both tables."""
    failed = worker_writes_beside(
        "0016_failed_jobs_and_job_stories",
        "INSERT INTO django_ojs_event (id, type, time, job_id, queue, data) "
        "VALUES (gen_random_uuid(), 'job.completed', now(), %(id)s, 'default', '{}')",
    )
    assert not failed, failed
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname IN ('ojs_event_no_job', 'ojs_job_dead_letter')")
        assert cursor.fetchone()[0] == 2


@pytest.fixture
def before_0024(plain_table: None) -> Iterator[None]:
    """The job table as before 0024: plain, its error history and steps referencing it."""
    with connection.cursor() as cursor:
        for table in ("django_ojs_joberror", "django_ojs_jobstep"):
            cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_job_before_0024 "
                           "FOREIGN KEY (job_id) REFERENCES django_ojs_job (seq) DEFERRABLE INITIALLY DEFERRED")
    yield
    with connection.cursor() as cursor:  # gone with the migration; not if it failed
        for table in ("django_ojs_joberror", "django_ojs_jobstep"):
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_job_before_0024")


def test_migration_0024_waits_for_a_failure_in_flight_instead_of_deadlocking(before_0024: None) -> None:
    """A worker failing a job updates it, then records the error; 0024 drops the error history's
    foreign key (locking both tables) and partitions the job table."""
    failed = worker_writes_beside(
        "0024_partitioned_job_history",
        "INSERT INTO django_ojs_joberror (job_id, attempt, type, code, message, backtrace, occurred_at) "
        "VALUES (%(seq)s, 1, 'Boom', 'Boom', 'in flight', '[]', now())",
    )
    assert not failed, failed
    assert partitions.is_partitioned()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_ojs_joberror WHERE message = 'in flight'")
        assert cursor.fetchone()[0] == 1
