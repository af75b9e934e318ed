"""The job history in day partitions (core/partitions.py) and the online migration to it
(core/partition_migration.py), on real PostgreSQL with real concurrent connections.

The test database is made by the migrations, so it is partitioned (migration 0024 on an
empty table); the migration tests turn it back into one plain table first (the way back,
``unpartition``), fill it, and migrate it again while a writer works on it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

from django_ojs.core import partition_migration, partitions
from django_ojs.core.types import Lease
from django_ojs.models import Job, JobError
from django_ojs.protocol.errors import InvalidTransition
from django_ojs.protocol.failure import Failure
from tests.bench.fill import fill
from tests.core.pg.test_query_plans import captured, plan_of
from tests.helpers import Background, pg_session, update
from tests.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def scanned(plan: str) -> set[str]:
    """The job tables (partitions) the plan's scan nodes read."""
    found = set()
    for line in plan.splitlines():
        if "Scan" in line and " on django_ojs_job" in line and "Bitmap Index Scan" not in line:
            found.add(line.split(" on ", 1)[1].split()[0])
    return found


# --------------------------------------------------------------------------------------------
# The layout


def test_the_test_database_is_partitioned_and_the_day_partitions_exist():
    """Completed and cancelled jobs by the day, discarded ones by 30 days (each goes by DELETE at
    its own retention: wide partitions keep the partitions few, which every lookup by id plans over)."""
    assert partitions.is_partitioned()
    with connection.cursor() as cursor:
        found = partitions.day_partitions(cursor)
    names = {p.name for p in found}
    today = dt.datetime.now(dt.UTC).date()
    for state in partitions.TERMINAL_STATES:
        [holding_today] = [p for p in found if p.state == state and p.start and p.start <= today < p.end]
        assert (holding_today.end - holding_today.start).days == (30 if state == "discarded" else 1)
        assert holding_today.name == f"django_ojs_job_{state}_{holding_today.start:%Y%m%d}"
        assert f"django_ojs_job_{state}_default" in names


