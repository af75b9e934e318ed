"""The hot statements read their partial index, whatever the size of the backlog.

A regression guard on the query plans (PostgreSQL): with tens of thousands of
rows and fresh statistics, the claim must walk ``ojs_job_available`` in order
and stop at its LIMIT -- no sort, no scan of the backlog. (A correlated
"queue not paused" subquery once turned the claim into an anti-join that
read and sorted every available job: 0.9 s per FETCH at a million.)
"""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_ojs.core import history, queue_settings
from django_ojs.core.clock import db_now
from django_ojs.models import Job, Queue, StatsBucket
from tests.helpers import history_running_since, live_index

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BACKLOG = 30_000


def fill(state: str, count: int, *, queue: str = "plans", analyze: bool = True, **columns: str) -> None:
    extra = "".join(f", {name}" for name in columns)
    values = "".join(f", {value}" for value in columns.values())
    # A fair queue's jobs (a fair_key given) carry their value where the key meta.tenant reads it.
    meta = f"jsonb_build_object('tenant', {columns['fair_key']})" if "fair_key" in columns else "'{}'"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Job._meta.db_table} (id, type, queue, args, meta, priority, state, attempt,
                    max_attempts, releases, retry, visibility_timeout, tags, schema, extra, given_times,
                    created_at, dead_letter{extra})
                SELECT gen_random_uuid(), 'plan.job', %s, '[]', {meta}, g %% 3, %s, 0, 3, 0, '{{}}',
                    interval '30 minutes', '[]', '', '{{}}', '{{}}', now(), false{values}
                FROM generate_series(1, %s) AS g""",
            [queue, state, count],
        )
        if analyze:
            cursor.execute(f"ANALYZE {Job._meta.db_table}")


def plan_of(statement: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN " + statement)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("ROLLBACK")


def seq_scans(plan: str, of: str = "") -> list[str]:
    """The plan's sequential scans of tables (named ``of``...) with rows. On the partitioned job
    table (core/partitions.py) an empty day partition is scanned for free (``cost=0.00..0.00``):
    no backlog is read there."""
    return [line for line in plan.splitlines() if f"Seq Scan on {of}" in line and "(cost=0.00..0.00 " not in line]


def captured(operation, marker: str) -> str:
    with CaptureQueriesContext(connection) as queries:
        operation()
    return next(q["sql"] for q in queries.captured_queries if marker in q["sql"])


def test_the_claim_walks_the_available_index_and_stops_at_its_limit():
    fill("available", BACKLOG)
    fill("completed", BACKLOG, finished_at="now()")
    statement = captured(lambda: Job.objects.fetch(["plans"], count=10), "FOR UPDATE SKIP LOCKED")
    plan = plan_of(statement)
    assert "ojs_job_available" in plan, plan
    assert "Sort" not in plan and not seq_scans(plan, "django_ojs_job"), plan


def test_a_claim_of_the_workers_types_walks_the_available_index_and_stops_at_its_limit():
    """An in-process worker claims only its handlers' types: a filter on the index's rows,
    in the index's order, not a sort of the backlog (with 30,000 jobs of a type nobody runs
    ahead of them: about 3 ms to step over, measured with EXPLAIN ANALYZE)."""
    fill("available", BACKLOG)
    fill("completed", BACKLOG, finished_at="now()")
    Job.objects.filter(seq__in=Job.objects.filter(state="available").order_by("seq")[:10]).update(type="mine")
    statement = captured(lambda: Job.objects.fetch(["plans"], count=10, types=["mine"]), "FOR UPDATE SKIP LOCKED")
    plan = plan_of(statement)
    assert "ojs_job_available" in plan, plan
    assert "Sort" not in plan and not seq_scans(plan, "django_ojs_job"), plan


def test_a_stepwise_claim_of_the_workers_types_walks_the_available_index_too():
    """A queue with a concurrency limit is claimed stepwise (core/claim.claim_from): the same filter."""
    from django_ojs.core import queue_config

    fill("available", BACKLOG)
    fill("completed", BACKLOG, finished_at="now()")
    queue_config.update("plans", {"concurrency": 100})
    Job.objects.filter(seq__in=Job.objects.filter(state="available").order_by("seq")[:10]).update(type="mine")
    statement = captured(lambda: Job.objects.fetch(["plans"], count=10, types=["mine"]), "FOR UPDATE SKIP LOCKED")
    plan = plan_of(statement)
    assert "ojs_job_available" in plan, plan
    assert "ojs_job_type" not in plan and not seq_scans(plan, "django_ojs_job"), plan


def test_the_claim_stays_on_its_index_when_the_statistics_are_stale():
    """A queue whose backlog grew since the last ANALYZE (statistics say it is
    empty) must not be claimed by sorting the whole backlog: until autovacuum
    catches up, every FETCH would pay for it."""
    fill("available", BACKLOG, queue="elsewhere")
    fill("completed", BACKLOG, queue="elsewhere", finished_at="now()")
    with connection.cursor() as cursor:  # emptied since: the statistics still describe "elsewhere"
        cursor.execute(f"TRUNCATE {Job._meta.db_table} CASCADE")
    fill("available", BACKLOG, analyze=False)
    statement = captured(lambda: Job.objects.fetch(["plans"], count=10), "FOR UPDATE SKIP LOCKED")
    plan = plan_of(statement)
    assert "ojs_job_available" in plan, plan
    assert "Sort" not in plan, plan


@pytest.mark.parametrize(
    ("state", "column", "operation", "index"),
    [
        ("scheduled", "run_at", lambda: Job.objects.promote_due(100), "ojs_job_due"),
        ("active", "lease_expires_at", lambda: Job.objects.requeue_lapsed(100), "ojs_job_lease"),
        ("active", "deadline_at", lambda: Job.objects.fail_timed_out(100), "ojs_job_deadline"),
    ],
)
def test_the_reapers_scans_read_their_partial_index(state, column, operation, index):
    # Far in the future: nothing is due, so the scan must end at once.
    fill(state, BACKLOG, **{column: "now() + interval '1 day'"})
    statement = captured(operation, "SKIP LOCKED")
    plan = plan_of(statement)
    assert index in plan, plan
    assert not seq_scans(plan, "django_ojs_job"), plan


def test_a_unique_push_finds_the_holder_through_the_unique_index():
    from django_ojs.core.unique_keys import holds_key

    # A long history of jobs that once held keys, all of them released.
    fill("completed", BACKLOG, finished_at="now()", unique_key="md5(g::text)", unique_states="',available,'")
    sql, params = Job.objects.filter(holds_key(), unique_key="a" * 64).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "ojs_job_unique_key" in plan, plan
    assert not seq_scans(plan), plan


def settling_lock_plan(ids: list, *, attempt: int) -> str:
    """The plan of settle_many's lock (the stepwise turn's, with its state check) for these jobs of w1."""
    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Worker

    Worker.objects.register("w1")
    batch = [Settlement(job_id, Lease("w1", attempt)) for job_id in ids]
    return plan_of(captured(lambda: Job.objects.settle_many(batch), "FOR UPDATE"))


def test_the_worker_turn_locks_its_finished_jobs_by_id_not_by_owner():
    """settle_many's lock reads the unique index on ``id``: never the owner's partial index,
    whose dead entries (every job the worker finished since the last vacuum) it would walk."""
    fill("active", BACKLOG, worker_id="'w1'", started_at="now()", lease_expires_at="now() + interval '1 hour'")
    plan = settling_lock_plan(list(Job.objects.filter(queue="plans").values_list("id", flat=True)[:10]), attempt=0)
    assert f"{Job._meta.db_table}_id_key" in plan, plan
    assert "ojs_job_owner" not in plan and not seq_scans(plan, "django_ojs_job"), plan


def test_the_worker_turn_locks_by_id_when_the_statistics_predate_the_work():
    """A backlog enqueued and analysed, then worked: the statistics say nearly no job is
    active or finished, so every partial index a state condition would let the planner
    use looks empty. The lock must still probe ``id``'s unique index; with a state
    condition in its WHERE clause it walked ``ojs_job_queue_state`` -- every finished
    job -- on every turn (2.3 ms for 10 jobs at ten thousand, growing with the table)."""
    fill("available", BACKLOG)  # analysed: all available
    with connection.cursor() as cursor:  # then worked, with no ANALYZE since
        cursor.execute(f"UPDATE {Job._meta.db_table} SET state = 'completed', finished_at = now() "
                       f"WHERE seq IN (SELECT seq FROM {Job._meta.db_table} ORDER BY seq LIMIT {BACKLOG - 100})")
        cursor.execute(f"UPDATE {Job._meta.db_table} SET state = 'active', worker_id = 'w1', attempt = 1, "
                       "started_at = now(), lease_expires_at = now() + interval '1 hour' WHERE state = 'available'")
    ids = list(Job.objects.filter(state="active").values_list("id", flat=True)[:10])
    plan = settling_lock_plan(ids, attempt=1)
    assert f"{Job._meta.db_table}_id_key" in plan, plan
    for partial in ("ojs_job_queue_state", "ojs_job_owner", "ojs_job_lease"):
        assert partial not in plan, plan
    assert Job.objects.filter(id__in=ids, state="completed").count() == 10


def finished_but_for(state: str, left: int) -> None:
    """A backlog analysed while all available, then all but ``left`` jobs moved to ``state``."""
    fill("available", BACKLOG)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Job._meta.db_table} SET state = %s, finished_at = now(), dead_letter = true "
                       f"WHERE seq IN (SELECT seq FROM {Job._meta.db_table} ORDER BY seq LIMIT %s)",
                       [state, BACKLOG - left])


def test_an_operators_move_of_one_job_reads_its_row_by_key_when_the_statistics_predate_the_work():
    """Retry from the dead letter (and every one-job move through ``_move``): the row by ``id``,
    never a walk of ``ojs_job_queue_state``, which held every finished job."""
    finished_but_for("discarded", 10)
    job = Job.objects.filter(state="discarded").first()
    with CaptureQueriesContext(connection) as queries:
        Job.objects.resurrect(job.id)
    statements = [q["sql"] for q in queries.captured_queries if "django_ojs_job" in q["sql"]
                  and q["sql"].startswith(("SELECT", "UPDATE"))]
    for statement in statements[:2]:  # the lock, the move
        plan = plan_of(statement)
        assert not any(index in plan for index in STATE_INDEXES), plan
    assert reload_state(job) == "available"


def test_the_dead_letter_reads_and_purges_one_job_by_key_when_the_statistics_predate_the_work(api):
    finished_but_for("discarded", 10)
    job = Job.objects.filter(state="discarded").first()
    read = plan_of(captured(lambda: api.get(f"/ojs/v1/dead-letter/{job.id}"), "django_ojs_job"))
    purge = plan_of(captured(lambda: Job.objects.purge_dead(job.id), "FOR UPDATE"))
    for plan in (read, purge):
        assert f"{Job._meta.db_table}_id_key" in plan and not any(index in plan for index in STATE_INDEXES), plan
    assert not Job.objects.filter(seq=job.seq).exists()


def test_a_bulk_move_locks_its_batches_by_key_when_the_statistics_predate_the_work():
    from django_ojs.core.bulk import bulk_move

    finished_but_for("discarded", 10)
    report = None

    def move():
        nonlocal report
        report = bulk_move(Job.objects.filter(state="discarded"), "retry", batch_size=100, limit=100)

    plan = plan_of(captured(move, "FOR UPDATE"))
    assert "django_ojs_job_pkey" in plan and not any(index in plan for index in STATE_INDEXES), plan
    assert report.moved == 100


def test_a_heartbeat_and_a_progress_report_find_their_jobs_by_key_when_the_statistics_predate_the_work():
    """A heartbeat that walks every finished job is a heartbeat late at scale: its worker is declared dead."""
    from django_ojs.core.progress import report_progress
    from django_ojs.core.types import HeldJob
    from django_ojs.models import Worker
    from django_ojs.protocol.progress import Report

    finished_but_for("completed", 10)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Job._meta.db_table} SET state = 'active', worker_id = 'w1', attempt = 1, "
                       "started_at = now(), lease_expires_at = now() + interval '1 hour' WHERE state = 'available'")
    Worker.objects.register("w1")
    held = [HeldJob(str(job_id), 1) for job_id in Job.objects.filter(state="active").values_list("id", flat=True)]
    beat = plan_of(captured(lambda: Worker.objects.beat("w1", held=held), "SKIP LOCKED"))
    assert f"{Job._meta.db_table}_id_key" in beat and not any(index in beat for index in STATE_INDEXES), beat
    halfway = Report(progress=0.5)
    progress = plan_of(captured(lambda: report_progress(held[0].job_id, halfway, attempt=1, worker_id="w1"), "SKIP LOCKED"))
    assert f"{Job._meta.db_table}_id_key" in progress and not any(index in progress for index in STATE_INDEXES), progress


def reload_state(job) -> str:
    return Job.objects.filter(seq=job.seq).values_list("state", flat=True).get()


# --- The prepared statements' generic plans (core/prepared.py: planned once per session, for any values).


def generic_plan(marker: str) -> str:
    """The plan the session's prepared statement containing ``marker`` runs with, for any parameters."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
        name, parameters, generic, custom, _ = prepared_statement(marker)
        assert generic > 0 and custom == 0, (generic, custom)
        cursor.execute(f"EXPLAIN EXECUTE {name}({', '.join(['NULL'] * parameters)})")
        return "\n".join(row[0] for row in cursor.fetchall())


