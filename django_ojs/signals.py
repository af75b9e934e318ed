"""Lifecycle events as Django signals: the public name of ``django_ojs.observe.signals``.

Connect to one kind (``from django_ojs.signals import job_completed``) or to
every event with ``ojs_event``; the signals and when they are sent are
described where they are defined.
"""

from .observe.signals import (
    cron_skipped,
    cron_triggered,
    job_cancelled,
    job_completed,
    job_discarded,
    job_enqueued,
    job_expired,
    job_failed,
    job_progress,
    job_retrying,
    job_scheduled,
    job_signalled,
    job_snoozed,
    job_started,
    job_step_completed,
    job_waiting,
    ojs_event,
    queue_paused,
    queue_resumed,
    worker_died,
    worker_started,
    worker_stopped,
)

__all__ = [
    "cron_skipped",
    "cron_triggered",
    "job_cancelled",
    "job_completed",
    "job_discarded",
    "job_enqueued",
    "job_expired",
    "job_failed",
    "job_progress",
    "job_retrying",
    "job_scheduled",
    "job_signalled",
    "job_snoozed",
    "job_started",
    "job_step_completed",
    "job_waiting",
    "ojs_event",
    "queue_paused",
    "queue_resumed",
    "worker_died",
    "worker_started",
    "worker_stopped",
]
