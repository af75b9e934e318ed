"""Fill the job store with a realistic spread of jobs in bulk SQL (PostgreSQL only).

Used by the admin benchmark (``admin_pages.py``); not a test. A million jobs
take about a minute: ``INSERT ... SELECT generate_series`` with every
attribute derived from the row number and a seeded ``random()``.

The shape: jobs created steadily over the last 7 days, newest last; most
completed, a few percent discarded (half kept as dead letters) or cancelled,
a backlog of available jobs among the newest 5 %, scheduled, retryable and
pending jobs, a few hundred active ones held by live workers; 30 job types
with a skewed popularity, each bound to one of 8 queues; most jobs carry a
tenant id and a correlation id in ``meta``; failed jobs carry an error with a
backtrace and one history row per failed attempt; one job in 100,000 has
arguments of about 300 KB.
"""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction

from django_ojs.models import Job, JobError, StatsBucket

QUEUES = ["default", "email", "billing", "reports", "webhooks", "images", "search-index", "critical"]
TYPES = [
    "email.send", "email.digest", "billing.invoice.generate", "billing.charge", "reports.daily",
    "reports.export", "webhooks.deliver", "images.resize", "images.thumbnail", "search.reindex",
    "search.update", "user.welcome", "user.cleanup", "orders.sync", "orders.refund", "sms.send",
    "push.notify", "cache.warm", "audit.archive", "data.import", "data.export", "pdf.render",
    "video.transcode", "crm.sync", "ledger.close", "fraud.score", "geo.lookup", "inventory.sync",
    "payments.payout", "analytics.rollup",
]
WORKERS = 20
DAYS = 7

_FILL_JOBS = """
INSERT INTO django_ojs_job (
    id, type, queue, args, meta, priority, state, attempt, max_attempts, releases, retry,
    visibility_timeout, timeout, tags, schema, extra, given_times, created_at, enqueued_at,
    scheduled_at, run_at, started_at, completed_at, finished_at, worker_id, lease_expires_at,
    result, error, dead_letter
)
SELECT
    md5(g::text || 'ojs-bench')::uuid,
    (%(types)s::text[])[t + 1],
    (%(queues)s::text[])[t %% 8 + 1],
    CASE WHEN g %% 100000 = 7
         THEN (SELECT jsonb_agg(jsonb_build_object('row', i, 'payload', repeat('x', 80)))
               FROM generate_series(1, 3000) i)
         ELSE jsonb_build_array(jsonb_build_object('user_id', g, 'template', 'welcome', 'locale', 'en'))
    END,
    CASE WHEN r3 < 0.9
         THEN jsonb_build_object('tenant_id', 'tenant-' || (g %% 997), 'correlation_id', md5(g::text))
         ELSE '{}'::jsonb
    END,
    CASE WHEN r2 < 0.8 THEN 0 WHEN r2 < 0.9 THEN 5 WHEN r2 < 0.95 THEN 10 ELSE -5 END,
    state,
    CASE state WHEN 'completed' THEN 1 WHEN 'discarded' THEN 3 WHEN 'retryable' THEN 1 + (g %% 2)
               WHEN 'active' THEN 1 ELSE 0 END,
    3, 0,
    '{"max_attempts": 3, "initial_interval": "PT1S", "backoff_coefficient": 2.0}'::jsonb,
    interval '30 minutes', interval '30 minutes', '[]'::jsonb, '', '{}'::jsonb, '{}'::jsonb,
    created,
    CASE WHEN state IN ('scheduled', 'pending') THEN NULL ELSE created END,
    CASE WHEN state = 'scheduled' THEN now() + r2 * interval '1 day' END,
    CASE WHEN state = 'scheduled' THEN now() + r2 * interval '1 day'
         WHEN state = 'retryable' THEN now() + r2 * interval '10 minutes' END,
    CASE WHEN state IN ('completed', 'discarded', 'active') THEN created + interval '1 second' END,
    CASE WHEN state IN ('completed', 'discarded') THEN created + (2 + r2 * 60) * interval '1 second' END,
    CASE WHEN state IN ('completed', 'discarded', 'cancelled')
         THEN created + (2 + r2 * 60) * interval '1 second' END,
    CASE WHEN state = 'active' THEN 'bench-worker-' || (g %% %(workers)s) END,
    CASE WHEN state = 'active' THEN now() + interval '30 minutes' END,
    CASE WHEN state = 'completed' THEN jsonb_build_object('ok', true, 'rows', g %% 100) END,
    CASE WHEN state IN ('discarded', 'retryable') THEN jsonb_build_object(
        'type', 'ConnectionError', 'code', 'ConnectionError',
        'message', 'connection refused to billing-db:5432 after ' || (g %% 30) || ' s',
        'retryable', true, 'attempt', 3,
        'backtrace', (SELECT jsonb_agg('File "app/jobs.py", line ' || i || ', in handler')
                      FROM generate_series(1, 20) i),
        'occurred_at', to_char(created + interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
    END,
    state = 'discarded' AND g %% 2 = 0
FROM (
    SELECT g, t, r2, r3, created,
        STATE_CASE AS state
    FROM (
        SELECT g, random() AS r1, random() AS r2, random() AS r3,
               floor(30 * power(random(), 3))::int AS t,
               CREATED AS created
        FROM generate_series(%(first)s, %(last)s) g
    ) raw
) rows
"""