def test_a_finished_job_moves_to_its_day_and_back_to_live_when_retried(push):
    job = push(type="a.b")
    [claimed] = Job.objects.fetch([job.queue], worker_id="w1")
    Job.objects.fail(claimed.id, Failure(type="Boom", message="no", retryable=False))
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM django_ojs_job WHERE id = %s", [job.id])
        [(partition,)] = cursor.fetchall()
    assert partition.startswith("django_ojs_job_discarded_2"), partition  # a dated one, not the DEFAULT
    Job.objects.resurrect(job.id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_ojs_job_live WHERE id = %s", [job.id])
        assert cursor.fetchone()[0] == 1
    assert JobError.objects.filter(job_id=job.seq).count() == 1


def test_a_job_retried_from_the_dead_letter_wakes_the_workers_of_its_queue(push):
    job = push(type="a.b", queue="wake")
    [claimed] = Job.objects.fetch(["wake"], worker_id="w1")
    Job.objects.fail(claimed.id, Failure(type="Boom", message="no", retryable=False))
    with pg_session(autocommit=True) as listener:
        listener.execute("LISTEN ojs_available")
        Job.objects.resurrect(job.id)
        heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert heard == ["wake"]


@pytest.mark.parametrize(
    ("operation", "marker"),
    [
        (lambda: Job.objects.fetch(["plans"], count=10), "FOR UPDATE SKIP LOCKED"),
        (lambda: Job.objects.requeue_lapsed(100), "lease_expires_at"),
        (lambda: Job.objects.promote_due(100), "run_at"),
        (lambda: Job.objects.fail_timed_out(100), "deadline_at"),
    ],
)
def test_the_hot_statements_read_the_live_partition_only(operation, marker):
    from tests.core.pg.test_query_plans import fill as fill_plans

    fill_plans("available", 2000)
    fill_plans("completed", 2000, finished_at="now()")
    plan = plan_of(captured(operation, marker))
    assert scanned(plan) and all(t == "django_ojs_job_live" for t in scanned(plan)), plan


def test_ack_and_heartbeat_statements_are_pruned_to_the_live_partition(claim):
    job = claim("w1")
    with connection.cursor() as cursor:
        for statement in (
            "UPDATE django_ojs_job SET state = 'completed', finished_at = now() WHERE id = %s AND state = 'active'",
            "UPDATE django_ojs_job SET lease_expires_at = now() WHERE worker_id = 'w1' AND state = 'active'",
        ):
            cursor.execute("BEGIN")
            cursor.execute("EXPLAIN " + statement, [job.id] if "%s" in statement else [])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("ROLLBACK")
            assert scanned(plan) == {"django_ojs_job_live"}, plan


def test_prepared_statements_still_prune_to_the_live_partition(claim):
    """A generic plan (as PgBouncer-safe sessions force, core/pg/prepared.py) prunes at plan time:
    the states are constants in the statement, not parameters."""
    job = claim("w1")
    with pg_session(autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(
            "PREPARE partition_ack(uuid) AS UPDATE django_ojs_job SET state = 'completed', finished_at = now() "
            "WHERE id = $1 AND state IN ('active')"
        )
        with conn.transaction():
            rows = conn.execute(f"EXPLAIN EXECUTE partition_ack('{job.id}')").fetchall()
            plan = "\n".join(row[0] for row in rows)
            raise_rollback = psycopg.Rollback()
            raise raise_rollback
    assert scanned(plan) == {"django_ojs_job_live"}, plan


def test_the_engines_prepared_statements_run_generic_plans_on_the_live_partition_only(push):
    """The claim, the ACK and the worker's turn as core/pg/prepared.py prepares them: their
    generic plans, made once for any parameters, touch no history partition."""
    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Worker
    from tests.core.pg.test_query_plans import generic_plan, stale_backlog

    connection.close()  # a session of its own: no statement an earlier test prepared
    stale_backlog()
    Worker.objects.register("w1")
    for _ in range(2):
        [job] = Job.objects.fetch(["plans"], count=1, worker_id="w1")
        Job.objects.ack(job.id, lease=Lease("w1", 1))
    for marker in ("candidates AS MATERIALIZED", "WITH acked AS"):
        plan = generic_plan(marker)
        assert scanned(plan) == {"django_ojs_job_live"}, plan
    connection.close()  # a fresh session: the turn's statement alone holds the claim's CTEs
    for _ in range(2):
        running = Job.objects.fetch(["plans"], count=5, worker_id="w1")
        Job.objects.settle_and_fetch("w1", [Settlement(j.id, Lease("w1", j.attempt)) for j in running], ["plans"], 5)
    plan = generic_plan("settlement AS MATERIALIZED")
    assert scanned(plan) == {"django_ojs_job_live"}, plan
    connection.close()


def test_a_chosen_id_of_a_finished_job_is_a_duplicate(push, spec):
    from django_ojs.protocol.errors import Duplicate

    job = push(type="a.b")
    Job.objects.cancel(job.id)
    with pytest.raises(Duplicate):
        Job.objects.push(spec(type="a.b", id=str(job.id)))


def test_a_unique_key_held_by_a_completed_job_rejects_a_new_one(push):
    from django_ojs.protocol.errors import DuplicateJob

    unique = {"keys": ["type"], "states": ["available", "active", "completed"], "on_conflict": "reject"}
    first = push(type="u.once", options={"unique": unique})
    [claimed] = Job.objects.fetch([first.queue], worker_id="w1")
    Job.objects.ack(claimed.id)
    with pytest.raises(DuplicateJob):
        push(type="u.once", options={"unique": unique})


# --------------------------------------------------------------------------------------------
# Upkeep and retention


def make_completed_partition(day: dt.date) -> str:
    """A day partition of completed jobs for ``day`` (a past one: the reaper makes only coming days'); its name."""
    with connection.cursor() as cursor, connection.schema_editor(collect_sql=True, atomic=False) as editor:
        _, history = partitions.index_templates(Job, editor)
        for statement in partitions._leaf_statements(history["completed"], "completed", day,
                                                     parent_of_leaf="django_ojs_job_completed"):
            cursor.execute(statement)
    return f"django_ojs_job_completed_{day:%Y%m%d}"


def test_the_prune_pass_drops_day_partitions_past_retention_with_their_history(ojs, push):
    ojs(RETENTION={**partitions.ojs_settings.RETENTION, "completed": 86400})
    now = dt.datetime.now(dt.UTC)
    old_day = (now - dt.timedelta(days=5)).date()
    make_completed_partition(old_day)
    job = push(type="a.b")
    [claimed] = Job.objects.fetch([job.queue], worker_id="w1")
    Job.objects.ack(claimed.id)
    finished = dt.datetime.combine(old_day, dt.time(12), dt.UTC)
    update(job, finished_at=finished, completed_at=finished)
    JobError.objects.create(job_id=job.seq, attempt=1, type="Boom", occurred_at=finished)

    pruned = Job.objects.prune(100)

    assert pruned["partitions_dropped"] >= 1
    assert not Job.objects.filter(seq=job.seq).exists()
    assert not JobError.objects.filter(job_id=job.seq).exists()
    with connection.cursor() as cursor:
        names = {p.name for p in partitions.day_partitions(cursor)}
    assert f"django_ojs_job_completed_{old_day:%Y%m%d}" not in names


def test_the_default_partition_catches_a_day_without_one_and_the_delete_prune_empties_it(ojs, push):
    ojs(RETENTION={**partitions.ojs_settings.RETENTION, "completed": 86400})
    job = push(type="a.b")
    [claimed] = Job.objects.fetch([job.queue], worker_id="w1")
    Job.objects.ack(claimed.id)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    update(job, finished_at=long_ago)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_ojs_job_completed_default WHERE seq = %s", [job.seq])
        assert cursor.fetchone()[0] == 1
    assert Job.objects.prune(100)["completed"] == 1


def test_status_command_lists_the_partitions(capsys):
    call_command("ojs_partition", "status")
    out = capsys.readouterr().out
    assert "partitioned" in out and "django_ojs_job_live" in out and "django_ojs_job_completed_default" in out


# --------------------------------------------------------------------------------------------
# Row movement races: two real connections


def cancelled_and_held(job_id: Any) -> tuple[threading.Thread, threading.Event]:
    """A thread that cancels the job (moving its row to history) and holds its transaction open
    until the returned event is set; started, with the cancel made."""
    started, release = threading.Event(), threading.Event()

    def cancel_and_hold() -> None:
        try:
            with transaction.atomic():
                Job.objects.cancel(job_id)
                started.set()
                release.wait(30)
        finally:
            connections.close_all()

    canceller = threading.Thread(target=cancel_and_hold)
    canceller.start()
    assert started.wait(30)
    return canceller, release


def a_lock_waits(cursor: Any) -> bool:
    """Does some transaction on this database wait for a lock?"""
    # A wait on a row is a wait on its holder's transaction id: a lock of no database.
    cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid IN "
                   "(SELECT pid FROM pg_stat_activity WHERE datname = current_database())")
    return cursor.fetchone()[0] > 0


def release_once_a_lock_waits(release: threading.Event) -> None:
    """Set ``release`` from a thread of its own once some transaction waits for a lock on this database."""

    def watch() -> None:
        try:
            with connection.cursor() as cursor:
                wait_until(lambda: a_lock_waits(cursor), 30, "a transaction to wait on the held row")
            release.set()
        finally:
            connections.close_all()

    threading.Thread(target=watch).start()


def test_an_ack_racing_a_cancel_that_moved_the_row_is_a_409_not_a_500(claim):
    job = claim("w1")
    outcome: list[Any] = []

    def ack() -> None:
        try:
            Job.objects.ack(job.id, lease=Lease(attempt=1, worker_id="w1"))
            outcome.append("acked")
        except InvalidTransition as exc:
            outcome.append(exc)
        except Exception as exc:
            outcome.append(exc)
        finally:
            connections.close_all()

    canceller, release = cancelled_and_held(job.id)
    release_once_a_lock_waits(release)  # the ACK waits on the row the cancel holds
    acker = threading.Thread(target=ack)
    acker.start()
    canceller.join(30)
    acker.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], InvalidTransition), outcome
    assert Job.objects.get(seq=job.seq).state == "cancelled"


