"""The admin's job list sorted by priority, or narrowed to a creation time range, reads an index on
each history partition and never sorts one (core/partitions.py ``HISTORY_INDEXES``); migration
0025 builds those indexes online, and the reaper's new day partitions carry them.

A page of such a list is a merge of every partition's rows in the list's order: a day partition
that had to be sorted would be read whole, which at ten million finished jobs took seconds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from django.core.management import call_command
from django.db import connection

from django_ojs.core import partitions
from django_ojs.models import Job
from tests.core.pg.test_query_plans import captured, plan_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ADMIN_JOBS = "/ojs/v1/admin/jobs"
DAYS = 4
PER_DAY = 10_000


def history_days() -> Iterator[dt.date]:
    """The day partitions of the last ``DAYS`` days, made as a reaper running all along would have."""
    now = dt.datetime.now(dt.UTC)
    for back in range(DAYS, -1, -1):
        partitions.maintain(now - dt.timedelta(days=back))
    return (now.date() - dt.timedelta(days=back) for back in range(DAYS, -1, -1))


@pytest.fixture
def history() -> None:
    """``PER_DAY`` completed jobs finished on each of the last ``DAYS`` days (a minute after they were
    made; one in ten was scheduled), in their day partitions, and a few thousand waiting ones;
    vacuumed, statistics fresh."""
    list(history_days())
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Job._meta.db_table} (id, type, queue, args, meta, priority, state, attempt,
                    max_attempts, releases, retry, visibility_timeout, tags, schema, extra, given_times,
                    created_at, finished_at, completed_at, scheduled_at, dead_letter)
                SELECT gen_random_uuid(), 'plan.job', 'plans', '[]', '{{}}', (g %% 4) * 5 - 5, state, 1, 3, 0,
                    '{{}}', interval '30 minutes', '[]', '', '{{}}', '{{}}', made,
                    CASE WHEN state = 'completed' THEN made + interval '1 minute' END,
                    CASE WHEN state = 'completed' THEN made + interval '1 minute' END,
                    CASE WHEN g %% 10 = 0 THEN made END, false
                FROM (SELECT g, now() - interval '2 minutes' - (%s - g) * interval '1 day' / %s AS made,
                             CASE WHEN g > %s THEN 'available' ELSE 'completed' END AS state
                      FROM generate_series(1, %s) AS g) AS rows""",
            [DAYS * PER_DAY, PER_DAY, DAYS * PER_DAY - 3_000, DAYS * PER_DAY],
        )
        # As autovacuum leaves a day's partition once its jobs are in: its pages all visible.
        cursor.execute(f"VACUUM ANALYZE {Job._meta.db_table}")


def sorted_tables(plan: str) -> list[str]:
    """The tables whose rows a Sort node of the plan sorts (the scan right under it)."""
    lines = plan.splitlines()
    found = []
    for at, line in enumerate(lines):
        if "->  Sort " not in line and not line.lstrip().startswith("Sort "):
            continue
        scan = next(below for below in lines[at + 1:] if " on " in below and "Scan" in below)
        found.append(scan.split(" on ", 1)[1].split()[0])
    return found


def list_plan(api, query: str) -> str:
    return plan_of(captured(lambda: api.get(f"{ADMIN_JOBS}?{query}"), "AS \"error_type\""))


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_the_list_by_priority_reads_each_day_in_order_from_its_index(api, history, order):
    plan = list_plan(api, f"sort=priority&order={order}")
    assert "ojs_job_priority_completed_" in plan, plan
    # Only the live partition (waiting jobs, no such index: its PUSH and claims would pay) is sorted.
    assert set(sorted_tables(plan)) <= {partitions.LIVE}, plan
    rows = api.get(f"{ADMIN_JOBS}?sort=priority&order={order}&per_page=100").json()["items"]
    priorities = [row["priority"] for row in rows]
    assert priorities == sorted(priorities, reverse=order == "desc")
    assert priorities[0] == (10 if order == "desc" else -5)


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_the_list_by_schedule_reads_the_scheduled_jobs_of_each_day_from_its_index(api, history, order):
    plan = list_plan(api, f"sort=scheduled_at&order={order}")  # the first part: jobs with a schedule
    assert "ojs_job_scheduled_completed_" in plan, plan
    assert set(sorted_tables(plan)) <= {partitions.LIVE}, plan
    rows = api.get(f"{ADMIN_JOBS}?sort=scheduled_at&order={order}&per_page=100").json()["items"]
    times = [row["scheduled_at"] for row in rows]
    assert len(times) == 100 and times == sorted(times, reverse=order == "desc")