# Created steadily over the last DAYS days, newest last.
_STEADY_CREATION = "now() - (%(n)s - g) * (interval '1 day' * %(days)s / %(n)s)"
# The scale fill's finished jobs over the last DAYS days, the newest finishing about now (so the throughput
# windows see a steady rate), then its waiting jobs, created over the last hour.
_FINISHED_THEN_WAITING = (
    "CASE WHEN g <= %(finished)s"
    " THEN now() - interval '62 seconds' - (%(finished)s - g) * (interval '1 day' * %(days)s / %(finished)s)"
    " ELSE now() - (%(n)s - g) * (interval '1 hour' / %(waiting)s) END"
)

# The realistic mix: most jobs finished, a backlog among the newest 5 %, a few of every other state.
_MIXED_STATES = """CASE
            WHEN r1 < 0.0005 THEN 'active'
            WHEN g > %(n)s * 0.95 AND r1 < 0.6 THEN 'available'
            WHEN r1 < 0.03 THEN 'discarded'
            WHEN r1 < 0.04 THEN 'cancelled'
            WHEN r1 < 0.055 THEN 'scheduled'
            WHEN r1 < 0.06 THEN 'retryable'
            WHEN r1 < 0.065 THEN 'pending'
            ELSE 'completed'
        END"""
# The scale fill (``fill_scale``): the first ``finished`` rows finished, the newest ones waiting
# (available, scheduled, retryable) but for about one in 2,000 held by a worker.
_SPLIT_STATES = """CASE
            WHEN g <= %(finished)s THEN
                CASE WHEN r1 < 0.03 THEN 'discarded' WHEN r1 < 0.04 THEN 'cancelled' ELSE 'completed' END
            WHEN r1 < 0.0005 THEN 'active'
            WHEN r1 < 0.6 THEN 'available'
            WHEN r1 < 0.85 THEN 'scheduled'
            ELSE 'retryable'
        END"""

_FILL_ERRORS = """
INSERT INTO django_ojs_joberror (job_id, attempt, type, code, message, backtrace, retryable, occurred_at)
SELECT j.seq, a, 'ConnectionError', 'ConnectionError',
       'connection refused to billing-db:5432 (attempt ' || a || ')',
       (SELECT jsonb_agg('File "app/jobs.py", line ' || i || ', in handler') FROM generate_series(1, 20) i),
       true, j.created_at + a * interval '20 seconds'
FROM django_ojs_job j CROSS JOIN LATERAL generate_series(1, j.attempt) a
WHERE j.state IN ('discarded', 'retryable')
"""