def test_a_lock_waiting_on_a_row_that_moved_runs_again_and_finds_it_gone(push):
    """``retried``: the first try fails with 40001 ("moved to another partition"), the second
    no longer finds the job among the available ones."""
    from django_ojs.core.row_movement import retried

    job = push(type="a.b", queue="race")
    tries: list[Any] = []
    canceller, release = cancelled_and_held(job.id)

    def lock_available() -> list[int]:
        tries.append(1)
        with transaction.atomic():
            if len(tries) == 1:
                release_once_a_lock_waits(release)  # the lock below waits on the canceller first
            return list(Job.objects.select_for_update().filter(queue="race", state="available")
                        .values_list("seq", flat=True))

    # The snapshot of the statement still sees the job available; its lock finds it moved.
    found = retried(lock_available)
    canceller.join(30)
    assert found == [] and len(tries) == 2


# --------------------------------------------------------------------------------------------
# The online migration


@pytest.fixture
def plain_table() -> Iterator[None]:
    """The job table as one plain table, as before migration 0024; partitioned again after."""
    with transaction.atomic(), connection.schema_editor() as editor:
        partition_migration.unpartition(Job, editor)
    assert not partitions.is_partitioned()
    yield
    if not partitions.is_partitioned():
        with transaction.atomic():
            partition_migration.partition_in_place(Job)
    partition_migration.drop_old()