def test_a_creation_time_range_reads_the_days_it_covers_from_their_index(api, history):
    now = dt.datetime.now(dt.UTC)
    # A day's range ending late on the day before yesterday, whatever the time now: a range ending
    # minutes into its day (a run just after midnight) is rightly found through created_at, not by
    # walking that day's seq back from its newest job.
    end_day = (now - dt.timedelta(days=2)).date()
    until_at = dt.datetime.combine(end_day, dt.time(23), tzinfo=dt.UTC)
    since_at = until_at - dt.timedelta(days=1)
    since, until = (quote(f"{at:%Y-%m-%dT%H:%M:%SZ}") for at in (since_at, until_at))
    plan = list_plan(api, f"since={since}&until={until}")
    # Yesterday's partition holds a whole day of jobs and none of the range: it finds that through
    # its index on created_at, instead of being walked along seq to its end (or scanned).
    yesterday = f"django_ojs_job_completed_{now - dt.timedelta(days=1):%Y%m%d}"
    [found, _] = [line for line in plan.splitlines() if f" on {yesterday} " in line]  # found, then read
    assert f"ojs_job_created_completed_{now - dt.timedelta(days=1):%Y%m%d}" in found, plan
    # The day that holds the range's end (its newest jobs after the range) finds the range's newest
    # in the index of (seq, created_at) alone, walked from its newest entry, no row read to test it.
    [found, _] = [line for line in plan.splitlines() if f" on django_ojs_job_completed_{end_day:%Y%m%d} " in line]
    assert f"Index Only Scan Backward using ojs_job_seq_created_completed_{end_day:%Y%m%d} " in found, plan
    # A state named leaves the other states' partitions out, as the planner's pruning would.
    assert partitions.LIVE not in list_plan(api, f"since={since}&until={until}&state=completed")
    body = api.get(f"{ADMIN_JOBS}?since={since}&until={until}&per_page=100").json()
    made = [dt.datetime.fromisoformat(row["created_at"]) for row in body["items"]]
    assert len(made) == 100 and all(since_at <= at < until_at for at in made)
    seqs = list(Job.objects.filter(id__in=[row["id"] for row in body["items"]]).order_by("-seq")
                .values_list("id", flat=True))
    assert [row["id"] for row in body["items"]] == [str(job_id) for job_id in seqs]


def test_the_total_of_a_creation_time_range_past_its_bound_reads_no_waiting_job(api, history):
    """The range's finished jobs are counted first; past the exact count's bound (an estimate
    then), the waiting ones, with no index on created_at, are not read at all."""
    from django.test.utils import CaptureQueriesContext

    now = dt.datetime.now(dt.UTC)
    since = quote(f"{now - dt.timedelta(days=DAYS):%Y-%m-%dT%H:%M:%SZ}")
    with CaptureQueriesContext(connection) as queries:
        body = api.get(f"{ADMIN_JOBS}?since={since}").json()
    counts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT COUNT(*)")]
    assert counts and not any(partitions.LIVE in plan_of(count) for count in counts), counts
    assert body["pagination"]["total_exact"] is False
    assert body["pagination"]["total"] > 10_000