_FILL_WORKERS = """
INSERT INTO django_ojs_worker (
    id, hostname, pid, queues, concurrency, labels, state, directive, directive_set_at,
    active_jobs, active_job_ids, started_at, registered_at, last_heartbeat_at
)
SELECT 'bench-worker-' || w, 'web-' || (w %% 5) || '.internal', 1000 + w,
       to_jsonb(%(queues)s::text[]), 10, '[]'::jsonb,
       CASE WHEN w = 3 THEN 'quiet' ELSE 'running' END,
       CASE WHEN w IN (3, 4) THEN 'quiet' ELSE 'running' END,
       CASE WHEN w IN (3, 4) THEN now() - interval '20 seconds' END,
       (SELECT count(*) FROM django_ojs_job j WHERE j.state = 'active' AND j.worker_id = 'bench-worker-' || w),
       '[]'::jsonb, now() - interval '2 hours', now() - interval '2 hours',
       CASE WHEN w >= %(workers)s - 2 THEN now() - interval '10 minutes' ELSE now() - interval '2 seconds' END
FROM generate_series(0, %(workers)s - 1) w
"""


def fill(count: int, batch: int = 250_000) -> None:
    """Replace every job, error, worker and queue row with ``count`` generated jobs."""
    params = {"types": TYPES, "queues": QUEUES, "workers": WORKERS, "days": DAYS, "n": count}
    jobs = _FILL_JOBS.replace("STATE_CASE", _MIXED_STATES).replace("CREATED", _STEADY_CREATION)
    with transaction.atomic(), connection.cursor() as cursor:
        _empty(cursor)
        cursor.execute("SELECT setseed(0.42)")
        for first in range(1, count + 1, batch):
            cursor.execute(jobs, {**params, "first": first, "last": min(first + batch - 1, count)})
        cursor.execute(_FILL_ERRORS)
        _fill_workers_and_queues(cursor, params)
    _settle()


def fill_scale(finished: int, waiting: int, batch: int = 500_000, report=print) -> None:
    """Replace every job with ``finished`` finished ones (completed, a few percent discarded or cancelled)
    over the last 7 days up to now, then ``waiting`` ones created over the last hour, waiting (available,
    scheduled, retryable; about one in 2,000 active); with the statistics history those jobs leave, and
    the dead letter capped as the reaper caps it.

    Built for tens of millions of rows: the job and error tables' indexes are dropped, the rows inserted
    in committed batches, then the indexes made again from their own definitions (the migrations'), as
    a restore would; ``report`` hears each step and its progress.
    """
    count = finished + waiting
    params = {"types": TYPES, "queues": QUEUES, "workers": WORKERS, "days": DAYS, "n": count,
              "finished": finished, "waiting": max(waiting, 1)}
    jobs = _FILL_JOBS.replace("STATE_CASE", _SPLIT_STATES).replace("CREATED", _FINISHED_THEN_WAITING)
    with connection.cursor() as cursor:
        _empty(cursor)
        _make_day_partitions()
        indexes = _drop_indexes(cursor, [Job._meta.db_table, JobError._meta.db_table])
        cursor.execute("SELECT setseed(0.42)")
        for first in range(1, count + 1, batch):
            cursor.execute(jobs, {**params, "first": first, "last": min(first + batch - 1, count)})
            report(f"  jobs {min(first + batch - 1, count):,} of {count:,}")
        _cap_dead_letter(cursor)
        cursor.execute(_FILL_ERRORS)
        report("  errors written; making the indexes again")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for name, definition in indexes:
            cursor.execute(definition)
            report(f"  index {name}")
        cursor.execute("RESET maintenance_work_mem")
        _fill_workers_and_queues(cursor, params)
        _fill_history(cursor)
        report("  statistics history written")
    _settle()


def _make_day_partitions() -> None:
    """On a table partitioned by state (core/partitions.py), the partitions of the days filled, as a
    reaper running all along would have made them: its upkeep makes only today's and the coming days'."""
    from django.utils import timezone

    from django_ojs.core import partitions

    now = timezone.now()
    for back in range(DAYS + 1, -1, -1):
        partitions.maintain(now - dt.timedelta(days=back))


