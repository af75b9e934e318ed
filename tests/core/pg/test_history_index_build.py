"""Migrations 0024 to 0026 on real PostgreSQL, interrupted or under a writer, as a deploy meets them.

The list indexes of history (``partitions.build_history_indexes``, migrations 0025 and 0026)
are built online, one CREATE INDEX CONCURRENTLY per day partition: a build cancelled midway
leaves an invalid index, a crash between two statements leaves some built and some not, and
``manage.py migrate`` run again must finish the job. Migration 0024 partitions a small job
table in place, inside the migration, while the old release may still push: a push in flight
is copied, not left in the plain table it drops; the opt-in test at the end measures it at the
size its limit allows, with a writer pushing throughout.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from django_ojs.core import partitions
from django_ojs.models import Job
from django_ojs.protocol.envelope import parse_job
from tests.bench.fill import fill
from tests.core.pg import test_history_indexes as index_tests
from tests.core.pg import test_partitions as partition_tests
from tests.helpers import pg_session
from tests.waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# Completed jobs in day partitions of the last days (and a few waiting ones), vacuumed.
history = index_tests.history
# The job table as one plain table, as before migration 0024; partitioned again after.
plain_table = partition_tests.plain_table


def expected_indexes() -> dict[str, str | None]:
    """Every index ``build_history_indexes`` gives the history partitions there are now: its
    name -> the partitioned index it belongs to (None for a state's own, ON ONLY its partition)."""
    with connection.cursor() as cursor:
        leaves = partitions.day_partitions(cursor)
    expected: dict[str, str | None] = {}
    for stem, (_, states) in partitions.HISTORY_INDEXES.items():
        for state in states:
            parent = f"{stem}_{state}"
            expected[parent] = None
            for leaf in (p for p in leaves if p.state == state):
                expected[f"{stem}_{leaf.name.removeprefix(f'{partitions.TABLE}_')}"] = parent
    return expected


def catalog(names: Any) -> dict[str, tuple[int, bool, str | None]]:
    """Those of the indexes ``names`` that exist: name -> (oid, pg_index.indisvalid, the index it is attached to)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, c.oid, i.indisvalid, p.relname FROM pg_class AS c
               JOIN pg_index AS i ON i.indexrelid = c.oid
               LEFT JOIN pg_inherits AS h ON h.inhrelid = c.oid LEFT JOIN pg_class AS p ON p.oid = h.inhparent
               WHERE c.relname = ANY(%s)""",
            [list(names)],
        )
        return {name: (oid, valid, parent) for name, oid, valid, parent in cursor.fetchall()}


def check_every_index_built_valid_and_attached() -> None:
    expected = expected_indexes()
    found = {name: (valid, parent) for name, (_, valid, parent) in catalog(expected).items()}
    assert found == {name: (True, parent) for name, parent in expected.items()}


def migrate_cancelled_in_a_concurrent_build() -> str:
    """``manage.py migrate`` from 0024, cancelled while 0025 builds its first day partition's index.

    Another session holds a snapshot (an open REPEATABLE READ transaction, as a long report
    would), so CREATE INDEX CONCURRENTLY, its index built, waits for it before it can mark the
    index valid; the statement is then cancelled, as a deploy's timeout or an operator's
    ``pg_cancel_backend`` would. Returns the name of the index it was building.
    """
    failed: list[BaseException] = []

    def deploy() -> None:
        try:
            call_command("migrate", "django_ojs", verbosity=0)
        except BaseException as exc:
            failed.append(exc)
        finally:
            connections.close_all()

    def build_waiting() -> tuple[int, str] | None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, index_relid::regclass::text FROM pg_stat_progress_create_index "
                "WHERE datname = current_database() AND command = 'CREATE INDEX CONCURRENTLY' "
                "AND phase = 'waiting for old snapshots'"
            )
            return cursor.fetchone()

    holder = pg_session()
    deployer = threading.Thread(target=deploy, daemon=True)
    try:
        holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        holder.execute("SELECT 1")  # the transaction's snapshot, held until it ends
        with connection.cursor() as cursor:
            cursor.execute("SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = %s",
                           [holder.info.backend_pid])
            assert cursor.fetchone()[0]
        deployer.start()
        pid, building = wait_until(build_waiting, PATIENCE, "a concurrent index build waiting for the held snapshot")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_cancel_backend(%s)", [pid])
            assert cursor.fetchone()[0]
        deployer.join(PATIENCE)
        assert not deployer.is_alive()
    finally:
        holder.close()  # a build that was not cancelled goes on, and the thread ends
        if deployer.ident is not None:
            deployer.join(PATIENCE)
    [error] = failed
    assert "canceling statement due to user request" in str(error), error
    return building