class Writer(threading.Thread):
    """Pushes, claims, acks and cancels jobs of its own queue on its own connection until told
    to stop; remembers each job's last state it brought about, and its longest wait."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.states: dict[Any, str] = {}
        self.longest = 0.0
        self.operations = 0
        self.errors: list[BaseException] = []
        self.spans: list[tuple[float, float]] = []

    def timed(self, operation: Any) -> Any:
        began = time.monotonic()
        try:
            return operation()
        finally:
            ended = time.monotonic()
            self.longest = max(self.longest, ended - began)
            self.spans.append((began, ended))
            self.operations += 1

    def longest_within(self, start: float, end: float) -> float:
        """The longest operation that overlapped [start, end]."""
        return max((e - b for b, e in self.spans if b <= end and e >= start), default=0.0)

    def run(self) -> None:
        from django_ojs.protocol.envelope import parse_job

        try:
            while not self.stop.is_set():
                pushed = self.timed(lambda: Job.objects.push_many(
                    [parse_job({"type": "mig.job", "args": [], "queue": "mig"}) for _ in range(5)]))
                for job in pushed:
                    self.states[job.id] = "available"
                claimed = self.timed(lambda: Job.objects.fetch(["mig"], count=3, worker_id="writer"))
                for job in claimed:
                    self.timed(lambda job=job: Job.objects.ack(job.id, lease=Lease(attempt=job.attempt)))
                    self.states[job.id] = "completed"
                victim = pushed[-1]
                if self.states[victim.id] == "available":
                    try:
                        self.timed(lambda victim=victim: Job.objects.cancel(victim.id))
                        self.states[victim.id] = "cancelled"
                    except InvalidTransition:
                        pass
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            connections.close_all()


def _row_digest(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT md5(string_agg(t::text, ',' ORDER BY seq)) FROM {table} AS t WHERE queue <> 'mig'")
        return cursor.fetchone()[0]


def migrate_under_load(jobs: int, *, batch_size: int, halves: bool, timed_swap: bool = False) -> dict[str, Any]:
    """Fill, then migrate while a writer works; the figures (the checks are the caller's)."""
    fill(jobs)
    filled = _row_digest("django_ojs_job")
    writer = Writer()
    writer.start()
    began = time.monotonic()
    try:
        if halves:  # the first run stops midway (as if killed); the second resumes
            first = partition_migration.run(Job, batch_size=batch_size, max_batches=max(1, jobs // batch_size // 2))
            assert first.swapped_at is None and 0 < first.copied_through < first.copy_until
        # The second run, its copy and its swap timed apart.
        progress = None if timed_swap else partition_migration.run(Job, batch_size=batch_size)
        if timed_swap:
            while not partition_migration.copy_batch(batch_size).copied_all:
                pass
            swap_began = time.monotonic()
            partition_migration.swap()
            swap_ended = time.monotonic()
        done = progress or partition_migration.progress()
        took = time.monotonic() - began
        time.sleep(0.5)  # the writer works on the partitioned table a moment
    finally:
        writer.stop.set()
        writer.join(60)
    assert not writer.errors, writer.errors
    assert done.swapped_at is not None and partitions.is_partitioned()
    figures = {"took": took, "filled": filled, "writer": writer}
    if timed_swap:
        figures["swap"] = swap_ended - swap_began
        figures["longest_in_swap"] = writer.longest_within(swap_began, swap_ended)
        figures["longest_in_copy"] = writer.longest_within(began, swap_began)
    return figures


def check_migrated(jobs: int, figures: dict[str, Any]) -> None:
    writer: Writer = figures["writer"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT seq), count(DISTINCT id) FROM django_ojs_job")
        total, seqs, ids = cursor.fetchone()
        assert total == seqs == ids == jobs + len(writer.states)
    # Every job the writer did not touch is there as it was, byte for byte.
    assert _row_digest("django_ojs_job") == figures["filled"]
    # Every job the writer touched, in the last state it brought about.
    stored = dict(Job.objects.filter(queue="mig").values_list("id", "state"))
    assert stored == writer.states
    # Finished jobs sit in their day's partition, not the DEFAULT one (the days kept have one).
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_ojs_job_completed_default")
        assert cursor.fetchone()[0] == 0


def check_the_app_works_on_it(push) -> None:
    job = push(type="after.migration", queue="after")
    [claimed] = Job.objects.fetch(["after"], worker_id="w9")
    Job.objects.ack(claimed.id, lease=Lease(attempt=1, worker_id="w9"))
    assert Job.objects.get(id=job.id).state == "completed"
    dead = push(type="after.dead", queue="after", options={"retry": {"max_attempts": 1, "on_exhaustion": "dead_letter"}})
    [claimed] = Job.objects.fetch(["after"], worker_id="w9")
    Job.objects.fail(claimed.id, Failure(type="Boom", message="no", retryable=False))
    assert Job.objects.filter(id=dead.id, state="discarded", dead_letter=True).exists()
    assert job.seq < dead.seq  # numbering goes on past the copied rows


def test_the_online_migration_under_a_concurrent_writer_keeps_every_job_once(plain_table, push, ojs):
    jobs = 20_000
    figures = migrate_under_load(jobs, batch_size=1500, halves=True)
    check_migrated(jobs, figures)
    check_the_app_works_on_it(push)
    # Retention drops the filled days (7 of them) once past it; their error history goes first.
    ojs(RETENTION={**partitions.ojs_settings.RETENTION, "completed": 2 * 86400, "cancelled": 2 * 86400})
    before = Job.objects.filter(state="completed").count()
    pruned = Job.objects.prune(500)
    assert pruned["partitions_dropped"] >= 8
    assert 0 < Job.objects.filter(state="completed").count() < before
    assert partition_migration.drop_old()


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("OJS_MIGRATION_BIG"), reason="set OJS_MIGRATION_BIG=<jobs> to run")
def test_the_online_migration_of_a_big_table(plain_table, push, capsys):
    jobs = int(os.environ["OJS_MIGRATION_BIG"])
    figures = migrate_under_load(jobs, batch_size=int(os.environ.get("OJS_MIGRATION_BATCH", "5000")), halves=True,
                                 timed_swap=True)
    check_migrated(jobs, figures)
    check_the_app_works_on_it(push)
    writer: Writer = figures["writer"]
    with capsys.disabled():
        print(f"\nmigrated {jobs:,} jobs in {figures['took']:.1f} s; the writer ran {writer.operations:,} "
              f"operations meanwhile, the longest took {writer.longest * 1000:.0f} ms; the swap held its lock "
              f"{figures['swap'] * 1000:.0f} ms (longest writer operation across it "
              f"{figures['longest_in_swap'] * 1000:.0f} ms, during the copy {figures['longest_in_copy'] * 1000:.0f} ms)")


def test_a_history_partition_an_operator_holds_never_holds_the_reaper(push, claim, caplog):
    """An operator's VACUUM FULL (here LOCK TABLE) on a day partition of history: the reaper's
    tick ends while the lock is still held -- the lapsed lease requeued, the due job promoted, a
    NACK settled, the prune's steps that need the partition given up after the lock timeout, in
    a line each -- and once the lock goes, the next tick prunes as usual."""
    from django_ojs.reaper import Reaper

    lapsed = claim("w1")
    update(lapsed, lease_expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    due = push(type="a.b", options={"scheduled_at": "2099-01-01T00:00:00Z"})
    update(due, run_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    nacked = claim("w2")
    with connection.cursor() as cursor:
        leaf = next(p.name for p in partitions.day_partitions(cursor) if p.state == "completed" and p.start)
    with pg_session() as holder:
        holder.execute(f"LOCK TABLE {leaf} IN ACCESS EXCLUSIVE MODE")

        def reaper_tick() -> None:
            try:
                Reaper().tick()
                # And a worker's NACK meanwhile: it too writes through the live partition.
                Job.objects.fail(nacked.id, Failure(type="Boom", message="no"))
            finally:
                connection.close()  # this thread's own

        tick = threading.Thread(target=reaper_tick, daemon=True)
        tick.start()
        try:
            wait_until(lambda: not tick.is_alive(), 60, "the reaper's tick to end while the partition is held")
        finally:
            holder.rollback()  # let a tick that waited finish, so the test's database can be flushed
            tick.join(60)
    assert Job.objects.get(id=lapsed.id).state == "available"  # the lease duty ran
    assert Job.objects.get(id=due.id).state == "available"  # and the promotion
    assert Job.objects.get(id=nacked.id).state == "retryable"  # and the NACK
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("could not read the partitions" in line and "next pass" in line for line in warned), warned
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.records  # a line, no traceback
    caplog.clear()
    Reaper().tick()  # the lock gone: the next pass prunes as usual
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")], caplog.records


class Report:
    """A long query on its own connection (an analyst's report, pg_dump): a transaction that has
    read the whole job table and stays open, holding ACCESS SHARE on every partition; or, given
    its ``query``, one that ran that and stays open with what it locked."""

    def __init__(self, query: str = "SELECT count(*) FROM django_ojs_job") -> None:
        self.connection = pg_session()
        self.connection.execute(query)
        self.pid = self.connection.info.backend_pid

    def end(self) -> None:
        self.connection.rollback()
        self.connection.close()


def looked_up_meanwhile(job_id: Any, work: threading.Thread) -> int:
    """Look ``job_id`` up by id (a job's page, ``GET /ojs/v1/jobs/{id}``), over and over, until
    ``work`` ends, each under a statement timeout of 1 s: a statement queued behind a DDL that
    waits longer than that is cancelled, and the test fails. How many lookups ran."""
    lookups = 0
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = '1s'")
    try:
        while work.is_alive():
            Job.objects.get(id=job_id)
            lookups += 1
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET statement_timeout")
    return lookups


def test_retention_s_drop_behind_a_long_query_holds_lookups_a_moment_and_names_the_query(ojs, push, caplog):
    """Retention's DROP of a day partition takes ACCESS EXCLUSIVE on its state's partition and on
    the DEFAULT one, and every lookup by id queues behind it while it waits for a long query. It
    waits ``DDL_LOCK_TIMEOUT`` (a fraction of a second), not seconds, then gives up with a line that
    names the session it waited for; once the query is over, the next pass drops the partition."""
    ojs(RETENTION={**partitions.ojs_settings.RETENTION, "completed": 86400})
    old_day = (dt.datetime.now(dt.UTC) - dt.timedelta(days=5)).date()
    leaf = make_completed_partition(old_day)
    expired = push(type="a.b")
    [claimed] = Job.objects.fetch([expired.queue], worker_id="w1")
    Job.objects.ack(claimed.id)
    finished = dt.datetime.combine(old_day, dt.time(12), dt.UTC)
    update(expired, finished_at=finished, completed_at=finished)  # into the expired day's partition
    job = push(type="a.b")
    report = Report()
    passes: list[dict[str, list[str]]] = []

    def prune_pass() -> None:
        try:
            passes.append(partitions.maintain(dt.datetime.now(dt.UTC)))
        finally:
            connection.close()  # this thread's own

    upkeep = threading.Thread(target=prune_pass, daemon=True)
    try:
        upkeep.start()
        assert looked_up_meanwhile(job.id, upkeep) > 0
    finally:
        report.end()
        upkeep.join(60)
    assert passes and passes[0]["dropped"] == []
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"could not drop {leaf}" in line and f"held by pid {report.pid}" in line
               and "SELECT count(*) FROM django_ojs_job" in line and "\n" not in line for line in warned), warned
    with connection.cursor() as cursor:  # emptied already: the next pass does not walk its jobs again
        cursor.execute(f"SELECT count(*) FROM {leaf}")
        assert cursor.fetchone()[0] == 0
    assert leaf in partitions.maintain(dt.datetime.now(dt.UTC))["dropped"]  # the report over


def pushed_while_behind(report: Report, work: Any, push: Any) -> tuple[list[Any], BaseException | None]:
    """Run ``work`` (a migration step that locks the job table) in a thread while ``report``
    holds the table, and push jobs meanwhile, each under a statement timeout of 1 s: a writer
    queued behind a longer wait fails the test. Then end the report. The jobs pushed (at least
    one), and what ``work`` raised."""
    pushed = []
    worker = Background(work)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = '1s'")
        try:
            while worker.is_alive():
                pushed.append(push(type="a.b"))
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET statement_timeout")
    finally:
        report.end()
        worker.join(60)
    assert pushed
    return pushed, worker.raised


def test_the_swap_behind_a_long_query_holds_writers_a_moment_a_try_and_names_the_query(plain_table, push,
                                                                                      monkeypatch):
    """The online migration's swap locks the job table ACCESS EXCLUSIVE, and every PUSH, claim
    and lookup queues behind it while it waits. Each try waits a moment and lets them through
    before the next; when no try gets the lock, nothing changed, the error names the session it
    waited for, and a run after the query swaps with every job there, those pushed meanwhile too."""
    monkeypatch.setattr(partition_migration, "LOCK_TRIES", (0.2,) * 6)  # short tries, a short test
    monkeypatch.setattr(partition_migration, "LOCK_TRY_PAUSE", 0.1)
    before = [push(type="a.b") for _ in range(3)]
    partition_migration.start(Job)
    while not partition_migration.copy_batch(100).copied_all:
        pass
    report = Report()
    pushed, error = pushed_while_behind(report, partition_migration.swap, push)
    assert isinstance(error, partition_migration.MigrationError)
    assert f"held by pid {report.pid}" in str(error) and "SELECT count(*) FROM django_ojs_job" in str(error)
    assert str(error).count("pid ") == 1, error  # not the writers that queued behind the swap's tries
    assert not partitions.is_partitioned()  # nothing changed
    partition_migration.swap()  # the report over
    assert partitions.is_partitioned()
    ids = {job.id for job in [*before, *pushed]}
    assert set(Job.objects.filter(id__in=ids).values_list("id", flat=True)) == ids


def test_abort_behind_a_long_query_holds_writers_a_moment_a_try_and_says_so(plain_table, push, monkeypatch,
                                                                           caplog):
    """``ojs_partition abort`` (and ``migrate --restart``) drops the mirror trigger, which locks
    the job table as installing it did: behind a long query each try waits a moment, says so in
    a line, and lets the writers through; when none gets the lock the migration is still there,
    and an abort after the query undoes it."""
    monkeypatch.setattr(partition_migration, "LOCK_TRIES", (0.2,) * 4)  # short tries, a short test
    monkeypatch.setattr(partition_migration, "LOCK_TRY_PAUSE", 0.1)
    push(type="a.b")
    partition_migration.start(Job)
    report = Report()
    _, error = pushed_while_behind(report, partition_migration.restart, push)
    assert isinstance(error, partition_migration.MigrationError) and f"held by pid {report.pid}" in str(error)
    tries = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "undo the migration" in r.getMessage()]
    assert len(tries) == 3 and all(f"held by pid {report.pid}" in line for line in tries), tries
    assert partition_migration.progress() is not None  # still there
    report = Report()
    try:
        with pytest.raises(CommandError, match=f"held by pid {report.pid}"):  # the command says it, no traceback
            call_command("ojs_partition", "abort")
        with pytest.raises(CommandError, match=f"held by pid {report.pid}"):
            call_command("ojs_partition", "migrate", "--restart")
    finally:
        report.end()
    partition_migration.restart()  # the report over
    assert partition_migration.progress() is None and not partition_migration._exists(partition_migration.NEXT)


def test_a_copy_batch_behind_a_held_row_lets_go_of_the_rows_it_locked_a_try_and_names_the_holder(
    plain_table, push, monkeypatch, caplog
):
    """A copy batch locks its rows in ``seq`` order; a row another session holds (a transaction
    left open after ``SELECT ... FOR UPDATE``) keeps it waiting with the rows before it locked,
    so an ACK of one of those waited as long as the holder stayed. Each try now waits a moment
    and lets go; when none gets the rows nothing was copied, the error names the holder, and a
    run after it copies the batch."""
    monkeypatch.setattr(partition_migration, "LOCK_TRIES", (0.2,) * 4)  # short tries, a short test
    monkeypatch.setattr(partition_migration, "LOCK_TRY_PAUSE", 0.1)
    jobs = [push(type="a.b", queue="copied") for _ in range(4)]
    claimed = Job.objects.fetch(["copied"], count=3, worker_id="w1")
    assert [job.id for job in claimed] == [job.id for job in jobs[:3]]
    held = jobs[3]
    partition_migration.start(Job)
    report = Report(f"SELECT seq FROM django_ojs_job WHERE id = '{held.id}' FOR UPDATE")
    acked = []

    def ack_meanwhile() -> None:
        # Once the batch waits for the held row with the rows before it locked, ACK those, each
        # under a statement timeout of 1 s: one that waits for the batch longer fails the test.
        with connection.cursor() as cursor:
            wait_until(lambda: a_lock_waits(cursor), 30, "the copy batch to wait on the held row")
            cursor.execute("SET statement_timeout = '1s'")
        try:
            for job in claimed:
                Job.objects.ack(job.id)
                acked.append(job.id)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET statement_timeout")

    copier = Background(lambda: partition_migration.copy_batch(100))
    try:
        ack_meanwhile()
        copier.join(30)
        with pytest.raises(CommandError, match=f"held by pid {report.pid}"):  # the command says it, no traceback
            call_command("ojs_partition", "migrate", "--batch-size", "100")
    finally:
        report.end()
    assert acked == [job.id for job in claimed]
    error = copier.raised
    assert isinstance(error, partition_migration.MigrationError)
    assert f"held by pid {report.pid}" in str(error) and "SELECT seq FROM django_ojs_job" in str(error), error
    tries = [r.getMessage() for r in caplog.records if "copy the next batch" in r.getMessage()]
    assert len(tries) == 3 + 3 and all(f"held by pid {report.pid}" in line for line in tries), tries
    assert partition_migration.progress().copied_through == 0  # nothing copied
    assert partition_migration.copy_batch(100).copied_all  # the holder gone
    partition_migration.swap()
    assert set(Job.objects.filter(queue="copied").values_list("id", "state")) == {
        *((job.id, "completed") for job in claimed), (held.id, "available")}


def test_a_copy_batch_holds_its_batch_size_of_jobs_across_gaps_in_seq(plain_table, push):
    """Seqs have gaps (years of jobs pruned, a sequence that went on): each batch copies the
    next ``batch_size`` jobs, not a fixed width of seqs, which walked the empty ranges one
    transaction (and one ``--pause``) each."""
    first = push(type="a.b")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('django_ojs_job', 'seq'), %s)", [first.seq + 1_000_000])
    rest = [push(type="a.b") for _ in range(3)]
    copied = []
    done = partition_migration.run(Job, batch_size=2, report=lambda progress: copied.append(progress.copied_through))
    assert done.swapped_at is not None
    assert copied == [rest[0].seq, rest[2].seq]  # two batches of two
    ids = {job.id for job in [first, *rest]}
    assert set(Job.objects.values_list("id", flat=True)) == ids


@pytest.mark.parametrize("logging_configured", [True, False])
def test_a_table_too_big_to_partition_in_place_is_left_as_it_is_and_said_once(
    plain_table, push, monkeypatch, capsys, caplog, logging_configured
):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("django_ojs.migrations.0024_partitioned_job_history")
    monkeypatch.setattr(migration, "INLINE_LIMIT", 0)  # one job is over it
    if not logging_configured:  # pytest's own log capture is a handler: as a project without LOGGING
        monkeypatch.setattr(migration.logger, "hasHandlers", lambda: False)
    push(type="a.b")
    with connection.schema_editor() as editor:
        migration.partition(apps, editor)
    assert not partitions.is_partitioned()
    printed = capsys.readouterr()
    logged = [record.getMessage() for record in caplog.records]
    said = [*printed.out.splitlines(), *printed.err.splitlines(), *logged]
    assert len([line for line in said if "left unpartitioned" in line]) == 1, said
    assert any("ojs_partition migrate" in line for line in (logged if logging_configured else [printed.out]))


def test_migrating_back_to_0023_makes_one_plain_table_with_every_job_and_forward_again(push, claim):
    waiting, running = push(type="a.b"), claim("w1")
    Job.objects.ack(running.id)
    JobError.objects.create(job_id=running.seq, attempt=1, type="Boom", occurred_at=dt.datetime.now(dt.UTC))
    try:
        call_command("migrate", "django_ojs", "0023", verbosity=0)
        assert not partitions.is_partitioned()
        with connection.cursor() as cursor:  # the foreign key is back, so its referent is unique again
            cursor.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = 'django_ojs_joberror'::regclass "
                           "AND contype = 'f'")
            assert cursor.fetchone()[0] == 1
            cursor.execute("SELECT state FROM django_ojs_job ORDER BY seq")
            assert [row[0] for row in cursor.fetchall()] == ["available", "completed"]
    finally:
        call_command("migrate", "django_ojs", verbosity=0)
    assert partitions.is_partitioned()
    assert Job.objects.get(id=waiting.id).state == "available"
    assert Job.objects.get(id=running.id).errors.count() == 1
    newer = push(type="a.b")
    assert newer.seq > running.seq