@pytest.mark.parametrize("sort", ["created_at", "priority"])
def test_a_range_read_partition_by_partition_is_the_plain_query_s_slice(history, sort):
    """Every page, every order: the pieces merged give the rows the one query over the table gives."""
    from django_ojs.api.admin.jobs import listed
    from django_ojs.api.admin.paging import Keyset
    from django_ojs.core.selection import JobFilter

    now = dt.datetime.now(dt.UTC)
    selection = JobFilter(created_since=now - dt.timedelta(days=3), created_until=now - dt.timedelta(days=2)).selection()
    for descending in (True, False):
        [rows] = Keyset(sort, descending).parts(selection)
        rows = listed(rows)
        for start in (0, 20, 9_990):
            assert partitions.slice_by_partition(rows, start, start + 21) == list(rows[start : start + 21])


def test_a_partition_dropped_before_the_read_leaves_the_page_to_the_plain_query(history):
    from django_ojs.api.admin.jobs import listed

    rows = listed(Job.objects.filter(created_at__lt=dt.datetime.now(dt.UTC)).order_by("-seq"))
    assert partitions.read_leaves(rows, [partitions.LIVE, "django_ojs_job_completed_20000101"], 0, 21) is None
    assert len(partitions.read_leaves(rows, [partitions.LIVE], 0, 21)) == 21


def leaf_indexes(stem: str) -> dict[str, tuple[str, bool]]:
    """Every index of ``stem`` on a history partition: its name -> (the index it is attached to, valid)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.relname, coalesce(p.relname, ''), i.indisvalid FROM pg_class AS c
               JOIN pg_index AS i ON i.indexrelid = c.oid
               LEFT JOIN pg_inherits AS h ON h.inhrelid = c.oid LEFT JOIN pg_class AS p ON p.oid = h.inhparent
               WHERE c.relname LIKE %s""",
            [f"{stem}%"],
        )
        return {name: (parent, valid) for name, parent, valid in cursor.fetchall()}


def test_the_history_partitions_carry_the_indexes_and_the_live_one_does_not():
    with connection.cursor() as cursor:
        leaves = partitions.day_partitions(cursor)
    for stem, (_, states) in partitions.HISTORY_INDEXES.items():
        found = leaf_indexes(f"{stem}_")
        for state in states:
            assert found[f"{stem}_{state}"][1], found
        for leaf in (leaf for leaf in leaves if leaf.state in states):
            assert found[f"{stem}_{leaf.name.removeprefix('django_ojs_job_')}"] == (f"{stem}_{leaf.state}", True)
        assert not [name for name in found if name.endswith("_live")]


def test_a_day_partition_the_reaper_makes_later_carries_them():
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=40)
    made = partitions.maintain(later)["created"]
    try:
        assert made
        found = leaf_indexes("ojs_job_")
        for leaf in made:
            state = leaf.removeprefix("django_ojs_job_").split("_")[0]
            for stem, (_, states) in partitions.HISTORY_INDEXES.items():
                name = f"{stem}_{leaf.removeprefix('django_ojs_job_')}"
                assert found.get(name) == ((f"{stem}_{state}", True) if state in states else None), found
    finally:
        with connection.cursor() as cursor:
            for name in made:
                cursor.execute(f"DROP TABLE {name}")


def test_migration_0025_builds_them_online_on_a_partitioned_table_with_history(history):
    """Back to 0024 (the indexes go), forward again: built per day partition, CONCURRENTLY, and
    attached, with a half-built one (invalid, as a failed concurrent build leaves it) built again."""
    try:
        call_command("migrate", "django_ojs", "0024", verbosity=0)
        assert not leaf_indexes("ojs_job_priority_completed")
        with connection.cursor() as cursor:
            leaf = next(p.name for p in partitions.day_partitions(cursor) if p.state == "completed" and p.start)
            broken = f"ojs_job_priority_{leaf.removeprefix('django_ojs_job_')}"
            with pytest.raises(Exception, match="could not create unique index"):  # priorities repeat
                cursor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {broken} ON {leaf} (priority)")
        assert leaf_indexes(broken) == {broken: ("", False)}
    finally:
        call_command("migrate", "django_ojs", verbosity=0)
    test_the_history_partitions_carry_the_indexes_and_the_live_one_does_not()
    assert partitions.build_history_indexes() == []  # nothing left to do
