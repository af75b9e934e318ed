"""Test-only store reset, served only while ``OJS["TEST_HOOKS"]`` is on."""

from __future__ import annotations

from django.db import connection, transaction


def reset_store() -> None:
    """Empty jobs, history, workers, cron and events; unpause every queue.

    Queue rows stay (unpaused): processes remember which queues have rows.
    """
    from ..models import CronJob, Event, Job, JobError, Queue, Worker

    tables = [model._meta.db_table for model in (JobError, Job, Worker, CronJob, Event)]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
        else:
            for model in (JobError, Job, Worker, CronJob, Event):
                model.objects.all()._raw_delete(model.objects.db)
        Queue.objects.update(paused=False, paused_at=None)