def prepared_statement(marker: str) -> tuple:
    """The session's prepared statement containing ``marker``: its name, its number of parameters,
    how often it ran a generic and a custom plan, and when it was prepared."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, cardinality(parameter_types), generic_plans, custom_plans, prepare_time "
            "FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{marker}%"],
        )
        [statement] = cursor.fetchall()
        return statement


def stale_backlog() -> None:
    """A backlog enqueued and analysed, then mostly worked with no ANALYZE since: every partial
    index of states but the available one looks empty to the planner."""
    fill("available", BACKLOG)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Job._meta.db_table} SET state = 'completed', finished_at = now() "
                       f"WHERE seq IN (SELECT seq FROM {Job._meta.db_table} ORDER BY seq LIMIT {BACKLOG // 2})")


KEYED = (f"{Job._meta.db_table}_id_key", f"{Job._meta.db_table}_pkey")
STATE_INDEXES = ("ojs_job_queue_state", "ojs_job_owner", "ojs_job_lease", "ojs_job_finished")


def test_the_worker_turn_plans_once_and_reads_every_row_by_its_key(push):
    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Worker

    stale_backlog()
    Worker.objects.register("w1")
    for _ in range(3):
        running = Job.objects.fetch(["plans"], count=10, worker_id="w1")
        Job.objects.settle_and_fetch("w1", [Settlement(job.id, Lease("w1", job.attempt)) for job in running],
                                     ["plans"], 10)
    plan = generic_plan("locked AS MATERIALIZED")
    assert "ojs_job_available" in plan and all(index in plan for index in KEYED), plan
    assert not any(index in plan for index in STATE_INDEXES), plan
    assert not seq_scans(plan, "django_ojs_job") and "Sort Key: django_ojs_job" not in plan, plan


@pytest.fixture
def no_autovacuum():
    """The job table's leaves left alone by autovacuum for the test, so their statistics stay the
    ones the test made: an ANALYZE it runs while a backlog is being written counts the pages but
    not the rows yet, and the plans made after it are sized by that (CI's busy database)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relid::regclass::text FROM pg_partition_tree(%s::regclass) WHERE isleaf",
                       [Job._meta.db_table])
        leaves = [row[0] for row in cursor.fetchall()]
        for leaf in leaves:
            cursor.execute(f"ALTER TABLE {leaf} SET (autovacuum_enabled = false)")
    yield
    with connection.cursor() as cursor:
        for leaf in leaves:
            cursor.execute(f"ALTER TABLE {leaf} RESET (autovacuum_enabled)")


