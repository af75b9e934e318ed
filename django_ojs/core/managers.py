"""The managers every door uses: one method per OJS operation or timed move."""

from __future__ import annotations

from django.db import models

from .claim import ClaimMixin
from .control import ControlMixin
from .maintenance import MaintenanceMixin
from .outcome import OutcomeMixin
from .push import PushMixin
from .queues import QueueManager
from .schedules import CronJobManager
from .workers import WorkerManager


class JobManager(PushMixin, ClaimMixin, OutcomeMixin, ControlMixin, MaintenanceMixin, models.Manager):
    """``Job.objects``: push, fetch, ack, fail, cancel, activate, resurrect, discard,
    purge_dead, and the reaper's promote_due, expire_overdue, requeue_lapsed,
    fail_timed_out and prune."""


__all__ = ["CronJobManager", "JobManager", "QueueManager", "WorkerManager"]
