"""Small helpers for tests that read and move rows of the job store."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from django.db import connection, connections, transaction
from django.forms.models import model_to_dict

from django_ojs.core.clock import db_now
from django_ojs.core.history import hour_floor, minute_floor
from django_ojs.core.types import HeldJob
from django_ojs.models import Event, HistoryCursor, Job, JobError


def reload(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def holding(*jobs: Job) -> list[HeldJob]:
    """The attempts a worker holds, as its heartbeat names them: (job id, attempt)."""
    return [HeldJob(str(job.id), job.attempt) for job in jobs]


def ago(**delta: float) -> dt.datetime:
    """A moment in the past by the database clock: ``ago(seconds=5)``."""
    return db_now() - dt.timedelta(**delta)


def later(**delta: float) -> dt.datetime:
    return db_now() + dt.timedelta(**delta)


def update(job: Job, **values: Any) -> Job:
    """Write columns directly (to move time: set a deadline in the past) and reload."""
    Job.objects.filter(pk=job.pk).update(**values)
    return reload(job)


def row(job: Job) -> dict[str, Any]:
    """Every stored column of a job, for 'nothing changed' comparisons."""
    return model_to_dict(reload(job), fields=[f.name for f in Job._meta.concrete_fields])


def history(job: Job) -> list[tuple[int, str]]:
    """The job's error history as (attempt, type), oldest first."""
    return list(JobError.objects.filter(job_id=job.pk).order_by("id").values_list("attempt", "type"))


def event_types(job: Job | None = None) -> list[str]:
    events = Event.objects.order_by("seq")
    if job is not None:
        events = events.filter(job_id=job.id)
    return list(events.values_list("type", flat=True))


def database_url() -> str:
    """The test database as a DATABASE_URL, for the example project run in a subprocess."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    return f"postgres://{user}@{settings.get('HOST') or '127.0.0.1'}:{settings.get('PORT') or 5432}/{settings['NAME']}"


def race(targets: list[Callable[[], None]], timeout: float = 300) -> None:
    """Run each target in a thread of its own, all released at once; re-raise the first error.

    Each thread closes its database connection when done (Django opens one per thread).
    """
    from django.db import connections

    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def run(target: Callable[[], None]) -> None:
        try:
            start.wait()
            target()
        except BaseException as exc:  # reported by the calling thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish in time"
    if errors:
        raise errors[0]


def history_running_since(began_at: dt.datetime, *, counted_through: dt.datetime | None = None) -> HistoryCursor:
    """The statistics history's cursor as a reaper running since ``began_at`` leaves it.

    Counted through ``counted_through`` (the current minute by default), hours
    summed through the hour before it, with a mark read before ``began_at``
    (seq 0: every event is above it).
    """
    through = counted_through or minute_floor(db_now())
    return HistoryCursor.objects.update_or_create(
        id=1,
        defaults={"began_at": began_at, "counted_through": through, "rolled_through": hour_floor(through),
                  "marks": [[(began_at - dt.timedelta(minutes=1)).isoformat(), 0]]},
    )[0]


@contextlib.contextmanager
def row_held(job: Job, patience: float) -> Iterator[threading.Thread]:
    """Another connection holds ``job``'s row FOR UPDATE, as a worker settling it would, until the block
    ends; yields its thread (alive while it holds the row)."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Job.objects.select_for_update().get(pk=job.pk)
                locked.set()
                release.wait(patience)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(patience)
        yield holder
    finally:
        release.set()
        holder.join(patience)


class Background:
    """``work`` run in a thread of its own, started at once, its database connection closed when it
    ends; ``raised`` is what it raised, if anything, once ``join`` has returned."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.raised: BaseException | None = None

        def run() -> None:
            try:
                work()
            except BaseException as exc:  # the caller's to judge
                self.raised = exc
            finally:
                connection.close()  # this thread's own

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)


def pg_session(**options: Any) -> Any:
    """A connection of its own to the PostgreSQL test database, outside Django (psycopg's options)."""
    db = connections["default"].settings_dict
    return psycopg.connect(dbname=db["NAME"], host=db["HOST"] or None, port=db["PORT"] or None,
                           user=db["USER"] or None, password=db["PASSWORD"] or None, **options)


def live_index(name: str) -> str:
    """A model index's name on the database: on a partitioned job table (core/partitions.py) the
    live partition's copy is ``<name>_live``."""
    from django_ojs.core.partitions import is_partitioned

    return f"{name}_live" if is_partitioned() else name
