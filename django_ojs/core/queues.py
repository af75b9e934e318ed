"""Queues: pause, resume and statistics (ojs-http-binding §11).

Queue rows hold operator settings only; counts are derived from the job
table (DESIGN invariant 7: no counter row that every ACK would update).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.db.models import Count, Min

from ..states import JobState
from . import events
from .clock import db_now

if TYPE_CHECKING:
    from ..models import Queue


class QueueManager(models.Manager):
    def pause(self, name: str) -> Queue:
        """Stop FETCH from handing out this queue's jobs; enqueueing still works."""
        return self._set_paused(name, True)

    def resume(self, name: str) -> Queue:
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> Queue:
        with transaction.atomic():
            now = db_now()
            queue, _ = self.update_or_create(
                name=name, defaults={"paused": paused, "paused_at": now if paused else None}
            )
            events.record([events.other_event("queue.paused" if paused else "queue.resumed", now, queue=name)])
        return queue

    def stats(self, name: str) -> dict[str, Any]:
        """Counts by state, the last hour's outcomes, and the oldest waiting job's age."""
        from ..models import Job

        now = db_now()
        jobs = Job.objects.filter(queue=name)
        counts = {state.value: 0 for state in JobState}
        counts.update(dict(jobs.values_list("state").annotate(n=Count("seq")).order_by()))
        hour_ago = now - dt.timedelta(hours=1)
        recent = dict(
            jobs.filter(state__in=[JobState.COMPLETED, JobState.DISCARDED], finished_at__gte=hour_ago)
            .values_list("state")
            .annotate(n=Count("seq"))
            .order_by()
        )
        oldest = jobs.filter(state=JobState.AVAILABLE).aggregate(at=Min("enqueued_at"))["at"]
        completed = recent.get(JobState.COMPLETED, 0)
        return {
            **counts,
            "completed_last_hour": completed,
            "failed_last_hour": recent.get(JobState.DISCARDED, 0),
            "throughput_per_second": round(completed / 3600, 3),
            "oldest_available_age_ms": int((now - oldest).total_seconds() * 1000) if oldest else None,
            "computed_at": now,
        }
