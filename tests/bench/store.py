"""Our job store as the suite needs it: emptied, filled fast, and read back to judge a run.

``fill`` stores one job through the core and clones its row with
``INSERT ... SELECT generate_series``: every column as PUSH writes it, at
a few hundred thousand rows a second, whatever columns the table grows.
Each clone gets a UUIDv7 id made by PostgreSQL, time-ordered as ojs-core
requires and ``enqueue`` makes them, so the ``id`` and ``ojs_event_job``
indexes grow as they do in a deployment (random ids would scatter each
transition's entries over their whole width).
"""

from __future__ import annotations

from django.db import connection

from django_ojs.core.pg.events import UUID7_SQL
from django_ojs.core.testing import reset_store
from django_ojs.models import Event, Job

from .stage import BenchError

NOOP = "demo.noop"  # example_project.demo: a handler that does nothing
QUEUE = "default"


def reset() -> None:
    reset_store()


def fill(count: int, *, queue: str = QUEUE, job_type: str = NOOP, args: list | None = None,
         roots: bool = False) -> None:
    """Add ``count`` available jobs of ``job_type`` to ``queue``, then refresh the planner's statistics.

    The jobs are copies of one, so with tracing on they share its producer
    span; ``roots``: none, each execution starts a trace of its own (which a
    ratio sampler then samples or not, job by job).
    """
    import django_ojs

    template = django_ojs.enqueue(job_type, args or [], queue=queue)
    if roots:
        Job.objects.filter(seq=template.seq).update(meta={})
    if count > 1:
        table = Job._meta.db_table
        columns = [field.column for field in Job._meta.concrete_fields if field.column not in ("seq", "id")]
        names = ", ".join(f'"{column}"' for column in columns)
        with connection.cursor() as cursor:
            # Triggers off for the fill only: one NOTIFY per row would only slow it down.
            cursor.execute("SET session_replication_role = replica")
            try:
                cursor.execute(
                    f"INSERT INTO {table} (id, {names}) SELECT {UUID7_SQL}, {names} "
                    f"FROM {table} CROSS JOIN generate_series(2, %s) WHERE seq = %s",
                    [count, template.seq],
                )
            finally:
                cursor.execute("SET session_replication_role = DEFAULT")
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")


def busy() -> bool:
    """Jobs still to do: available or active (two partial indexes: cheap to poll)."""
    return Job.objects.filter(state__in=["available", "active"]).exists()


def completed() -> int:
    """Jobs completed so far."""
    return Job.objects.filter(state="completed").count()


def throughput() -> tuple[float, float]:
    """(jobs/s, seconds) from the first claim to the last completion, by the database's clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), extract(epoch FROM max(completed_at) - min(started_at)) "
            f"FROM {Job._meta.db_table} WHERE state = 'completed'"
        )
        count, seconds = cursor.fetchone()
    return count / float(seconds), float(seconds)


def verify_exactly_once(expected: int) -> None:
    """Every job completed on its first attempt, with exactly one started and one completed event."""
    table, events = Job._meta.db_table, Event._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1) FROM {table}"
        )
        total, once = cursor.fetchone()
        cursor.execute(
            f"SELECT count(*) FROM (SELECT j.id FROM {table} j LEFT JOIN {events} e "
            "ON e.job_id = j.id AND e.type IN ('job.started', 'job.completed') "
            "GROUP BY j.id HAVING count(*) FILTER (WHERE e.type = 'job.started') <> 1 "
            "OR count(*) FILTER (WHERE e.type = 'job.completed') <> 1) wrong"
        )
        wrong_events = cursor.fetchone()[0]
    if total != expected or once != expected or wrong_events:
        raise BenchError(
            f"exactly once broken: {total} jobs stored of {expected}, {once} completed on attempt 1, "
            f"{wrong_events} without exactly one job.started and one job.completed event"
        )