def test_a_session_plans_again_so_a_plan_made_on_a_small_table_does_not_outlive_its_growth(
    push, monkeypatch, no_autovacuum
):
    """A generic plan is sized by the table's pages when it is made: a worker that starts on a
    near-empty table plans sequential scans for its key lookups, which would read the whole table
    once a backlog arrives. Sessions plan again every ``REPLAN_SECONDS``.

    PostgreSQL also plans a cached statement again whenever something invalidates its plan: an
    ANALYZE of a table it reads, or other databases' catalog changes outrunning a session busy in
    one statement (a shared server), which resets all its plans. No test can prevent that, so this
    one never counts on a plan outliving the backlog's arrival: it reads the small table's plan
    before the backlog comes, and checks that the turn's statement after it was prepared anew,
    which only the session's replanning does (a plan PostgreSQL makes again keeps its statement's
    ``prepare_time``)."""
    from django_ojs.core.pg import prepared
    from django_ojs.core.types import Lease, Settlement
    from django_ojs.models import Worker

    connection.close()  # a fresh session
    Worker.objects.register("w1")

    def turn() -> None:
        running = Job.objects.fetch(["plans"], count=2, worker_id="w1")
        Job.objects.settle_and_fetch("w1", [Settlement(job.id, Lease("w1", job.attempt)) for job in running],
                                     ["plans"], 2)

    push(options={"queue": "plans"})
    push(options={"queue": "plans"})
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")  # whatever the tests before left in its statistics
    turn()  # planned while the table has a handful of rows
    plan = generic_plan("locked AS MATERIALIZED")  # planned again or not, for the same small table
    assert seq_scans(plan, "django_ojs_job"), plan
    fill("available", BACKLOG, analyze=False)  # then a backlog, before autovacuum looks
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        [[grown_at]] = cursor.fetchall()
    monkeypatch.setattr(prepared, "REPLAN_SECONDS", 0.0)
    turn()
    *_, prepared_at = prepared_statement("locked AS MATERIALIZED")  # prepared anew, not just planned again
    assert prepared_at > grown_at, (prepared_at, grown_at)
    plan = generic_plan("locked AS MATERIALIZED")
    assert not seq_scans(plan, "django_ojs_job") and all(index in plan for index in KEYED), plan
    connection.close()