def test_a_concurrent_build_cancelled_midway_is_built_again_by_the_next_migrate(history, monkeypatch):
    """The index a cancelled CREATE INDEX CONCURRENTLY left (invalid, attached to nothing) is
    dropped and built again by the next ``migrate``, with every other one: all valid, each day
    partition's attached, each state's partitioned index valid."""
    runs: list[list[str]] = []
    build = partitions.build_history_indexes

    def recorded(using: Any = None) -> list[str]:
        made = build(using)
        runs.append(made)
        return made

    with connection.cursor() as cursor:  # the oldest cancelled day, whose index 0025 builds first, holds jobs
        cursor.execute("UPDATE django_ojs_job SET state = 'cancelled', completed_at = NULL WHERE seq IN "
                       "(SELECT seq FROM django_ojs_job WHERE state = 'completed' ORDER BY seq LIMIT 1000)")
    try:
        call_command("migrate", "django_ojs", "0024", verbosity=0)
        expected = expected_indexes()
        assert not catalog(expected)

        leftover = migrate_cancelled_in_a_concurrent_build()

        parent = expected[leftover]
        assert parent is not None, leftover  # a day partition's, not a state's
        found = catalog(expected)
        # What the cancelled run left: the state's index ON ONLY its partition, not valid while a
        # day partition lacks its index, and that day's index, invalid and attached to nothing.
        assert {name: (valid, up) for name, (_, valid, up) in found.items()} == {
            parent: (False, None), leftover: (False, None)}, found
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_index AS i JOIN django_ojs_job AS j ON j.tableoid = i.indrelid "
                           "WHERE i.indexrelid = to_regclass(%s)", [leftover])
            assert cursor.fetchone()[0] > 0  # its day partition holds jobs: a real index to build again
        applied = MigrationRecorder(connection).applied_migrations()
        assert ("django_ojs", "0025_history_list_indexes") not in applied

        monkeypatch.setattr(partitions, "build_history_indexes", recorded)
        call_command("migrate", "django_ojs", verbosity=0)
    finally:
        call_command("migrate", "django_ojs", verbosity=0)  # the test database as the others expect it

    check_every_index_built_valid_and_attached()
    # 0025 built all but the state's index it found (made valid by the last attach), the
    # leftover among them: dropped and built anew, not kept. 0026 found nothing to do.
    assert sorted(runs[0]) == sorted(set(expected) - {parent})
    assert runs[1:] == [[]]
    assert catalog([leftover])[leftover][0] != found[leftover][0]


class Stopped(Exception):
    """The migration's process gone between two statements (a crash, a cancelled deploy)."""