def test_a_new_partition_width_fills_the_days_between_and_never_overlaps_the_partitions_made_before(ojs, caplog):
    month = 30 * 86400
    ojs(HISTORY_PARTITION_DAYS=7, RETENTION={**partitions.ojs_settings.RETENTION, "completed": month,
                                             "cancelled": month, "discarded": month})
    now = dt.datetime.now(dt.UTC)
    today = now.date()
    made = partitions.maintain(now)["created"]  # today's one-day partitions stand; the rest of the week gets its own
    later = now + dt.timedelta(days=10)
    made += partitions.maintain(later)["created"]  # clear of them: the new width's
    try:
        assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.records
        with connection.cursor() as cursor:
            spans = [(p.state, p.start, p.end) for p in partitions.day_partitions(cursor) if p.start]
        for state in partitions.TERMINAL_STATES:
            mine = sorted((start, end) for s, start, end in spans if s == state)
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(mine)), mine
            # No day from today to the partitions of the new width falls to the DEFAULT partition.
            [(first_new, _)] = [(start, end) for start, end in mine if start <= later.date() < end]
            days = (first_new - today).days
            for day in (today + dt.timedelta(days=n) for n in range(days)):
                assert any(start <= day < end for start, end in mine), (state, day, mine)
            [(start, end)] = [(start, end) for start, end in mine if start <= later.date() < end]
            assert end - start == dt.timedelta(days=partitions.width_days(state))  # 7; discarded 30
        assert partitions.maintain(now)["created"] == []  # nothing left to fill: a second pass makes nothing
    finally:
        with connection.cursor() as cursor:
            for name in made:
                cursor.execute(f"DROP TABLE {name}")