def test_fetch_and_ack_plan_once_on_their_indexes(push):
    from django_ojs.core.types import Lease

    stale_backlog()
    for _ in range(2):
        [job] = Job.objects.fetch(["plans"], count=1, worker_id="w1")
        Job.objects.ack(job.id, lease=Lease("w1", 1))
    claim = generic_plan("candidates AS MATERIALIZED")
    assert "ojs_job_available" in claim and f"{Job._meta.db_table}_pkey" in claim, claim
    assert not seq_scans(claim, "django_ojs_job") and "Sort" not in claim, claim
    ack = generic_plan("WITH acked AS")
    assert f"{Job._meta.db_table}_id_key" in ack and not any(index in ack for index in STATE_INDEXES), ack


def test_the_probe_of_other_queues_plans_once_on_the_available_index(push):
    stale_backlog()
    Job.objects.fetch(["plans"], count=1)  # the session's first prepared statement outside a transaction
    for _ in range(2):
        Job.objects.fetch(["empty-1", "empty-2", "plans"], count=1)
    plan = generic_plan("WITH ORDINALITY")
    assert "ojs_job_available" in plan and not seq_scans(plan, "django_ojs_job"), plan


# --- The event table's readers, each on its index (migration 0012 dropped the one on time).


def fill_events(count: int, *, days_ago: float = 0) -> None:
    from django_ojs.models import Event

    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Event._meta.db_table} (id, type, time, job_id, queue, data)
                SELECT gen_random_uuid(), 'job.completed', now() - make_interval(days => %s) + g * interval '1 ms',
                    gen_random_uuid(), 'plans', '{{}}'
                FROM generate_series(1, %s) AS g""",
            [days_ago, count],
        )
        cursor.execute(f"ANALYZE {Event._meta.db_table}")


def test_pruning_events_reads_the_oldest_along_the_primary_key():
    """Without an index on time: a bounded walk of the primary key, whether or not anything is stale."""
    fill_events(BACKLOG, days_ago=30)
    fill_events(BACKLOG)
    statement = captured(lambda: Job.objects.prune(100), 'DELETE FROM "django_ojs_event"')
    plan = plan_of(statement)
    assert "django_ojs_event_pkey" in plan, plan
    assert not seq_scans(plan) and "Sort" not in plan, plan


def test_a_jobs_story_and_the_event_feed_read_their_indexes(api):
    from django_ojs.admin.job_pages import event_history
    from django_ojs.models import Event

    fill_events(BACKLOG)
    job_id = Event.objects.values_list("job_id", flat=True).first()
    job = Job(id=job_id)
    story = plan_of(captured(lambda: event_history(job, now=timezone.now()), "django_ojs_event"))
    assert "ojs_event_job" in story and not seq_scans(story), story
    feed = plan_of(captured(lambda: api.get("/ojs/v1/events?after=1&limit=10"), "django_ojs_event"))
    assert "django_ojs_event_pkey" in feed and not seq_scans(feed) and "Sort" not in feed, feed


def test_pruning_events_of_no_job_and_of_jobs_gone_reads_their_indexes():
    """A job's events go with the job; the rest are found on ojs_event_no_job, and the orphans of the oldest
    window are told from kept jobs' events by a probe of the job's id, not a scan of the job table."""
    from django_ojs.models import Event

    fill("completed", BACKLOG, finished_at="now()")
    fill_events(BACKLOG, days_ago=30)
    with connection.cursor() as cursor:  # a worker's events, of no job
        cursor.execute(f"UPDATE {Event._meta.db_table} SET job_id = NULL WHERE seq % 10 = 0")
        cursor.execute(f"ANALYZE {Event._meta.db_table}")
    with CaptureQueriesContext(connection) as queries:
        Job.objects.prune(100)
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "django_ojs_event"')]
    no_job, orphans = (plan_of(sql) for sql in deletes[-2:])
    assert "ojs_event_no_job" in no_job and not seq_scans(no_job), no_job
    assert "django_ojs_event_pkey" in orphans and not seq_scans(orphans), orphans


def test_the_dead_letter_lists_and_counts_from_its_own_index(api):
    """Plain discards by the hundred thousand do not slow the dead letter: it reads ojs_job_dead_letter."""
    fill("discarded", BACKLOG, finished_at="now()")
    fill("discarded", 300, queue="kept", finished_at="now()")
    Job.objects.filter(queue="kept").update(dead_letter=True)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    listed = plan_of(captured(lambda: api.get("/ojs/v1/dead-letter?limit=20"), '"finished_at" DESC'))
    assert "ojs_job_dead_letter" in listed and not seq_scans(listed), listed
    assert api.get("/ojs/v1/dead-letter/stats").json()["total"] == 300
def test_one_queues_history_reads_its_own_buckets_through_their_index():
    """30 days of hours and two days of minutes for 20 queues: a read for one queue takes its own
    buckets by ``ojs_stats_bucket_queue``, not every queue's over the range."""
    now = db_now()
    history_running_since(now - dt.timedelta(days=31))
    queues = [f"queue-{index:02}" for index in range(20)]
    with connection.cursor() as cursor:
        for span, step, count in (("hour", "1 hour", 30 * 24), ("minute", "1 minute", 2 * 24 * 60)):
            cursor.execute(
                f"""INSERT INTO {StatsBucket._meta.db_table} (span, start, queue, transition, count)
                    SELECT %s, date_trunc('hour', now()) - g * %s::interval, q, t, 1
                    FROM generate_series(1, %s) g, unnest(%s::text[]) q,
                         unnest(array['enqueued', 'completed', 'discarded']) t""",
                [span, step, count, queues],
            )
        cursor.execute(f"ANALYZE {StatsBucket._meta.db_table}")
    for period, days in (("1h", 30), ("1m", 1)):
        since = now - dt.timedelta(days=days)
        statement = captured(lambda period=period, since=since: history.series(period, since, now, now, "queue-07"),
                             'FROM "django_ojs_statsbucket"')
        plan = plan_of(statement)
        assert "ojs_stats_bucket_queue" in plan and not seq_scans(plan), (period, plan)