def test_a_build_stopped_halfway_builds_only_what_is_missing_and_ends_valid(history):
    """Stopped between two statements, the build left one list index complete, the next one
    partly made (some day partitions with their index, one built but not attached yet, the
    rest without; its state's index invalid), and the states after it without any: the next
    run builds exactly what is missing, keeps what was built, and every index ends valid."""
    first, second = "ojs_job_created", "ojs_job_seq_created"
    try:
        partitions.drop_history_indexes(connection, [first, second])  # their day partitions' go with them
        expected = expected_indexes()
        completed = sorted(name for name, parent in expected.items() if parent == f"{second}_completed")
        assert len(completed) >= 4, completed
        middle = completed[len(completed) // 2]

        def stop_before_attaching_middle(execute, sql, params, many, context):
            if "ATTACH PARTITION" in sql and f'"{middle}"' in sql:
                raise Stopped(sql)
            return execute(sql, params, many, context)

        with pytest.raises(Stopped), connection.execute_wrapper(stop_before_attaching_middle):
            partitions.build_history_indexes(connection)

        before = catalog(expected)
        state = {name: (valid, parent) for name, (_, valid, parent) in before.items()}
        assert state[f"{second}_completed"] == (False, None)
        assert state[middle] == (True, None)  # built, not attached
        assert state[completed[0]] == (True, f"{second}_completed")
        assert completed[-1] not in state and f"{second}_discarded" not in state
        assert all(state[name] == (True, parent) for name, parent in expected.items() if name.startswith(first))
        missing = [name for name in expected if name not in before]

        built = partitions.build_history_indexes(connection)

        assert sorted(built) == sorted(missing)
        check_every_index_built_valid_and_attached()
        after = catalog(expected)
        assert all(after[name][0] == oid for name, (oid, _, _) in before.items())  # kept, not built again
    finally:
        partitions.build_history_indexes(connection)  # whatever happened, the test database complete again


# --------------------------------------------------------------------------------------------
# Migration 0024 in place


def test_migration_0024_in_place_keeps_a_job_whose_push_commits_while_it_runs(plain_table):
    """A deploy runs ``migrate`` while the old release still pushes. A push in flight when
    migration 0024 begins commits while it runs: the migration waits for it and copies its job,
    which must not be left behind in the plain table the migration drops at its end."""
    migration = importlib.import_module("django_ojs.migrations.0024_partitioned_job_history")
    apps = MigrationExecutor(connection).loader.project_state(("django_ojs", "0024_partitioned_job_history")).apps
    pushed, commit = threading.Event(), threading.Event()
    in_flight: list[Any] = []
    failed: list[BaseException] = []

    def push_in_flight() -> None:
        try:
            with transaction.atomic():
                in_flight.append(Job.objects.push(parse_job({"type": "in.flight", "args": []})))
                pushed.set()
                commit.wait(PATIENCE)
        except BaseException as exc:  # asserted below
            failed.append(exc)
        finally:
            connection.close()  # this thread's own

    def migrate() -> None:
        try:
            with connection.schema_editor() as editor:  # one transaction, as the migration runs on PostgreSQL
                migration.partition(apps, editor)
        except BaseException as exc:  # asserted below
            failed.append(exc)
        finally:
            connection.close()

    producer = threading.Thread(target=push_in_flight, daemon=True)
    producer.start()
    wait_until(lambda: pushed.is_set() or failed, PATIENCE, "the push in flight")
    migrating = threading.Thread(target=migrate, daemon=True)
    migrating.start()
    try:
        # The migration has come to the table's lock, which the push in flight holds.
        wait_until(lambda: waiting_for_a_lock() or not migrating.is_alive(), PATIENCE,
                   "the migration to wait for the push in flight", interval=0.01)
    finally:
        commit.set()
        producer.join(PATIENCE)
        migrating.join(PATIENCE)
    assert not failed, failed
    assert partitions.is_partitioned()
    assert Job.objects.filter(id=in_flight[0].id).exists()


def waiting_for_a_lock() -> bool:
    """Is a session other than this one waiting for a lock?"""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND pid <> pg_backend_pid() AND datname = current_database()")
        return cursor.fetchone()[0] > 0


# --------------------------------------------------------------------------------------------
# Migration 0024 in place, measured at its limit


class Pusher(threading.Thread):
    """Pushes a job every ``every`` seconds on its own connection until told to stop; each
    push's span, for the longest one across a given time."""

    def __init__(self, every: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.stop = threading.Event()
        self.ids: list[Any] = []
        self.spans: list[tuple[float, float]] = []
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                began = time.monotonic()
                job = Job.objects.push(parse_job({"type": "mig.job", "args": [], "queue": "mig"}))
                self.spans.append((began, time.monotonic()))
                self.ids.append(job.id)
                self.stop.wait(self.every)  # the pace of a steady producer, not a wait for anything
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            connections.close_all()

    def pushed_after(self, moment: float) -> int:
        return sum(1 for began, _ in self.spans if began > moment)

    def longest(self, start: float, end: float) -> float:
        """The longest push that overlapped [start, end]."""
        return max((e - b for b, e in self.spans if b <= end and e >= start), default=0.0)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OJS_MIGRATION_INPLACE"), reason="set OJS_MIGRATION_INPLACE=<jobs> to run")
def test_migration_0024_partitions_a_table_in_place_while_a_writer_pushes(plain_table, push, monkeypatch, capsys):
    jobs = int(os.environ["OJS_MIGRATION_INPLACE"])
    migration = importlib.import_module("django_ojs.migrations.0024_partitioned_job_history")
    # The writer's jobs would put a table filled to the limit over it before the migration
    # counts, and the migration would leave it alone: the size measured is the filled one.
    monkeypatch.setattr(migration, "INLINE_LIMIT", max(migration.INLINE_LIMIT, 2 * jobs))
    apps = MigrationExecutor(connection).loader.project_state(("django_ojs", "0024_partitioned_job_history")).apps
    fill(jobs)
    filled = partition_tests._row_digest("django_ojs_job")  # every job but the writer's
    pusher = Pusher()
    pusher.start()
    try:
        wait_until(lambda: len(pusher.spans) >= 20 or pusher.errors, PATIENCE, "the writer's first pushes")
        began = time.monotonic()
        with connection.schema_editor() as editor:  # one transaction, as the migration runs on PostgreSQL
            migration.partition(apps, editor)
        ended = time.monotonic()
        wait_until(lambda: pusher.pushed_after(ended) >= 20 or pusher.errors, PATIENCE,
                   "the writer's pushes to the partitioned table")
    finally:
        pusher.stop.set()
        pusher.join(PATIENCE)
    held = pusher.longest(began, ended)
    outside = max((e - b for b, e in pusher.spans if e < began or b > ended), default=0.0)
    stored = set(Job.objects.filter(queue="mig").values_list("id", flat=True))
    lost = [(b - began, e - began) for (b, e), job_id in zip(pusher.spans, pusher.ids, strict=True)
            if job_id not in stored]
    with capsys.disabled():
        print(f"\nmigration 0024 partitioned {jobs:,} jobs in place in {ended - began:.1f} s; a writer pushing a "
              f"job every {pusher.every * 1000:.0f} ms was held {held * 1000:.0f} ms at the longest (its longest "
              f"push outside the migration: {outside * 1000:.0f} ms); {len(lost)} of its {len(pusher.ids)} jobs "
              f"lost; load average {os.getloadavg()[0]:.2f}")
    assert not pusher.errors, pusher.errors
    assert partitions.is_partitioned()
    # Every job the writer pushed, before, during and after the migration, is there.
    assert not lost, (f"{len(lost)} of the writer's {len(pusher.ids)} jobs lost, pushed from {lost[0][0]:.2f} s "
                      f"to {lost[-1][1]:.2f} s into the migration, which took {ended - began:.2f} s")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT seq), count(DISTINCT id) FROM django_ojs_job")
        assert cursor.fetchone() == (jobs + len(pusher.ids),) * 3
    assert partition_tests._row_digest("django_ojs_job") == filled  # every filled job as it was
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text, state, count(*) FROM django_ojs_job GROUP BY 1, 2")
        placed = cursor.fetchall()
    for table, state, _ in placed:  # live jobs in the live partition, finished ones in a day's
        if state in partitions.LIVE_STATES:
            assert table == partitions.LIVE, (table, state)
        else:
            assert table.startswith(f"{partitions.TABLE}_{state}_2"), (table, state)
    assert {state for _, state, _ in placed} >= {"available", "completed", "cancelled", "discarded"}
    partition_tests.check_the_app_works_on_it(push)