def _empty(cursor) -> None:
    cursor.execute(
        "TRUNCATE django_ojs_joberror, django_ojs_jobstep, django_ojs_job, django_ojs_worker, django_ojs_queue, "
        "django_ojs_event RESTART IDENTITY"
    )


def _drop_indexes(cursor, tables: list[str]) -> list[tuple[str, str]]:
    """Drop the tables' indexes but those behind a constraint (primary key, unique id); return
    each one's name and the statement that makes it again."""
    cursor.execute(
        "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
        "WHERE indrelid = ANY(%s::regclass[]) "
        "AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE conindid <> 0)",
        [tables],
    )
    indexes = cursor.fetchall()
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {name}")
    return indexes


def _cap_dead_letter(cursor) -> None:
    """Keep the newest ``RETENTION["dead_letter_max_count"]`` dead letters, as the reaper does (it deletes
    the older ones; here they stay as plain discards)."""
    from django_ojs.conf import ojs_settings

    cursor.execute(
        "UPDATE django_ojs_job SET dead_letter = false WHERE dead_letter AND seq < ("
        "SELECT seq FROM django_ojs_job WHERE dead_letter ORDER BY seq DESC OFFSET %s LIMIT 1)",
        [ojs_settings.RETENTION["dead_letter_max_count"] - 1],
    )


def _fill_workers_and_queues(cursor, params: dict) -> None:
    cursor.execute(_FILL_WORKERS, params)
    cursor.execute(
        "INSERT INTO django_ojs_queue (name, paused, paused_at, created_at, overflow_policy, fairness_weights,"
        " fairness_default_weight) "
        "SELECT q, q = 'reports', CASE WHEN q = 'reports' THEN now() END, now() - interval '7 days', 'reject', "
        "'{}', 1 "
        "FROM unnest(%(queues)s::text[]) q",
        params,
    )


def _fill_history(cursor) -> None:
    """The hour buckets of every job's transitions (and minute buckets of the last two days), as the
    reaper would have counted them, and the history's cursor at now."""
    from django_ojs.core.history import HOUR, MINUTE

    buckets = StatsBucket._meta.db_table
    cursor.execute(f"TRUNCATE {buckets}")
    for span, unit, since in ((HOUR, "hour", "-infinity"), (MINUTE, "minute", "2 days")):
        after = "'-infinity'::timestamptz" if since == "-infinity" else f"date_trunc('minute', now()) - interval '{since}'"
        cursor.execute(
            f"""INSERT INTO {buckets} (span, start, queue, transition, count)
                SELECT %s, date_trunc(%s, finished_at) b, queue, state, count(*) FROM django_ojs_job
                WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= {after}
                  AND finished_at < date_trunc(%s, now())
                GROUP BY b, queue, state
                UNION ALL
                SELECT %s, date_trunc(%s, created_at) b, queue, 'enqueued', count(*) FROM django_ojs_job
                WHERE created_at >= {after} AND created_at < date_trunc(%s, now())
                GROUP BY b, queue""",
            [span, unit, unit, span, unit, unit],
        )
    cursor.execute("DELETE FROM django_ojs_historycursor")
    cursor.execute(
        "INSERT INTO django_ojs_historycursor (id, began_at, counted_through, rolled_through, marks) "
        "SELECT 1, date_trunc('hour', min(created_at)), date_trunc('minute', now()), date_trunc('hour', now()), "
        "jsonb_build_array(jsonb_build_array(to_char(now() - interval '1 minute', "
        "'YYYY-MM-DD\"T\"HH24:MI:SSOF:00'), 0)) FROM django_ojs_job"
    )


def _settle() -> None:
    # Fresh statistics and visibility map, as autovacuum would leave a settled table.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE django_ojs_job")
        cursor.execute("VACUUM ANALYZE django_ojs_joberror")
        cursor.execute("ANALYZE django_ojs_worker")
        cursor.execute(f"ANALYZE {StatsBucket._meta.db_table}")