def nodes_of(node: dict) -> list[dict]:
    return [node] + [below for child in node.get("Plans", []) for below in nodes_of(child)]


def sorts_of_job_rows(node: dict) -> list[dict]:
    """The Sort nodes of a JSON plan with a scan of the job table beneath them (CTE scans stop the search)."""
    def scans_jobs(below: dict) -> bool:
        return below.get("Relation Name", "").startswith(Job._meta.db_table) or any(
            scans_jobs(child) for child in below.get("Plans", []) if child.get("Parent Relationship") != "InitPlan")

    found = [node] if node["Node Type"] == "Sort" and scans_jobs(node) else []
    return found + [sort for child in node.get("Plans", []) for sort in sorts_of_job_rows(child)]


def test_the_one_statement_fair_claim_reads_the_fair_index_and_no_backlog(settings):
    """tests/core/pg/test_query_plans.py's guard, for pg/fair_claim.py: the values waiting by a skip
    scan of ojs_job_fair, each value's share from it; no other index of jobs, no sort of job rows."""
    settings.OJS = {**getattr(settings, "OJS", {}), "ONE_STATEMENT_PATHS": True}
    two_tenants = "CASE WHEN g <= 100 THEN 'small' ELSE 'big' END"
    fill("available", BACKLOG, fair_key=two_tenants)
    fill("completed", BACKLOG, finished_at="now()", fair_key=two_tenants)
    Queue.objects.update_or_create(name="plans", defaults={"fairness_key": "meta.tenant"})
    queue_settings.forget()
    Job.objects.fetch(["plans"], count=10)  # the queue's settings and maintenance mode read, and cached
    with CaptureQueriesContext(connection) as queries:
        Job.objects.fetch(["plans"], count=10)
    statements = [query["sql"] for query in queries.captured_queries]
    assert len(statements) == 1 and "RECURSIVE" in statements[0], statements
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN (FORMAT JSON) " + statements[0])
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("ROLLBACK")
    plan = plan if isinstance(plan, list) else json.loads(plan)
    text = json.dumps(plan)
    indexes = {index for index in re.findall(r'"Index Name": "([a-z_0-9]+)"', text)}
    job_indexes = {index for index in indexes if index.startswith(("ojs_job", "django_ojs_job"))}
    # ojs_job_fair for the values and the shares; the primary key for the UPDATE of the rows locked.
    assert job_indexes == {live_index("ojs_job_fair"), live_index("django_ojs_job_pkey")}, indexes
    assert not [node for node in nodes_of(plan[0]["Plan"])
                if node["Node Type"] == "Seq Scan" and node.get("Relation Name", "").startswith(Job._meta.db_table)], text
    assert not sorts_of_job_rows(plan[0]["Plan"]), text


