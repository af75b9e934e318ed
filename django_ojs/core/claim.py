"""FETCH: claim available jobs for a worker (ojs-core §7.2, ojs-worker-protocol §6).

One transaction: for each requested queue in the order given, lock the next
jobs with ``SELECT ... FOR UPDATE SKIP LOCKED`` (priority high to low, then
insertion order) from the partial index of available jobs, then mark them all
active in one UPDATE. A queue is probed only while the claim is not yet
full, so a worker whose first queue has work pays one probe. Jobs whose
``expires_at`` has passed are discarded on the way, never run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Case, Exists, F, Value, When

from ..states import JobState, Move, target
from . import events
from .clock import TxNow
from .outcome import expire_rows

if TYPE_CHECKING:
    from ..models import Job


class ClaimMixin:
    def fetch(
        self,
        queues: Sequence[str],
        *,
        count: int = 1,
        worker_id: str | None = None,
        visibility_timeout: dt.timedelta | None = None,
    ) -> list[Job]:
        """Claim up to ``count`` jobs; an empty list when there is no work.

        ``visibility_timeout`` overrides each job's own reservation period.
        Paused queues yield nothing.
        """
        from ..models import Queue

        claimed: list[Job] = []
        if count < 1:
            return claimed
        with transaction.atomic():
            for queue in dict.fromkeys(queues):
                # Uncorrelated on purpose: PostgreSQL checks it once (a one-time
                # filter) and keeps the index scan. Correlated on job.queue, it
                # became an anti-join that read and sorted the whole backlog.
                paused = Exists(Queue.objects.filter(name=queue, paused=True))
                while len(claimed) < count:
                    rows = list(
                        self.select_for_update(skip_locked=True)
                        .filter(state=JobState.AVAILABLE, queue=queue)
                        .exclude(paused)
                        .annotate(db_now=TxNow())
                        .order_by("-priority", "seq")[: count - len(claimed)]
                    )
                    if not rows:
                        break
                    now = rows[0].db_now
                    expired = [job for job in rows if job.expires_at is not None and job.expires_at <= now]
                    if expired:
                        expire_rows(self, expired, now)
                    fresh = [job for job in rows if job.expires_at is None or job.expires_at > now]
                    self._activate(fresh, now, worker_id, visibility_timeout)
                    claimed.extend(fresh)
                    if not expired:
                        break
                if len(claimed) >= count:
                    break
        return claimed

    def _activate(
        self,
        jobs: list[Job],
        now: dt.datetime,
        worker_id: str | None,
        visibility_timeout: dt.timedelta | None,
    ) -> None:
        """Mark locked jobs active in one statement, and mirror it on the objects."""
        if not jobs:
            return
        lease = Value(visibility_timeout) if visibility_timeout is not None else F("visibility_timeout")
        self.filter(seq__in=[job.seq for job in jobs]).update(
            state=target(Move.CLAIM),
            attempt=F("attempt") + 1,
            started_at=now,
            worker_id=worker_id,
            lease_expires_at=Value(now) + lease,
            deadline_at=Case(When(timeout__isnull=False, then=Value(now) + F("timeout")), default=None),
        )
        for job in jobs:
            job.state = target(Move.CLAIM)
            job.attempt += 1
            job.started_at = now
            job.worker_id = worker_id
            job.lease_expires_at = now + (visibility_timeout or job.visibility_timeout)
            job.deadline_at = now + job.timeout if job.timeout else None
        events.record_for_jobs(
            "job.started",
            [job.seq for job in jobs],
            now,
            lambda: (events.job_event("job.started", job, now, worker_id=worker_id) for job in jobs),
            data={"worker_id": worker_id},
        )