def rows_read(statement: str) -> int:
    """The most rows any node of ``statement``'s plan produced, run (EXPLAIN ANALYZE), over all its loops."""
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN (ANALYZE, TIMING OFF) " + statement)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("ROLLBACK")
    return max((int(rows) * int(loops) for rows, loops in re.findall(r"actual rows=(\d+) loops=(\d+)", plan)), default=0)


def test_the_queues_nobody_reads_are_found_by_a_probe_per_queue_not_a_read_of_every_waiting_job():
    """Which queues have available jobs (for "no live worker reads it"): one probe of ojs_job_available
    per queue. Asked per queue row, the planner grouped every available job instead (0.1 s at 180,000)."""
    from django_ojs.core import coverage

    for queue in ("unread-a", "unread-b"):
        fill("available", BACKLOG, queue=queue)
        Queue.objects.get_or_create(name=queue)
    with CaptureQueriesContext(connection) as queries:
        assert coverage.unread() == ["unread-a", "unread-b"]
    reads = {q["sql"]: rows_read(q["sql"]) for q in queries.captured_queries if Job._meta.db_table in q["sql"]}
    assert reads and max(reads.values()) < 100, reads


def test_the_jobs_no_worker_can_run_start_from_the_oldest_available_job_found_by_a_walk_of_the_live_partition():
    """Where the unhandled types' backlog begins: on the partitioned table, the live partition's primary
    key from its first row, not every available job's entry (seq + 0 read them all: 50 to 100 ms at 180,000)."""
    from django_ojs.core import coverage, partitions

    if not partitions.is_partitioned():
        pytest.skip("the job table is not partitioned")
    fill("available", BACKLOG)
    with CaptureQueriesContext(connection) as queries:
        found, complete = coverage.uncovered({"plans": ["another.type"]})
    assert complete and [(item.type, item.count) for item in found] == [("plan.job", BACKLOG)]
    [oldest] = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('SELECT MIN(')]
    assert rows_read(oldest) < 100, plan_of(oldest)
